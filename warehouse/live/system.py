"""The machine's health while a run trains: CPU, memory, disk and, when there is one, the GPU.

:class:`SystemSampler` takes a sample every ``interval_s`` seconds on a daemon thread (0 = off)
and hands it to a callback; :meth:`SystemSampler.sample` takes one on the caller's thread.
A sample is ``{"system": {...}, "gpus": [...]}`` with exactly the keys of the step
document's ``system`` and ``gpus`` fields:

- psutil: ``cpu_pct`` (all cores, since the previous sample), ``ram_used_bytes``,
  ``ram_total_bytes``, ``rss_bytes`` (this process and its descendants: DataLoader workers, or
  the child of ``warehouse watch``), ``disk_used_pct`` (the filesystem of ``disk_path``).
- NVML (``nvidia-ml-py``), when it imports and ``nvmlInit`` works: per GPU ``util_pct``,
  ``mem_used_bytes``, ``mem_total_bytes``, ``power_w``, ``power_limit_w``, ``temperature_c``,
  ``sm_clock_mhz``, ``throttle_reasons`` (names), and over all GPUs in ``system``:
  ``gpu_util_pct`` (mean), ``gpu_mem_used_bytes``/``gpu_mem_total_bytes``/``gpu_power_w``
  (sums), ``gpu_temperature_c`` (max). ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs) limits the
  GPUs to the ones the job can use. Every NVML call is guarded on its own: a field a GPU does
  not support is simply absent.
- torch: ``torch_allocated_bytes``/``torch_reserved_bytes`` summed over devices, only when the
  program already imported torch and initialised CUDA (the sampler never initialises it).

No NVML, no driver or no GPU: the GPU fields are absent, silently (one debug log line).

``python -m warehouse.live.system`` prints one sample as JSON (the check on a GPU machine).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Sample = dict[str, Any]

_CHILDREN_TTL_S = 5.0

_THROTTLE_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


def throttle_reason_names(mask: int) -> list[str]:
    """NVML's clock-event (throttle) bitmask as names, e.g. ``["sw_power_cap"]``."""
    return [name for bit, name in _THROTTLE_REASONS if mask & bit]


class NvmlReader:
    """Per-GPU figures through an NVML module (``pynvml``); every call guarded on its own."""

    def __init__(self, nvml: Any, visible: str | None = None) -> None:
        self.nvml = nvml
        self.devices: list[tuple[int, Any, str | None]] = []  # (nvml index, handle, name)
        count = nvml.nvmlDeviceGetCount()
        wanted = _parse_visible(visible)
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except nvml.NVMLError:
                continue
            if wanted is not None and not self._is_visible(index, handle, wanted):
                continue
            name = self._call(nvml.nvmlDeviceGetName, handle)
            if isinstance(name, bytes):
                name = name.decode("utf-8", "replace")
            self.devices.append((index, handle, name))

    def _is_visible(self, index: int, handle: Any, wanted: list[str]) -> bool:
        if str(index) in wanted:
            return True
        uuid = self._call(self.nvml.nvmlDeviceGetUUID, handle)
        if isinstance(uuid, bytes):
            uuid = uuid.decode("ascii", "replace")
        return bool(uuid) and any(uuid.startswith(w) for w in wanted if w.startswith("GPU-"))

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except self.nvml.NVMLError:  # NotSupported, NoPermission, GpuIsLost ...
            return None

    def read(self) -> list[dict[str, Any]]:
        """One dict per visible GPU with the fields this GPU supports."""
        nvml = self.nvml
        gpus: list[dict[str, Any]] = []
        for index, handle, name in self.devices:
            gpu: dict[str, Any] = {"index": index}
            if name:
                gpu["name"] = name
            util = self._call(nvml.nvmlDeviceGetUtilizationRates, handle)
            if util is not None:
                gpu["util_pct"] = float(util.gpu)
            mem = self._call(nvml.nvmlDeviceGetMemoryInfo, handle)
            if mem is not None:
                gpu["mem_used_bytes"] = int(mem.used)
                gpu["mem_total_bytes"] = int(mem.total)
            power = self._call(nvml.nvmlDeviceGetPowerUsage, handle)
            if power is not None:
                gpu["power_w"] = power / 1000.0
            limit = self._call(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
            if limit is not None:
                gpu["power_limit_w"] = limit / 1000.0
            temp = self._call(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)
            if temp is not None:
                gpu["temperature_c"] = float(temp)
            clock = self._call(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM)
            if clock is not None:
                gpu["sm_clock_mhz"] = float(clock)
            reasons_fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
            )
            if reasons_fn is not None:
                mask = self._call(reasons_fn, handle)
                if mask is not None:
                    gpu["throttle_reasons"] = throttle_reason_names(int(mask))
            gpus.append(gpu)
        return gpus


def _parse_visible(value: str | None) -> list[str] | None:
    """``CUDA_VISIBLE_DEVICES`` as a list of indices/UUID prefixes; None = no restriction."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if any(v.startswith("MIG-") for v in items):
        return None  # MIG instances: NVML sees the parent GPUs; report them all
    return items


def gpu_totals(gpus: list[dict[str, Any]]) -> dict[str, float]:
    """The ``system.gpu_*`` figures over all GPUs: mean util, summed memory/power, max temp."""
    out: dict[str, float] = {}
    utils = [g["util_pct"] for g in gpus if "util_pct" in g]
    if utils:
        out["gpu_util_pct"] = sum(utils) / len(utils)
    for src, dst in (
        ("mem_used_bytes", "gpu_mem_used_bytes"),
        ("mem_total_bytes", "gpu_mem_total_bytes"),
        ("power_w", "gpu_power_w"),
    ):
        values = [g[src] for g in gpus if src in g]
        if values:
            out[dst] = sum(values)
    temps = [g["temperature_c"] for g in gpus if "temperature_c" in g]
    if temps:
        out["gpu_temperature_c"] = max(temps)
    return out


def torch_memory() -> dict[str, int]:
    """torch's CUDA allocator figures, only if torch is imported and CUDA initialised."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    try:
        cuda = torch.cuda
        if not cuda.is_available() or not cuda.is_initialized():
            return {}
        devices = range(cuda.device_count())
        return {
            "torch_allocated_bytes": int(sum(cuda.memory_allocated(d) for d in devices)),
            "torch_reserved_bytes": int(sum(cuda.memory_reserved(d) for d in devices)),
        }
    except Exception:  # torch internals vary across versions; never break sampling
        log.debug("torch CUDA memory figures unavailable", exc_info=True)
        return {}


class SystemSampler:
    """Samples the machine every ``interval_s`` seconds on a daemon thread (0 = never)."""

    def __init__(
        self,
        interval_s: float = 10.0,
        *,
        on_sample: Callable[[float, Sample], None] | None = None,
        disk_path: str | os.PathLike[str] | None = None,
        use_nvml: bool = True,
    ) -> None:
        import psutil

        self.interval_s = float(interval_s)
        self.on_sample = on_sample
        self.disk_path = str(Path(disk_path) if disk_path is not None else Path.cwd())
        self.latest: Sample | None = None
        self._psutil = psutil
        self._process = psutil.Process()
        self._use_nvml = use_nvml
        self._nvml: NvmlReader | None = None
        self._nvml_tried = False
        self._children: list[Any] = []
        self._children_at = -1e9
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        psutil.cpu_percent(None)  # prime: the first real reading covers the time since now

    # one sample -----------------------------------------------------------------------------
    def sample(self) -> Sample:
        """One sample now: ``{"system": {...}}`` plus ``"gpus": [...]`` when GPUs are seen."""
        with self._lock:  # the thread and a per-step caller may both sample
            system: dict[str, Any] = {}
            ps = self._psutil
            try:
                system["cpu_pct"] = float(ps.cpu_percent(None))
                vm = ps.virtual_memory()
                system["ram_used_bytes"] = int(vm.used)
                system["ram_total_bytes"] = int(vm.total)
            except (OSError, ps.Error):
                log.debug("psutil CPU/RAM figures unavailable", exc_info=True)
            rss = self._tree_rss()
            if rss is not None:
                system["rss_bytes"] = rss
            try:
                system["disk_used_pct"] = float(ps.disk_usage(self.disk_path).percent)
            except (OSError, ps.Error):
                log.debug("disk usage of %s unavailable", self.disk_path, exc_info=True)
            out: Sample = {"system": system}
            reader = self._nvml_reader()
            if reader is not None:
                gpus = reader.read()
                if gpus:
                    system.update(gpu_totals(gpus))
                    out["gpus"] = gpus
            system.update(torch_memory())
            self.latest = out
            return out

    def _tree_rss(self) -> int | None:
        ps = self._psutil
        try:
            total = int(self._process.memory_info().rss)
        except (OSError, ps.Error):
            return None
        now = time.monotonic()
        if now - self._children_at > _CHILDREN_TTL_S:  # listing them scans /proc: ~1 ms
            try:
                self._children = self._process.children(recursive=True)
            except (OSError, ps.Error):
                self._children = []
            self._children_at = now
        for child in self._children:
            try:
                total += int(child.memory_info().rss)
            except (OSError, ps.Error):  # gone since we listed it
                continue
        return total

    def _nvml_reader(self) -> NvmlReader | None:
        if self._nvml_tried or not self._use_nvml:
            return self._nvml
        self._nvml_tried = True
        from warehouse.capture.environment import nvidia_driver_absent

        if nvidia_driver_absent():
            log.debug("no NVIDIA driver loaded: no GPU figures")
            return None
        try:
            import pynvml
        except ImportError:
            log.debug("nvidia-ml-py not installed: no GPU figures")
            return None
        try:
            pynvml.nvmlInit()
            reader = NvmlReader(pynvml, os.environ.get("CUDA_VISIBLE_DEVICES"))
        except pynvml.NVMLError as exc:
            log.debug("NVML unavailable (%s): no GPU figures", exc)
            return None
        if reader.devices:
            self._nvml = reader
        return self._nvml

    # the thread -----------------------------------------------------------------------------
    def start(self) -> None:
        """Start sampling on a daemon thread (a no-op when ``interval_s`` is 0)."""
        if self.interval_s <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name="warehouse-system-sampler", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        # the first sample comes soon (cpu_pct needs a little history), then every interval
        wait = min(self.interval_s, 1.0)
        while not self._stop.wait(wait):
            now = time.time()
            try:
                sample = self.sample()
                if self.on_sample is not None:
                    self.on_sample(now, sample)
            except Exception:  # a sampler must never take the run down
                log.warning("system sampling failed; continuing", exc_info=True)
            wait = self.interval_s

    def stop(self) -> None:
        """Stop the thread (waits for a sample in progress)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)


def main() -> None:
    """Print one sample as JSON (two readings half a second apart, so cpu_pct means something)."""
    import json

    sampler = SystemSampler(0)
    time.sleep(0.5)
    sample = sampler.sample()
    sys.stdout.write(json.dumps(sample, indent=2) + "\n")


if __name__ == "__main__":
    main()


__all__ = ["NvmlReader", "Sample", "SystemSampler", "gpu_totals", "throttle_reason_names"]
