"""The system sampler: psutil always, NVML only where a driver answers (not on CI)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from warehouse.live.system import (
    NvmlReader,
    SystemSampler,
    gpu_totals,
    throttle_reason_names,
    torch_memory,
)

SYSTEM_KEYS = {"cpu_pct", "ram_used_bytes", "ram_total_bytes", "rss_bytes", "disk_used_pct"}


def nvml_usable() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return False
    return True


@pytest.mark.skipif(nvml_usable(), reason="this machine has an NVIDIA driver: see the GPU check")
def test_without_nvml_a_sample_has_machine_figures_and_no_gpu_fields_silently(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO):
        sample = SystemSampler(0).sample()
    assert set(sample) == {"system"}
    assert set(sample["system"]) == SYSTEM_KEYS
    assert not any(k.startswith("gpu") for k in sample["system"])
    assert 0 < sample["system"]["ram_used_bytes"] < sample["system"]["ram_total_bytes"]
    assert sample["system"]["rss_bytes"] > 10_000_000  # this Python process at least
    assert caplog.records == []  # no warning, not even an info line


def test_without_the_nvidia_driver_nvml_is_not_even_imported() -> None:
    from warehouse.capture.environment import nvidia_driver_absent

    if not nvidia_driver_absent():
        pytest.skip("the NVIDIA driver is loaded here: NVML is used (see the GPU check)")
    code = (
        "import sys\n"
        "from warehouse.live.system import SystemSampler\n"
        "sample = SystemSampler(0).sample()\n"
        "print(sorted(sample['system'])[:1], 'pynvml' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.split()[-1] == "False"


def test_rss_covers_child_processes(tmp_path: Any) -> None:
    sampler = SystemSampler(0)
    alone = sampler.sample()["system"]["rss_bytes"]
    # the child says when its memory is resident (an event: no deadline to miss when the
    # machine is busy and the child starts slowly)
    code = "import sys; b = bytearray(200_000_000); print('ready', flush=True); sys.stdin.read()"
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        sampler._children_at = -1e9  # list children now rather than in 5 s
        with_child = sampler.sample()["system"]["rss_bytes"]
    finally:
        child.communicate("")
    assert with_child - alone > 150_000_000


def test_the_thread_samples_at_its_interval_and_interval_zero_means_off() -> None:
    got: list[tuple[float, dict[str, Any]]] = []
    done = threading.Event()

    def on_sample(t: float, sample: dict[str, Any]) -> None:
        got.append((t, sample))
        if len(got) >= 3:
            done.set()

    sampler = SystemSampler(0.05, on_sample=on_sample)
    sampler.start()
    done.wait()  # no deadline: a busy machine only delays the samples (pytest-timeout guards)
    sampler.stop()
    assert [set(s["system"]) >= SYSTEM_KEYS for _, s in got[:3]] == [True] * 3
    assert got[0][0] < got[1][0] < got[2][0]

    off = SystemSampler(0, on_sample=on_sample)
    off.start()
    assert off._thread is None
    off.stop()


def test_torch_figures_only_when_torch_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert torch_memory() == {}


def test_python_m_prints_one_sample_as_json() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "warehouse.live.system"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    sample = json.loads(out.stdout)
    assert set(sample["system"]) >= SYSTEM_KEYS


# ---- the NVML reader, with NVMLError_NotSupported injected field by field -------------------
class _NotSupported(Exception):
    pass


def _stand_in_nvml(unsupported: set[str]) -> Any:
    """An object with pynvml's call shapes (crash injection: chosen calls raise NotSupported)."""

    def call(name: str, value: Any) -> Any:
        def fn(*args: Any) -> Any:
            if name in unsupported:
                raise _NotSupported(name)
            return value(*args) if callable(value) else value

        return fn

    return SimpleNamespace(
        NVMLError=_NotSupported,
        NVML_TEMPERATURE_GPU=0,
        NVML_CLOCK_SM=1,
        nvmlDeviceGetCount=call("count", 2),
        nvmlDeviceGetHandleByIndex=call("handle", lambda i: f"h{i}"),
        nvmlDeviceGetName=call("name", lambda h: b"NVIDIA H100" if h == "h0" else "NVIDIA A100"),
        nvmlDeviceGetUUID=call("uuid", lambda h: f"GPU-{h}-uuid"),
        nvmlDeviceGetUtilizationRates=call(
            "util", lambda h: SimpleNamespace(gpu=90 if h == "h0" else 70)
        ),
        nvmlDeviceGetMemoryInfo=call("mem", SimpleNamespace(used=30 * 2**30, total=80 * 2**30)),
        nvmlDeviceGetPowerUsage=call("power", lambda h: 350_000),
        nvmlDeviceGetEnforcedPowerLimit=call("limit", 700_000),
        nvmlDeviceGetTemperature=call("temp", lambda h, s: 71 if h == "h0" else 65),
        nvmlDeviceGetClockInfo=call("clock", 1980),
        nvmlDeviceGetCurrentClocksEventReasons=call("reasons", 0x4 | 0x20),
    )


def test_nvml_reader_reads_every_field_and_names_throttle_reasons() -> None:
    gpus = NvmlReader(_stand_in_nvml(set())).read()
    assert gpus[0] == {
        "index": 0,
        "name": "NVIDIA H100",
        "util_pct": 90.0,
        "mem_used_bytes": 30 * 2**30,
        "mem_total_bytes": 80 * 2**30,
        "power_w": 350.0,
        "power_limit_w": 700.0,
        "temperature_c": 71.0,
        "sm_clock_mhz": 1980.0,
        "throttle_reasons": ["sw_power_cap", "sw_thermal_slowdown"],
    }
    assert gpus[1]["name"] == "NVIDIA A100"


def test_an_unsupported_nvml_field_is_absent_and_the_others_stay() -> None:
    gpus = NvmlReader(_stand_in_nvml({"power", "limit", "reasons", "name"})).read()
    for gpu in gpus:
        assert "power_w" not in gpu
        assert "power_limit_w" not in gpu
        assert "throttle_reasons" not in gpu
        assert "name" not in gpu
        assert gpu["util_pct"] > 0
        assert gpu["temperature_c"] > 0


@pytest.mark.parametrize(
    ("visible", "indices"), [("1", [1]), ("GPU-h0", [0]), ("0,1", [0, 1]), ("", []), (None, [0, 1])]
)
def test_cuda_visible_devices_limits_the_gpus(visible: str | None, indices: list[int]) -> None:
    assert [g["index"] for g in NvmlReader(_stand_in_nvml(set()), visible).read()] == indices


def test_gpu_totals_mean_util_sum_memory_and_power_max_temperature() -> None:
    totals = gpu_totals(NvmlReader(_stand_in_nvml(set())).read())
    assert totals == {
        "gpu_util_pct": 80.0,
        "gpu_mem_used_bytes": 60 * 2**30,
        "gpu_mem_total_bytes": 160 * 2**30,
        "gpu_power_w": 700.0,
        "gpu_temperature_c": 71.0,
    }
    assert gpu_totals([]) == {}


def test_throttle_reason_names() -> None:
    assert throttle_reason_names(0) == []
    assert throttle_reason_names(0x1 | 0x40) == ["gpu_idle", "hw_thermal_slowdown"]
