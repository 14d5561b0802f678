"""Environment capture: host, user, Python, key package versions (never imported), GPUs."""

from __future__ import annotations

import getpass
import json
import platform
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from warehouse.capture import environment
from warehouse.capture.environment import KEY_PACKAGES, capture_environment


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    """Each test that needs it reads the environment anew, and leaves no odd values cached."""
    for cached in (environment._static, environment._packages, environment._gpu_names):
        cached.cache_clear()
    yield
    for cached in (environment._static, environment._packages, environment._gpu_names):
        cached.cache_clear()


def test_the_environment_names_host_user_python_and_platform() -> None:
    env = capture_environment()
    assert env["python"] == platform.python_version()
    assert env["platform"] == platform.platform()
    assert env["executable"] == sys.executable
    assert env["host"]
    assert env["user"] == getpass.getuser()
    json.dumps(env)


def test_installed_key_packages_are_recorded_with_their_versions() -> None:
    packages = capture_environment()["packages"]
    for name in ("results-warehouse", "hydra-core", "omegaconf", "scikit-learn", "numpy", "pandas"):
        assert packages[name] == metadata.version(name)
    assert set(packages) <= set(KEY_PACKAGES)
    assert "pydantic" not in packages  # only the packages that change results


def test_packages_that_are_not_installed_are_left_out() -> None:
    installed = capture_environment()["packages"]
    for name in set(KEY_PACKAGES) - set(installed):
        with pytest.raises(metadata.PackageNotFoundError):
            metadata.version(name)


def test_reading_package_versions_imports_none_of_the_packages() -> None:
    code = (
        "import json, sys\n"
        "from warehouse.capture.environment import capture_environment\n"
        "env = capture_environment()\n"
        "heavy = ('sklearn', 'pandas', 'numpy', 'torch', 'hydra', 'omegaconf', 'jax', 'keras')\n"
        "print(json.dumps({'packages': env['packages'],"
        " 'imported': [m for m in heavy if m in sys.modules]}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    result = json.loads(proc.stdout)
    assert "scikit-learn" in result["packages"]
    assert "pandas" in result["packages"]
    assert result["imported"] == []


def test_gpu_names_are_a_list_and_a_machine_without_gpu_does_not_fail() -> None:
    gpus = capture_environment()["gpus"]
    assert isinstance(gpus, list)
    assert all(isinstance(name, str) and name for name in gpus)


def test_cuda_visible_devices_is_recorded_only_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert "cuda_visible_devices" not in capture_environment()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,2")
    assert capture_environment()["cuda_visible_devices"] == "0,2"


def test_a_user_without_a_passwd_entry_is_recorded_as_none(
    monkeypatch: pytest.MonkeyPatch, fresh_cache: None
) -> None:
    def no_passwd_entry() -> str:
        raise OSError("No username set in the environment")  # what getuser raises in containers

    monkeypatch.setattr(getpass, "getuser", no_passwd_entry)
    env = capture_environment()
    assert env["user"] is None
    assert env["python"] == platform.python_version()


def test_callers_get_a_copy_they_may_change() -> None:
    first = capture_environment()
    first["packages"]["numpy"] = "tampered"
    first["gpus"].append("fake")
    first["host"] = "elsewhere"
    second = capture_environment()
    assert second["packages"]["numpy"] == metadata.version("numpy")
    assert "fake" not in second["gpus"]
    assert second["host"] != "elsewhere"


def test_the_environment_is_read_once_per_process(
    monkeypatch: pytest.MonkeyPatch, fresh_cache: None
) -> None:
    from warehouse.capture import environment

    listings: list[frozenset[str]] = []
    real = environment._installed

    def counting(wanted: frozenset[str]) -> dict[str, str | None]:
        listings.append(wanted)
        return real(wanted)

    monkeypatch.setattr(environment, "_installed", counting)
    capture_environment()
    assert listings == [frozenset(environment.KEY_PACKAGES)]  # one pass over sys.path
    for _ in range(3):
        capture_environment()
    assert len(listings) == 1  # later runs of the process read no package metadata


def test_versions_come_from_the_folder_names_and_the_first_path_entry_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_cache: None
) -> None:

    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (
        first / "Scikit_Learn-9.8.7.dist-info",  # escaped and capitalised, as wheels write it
        first / "torch-3.0.0+cpu.dist-info",
        second / "torch-1.0.0.dist-info",  # shadowed by the first entry, as imports would be
        second / "xgboost.egg-info",  # no version in the name: read from its metadata
    ):
        folder.mkdir(parents=True)
    (second / "xgboost.egg-info" / "PKG-INFO").write_text(
        "Metadata-Version: 2.1\nName: xgboost\nVersion: 2.1.0\n"
    )
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(second)])
    packages = capture_environment()["packages"]
    assert packages == {"scikit-learn": "9.8.7", "torch": "3.0.0+cpu", "xgboost": "2.1.0"}


def test_no_nvidia_driver_means_no_gpus_and_no_nvml_import() -> None:
    from warehouse.capture import environment

    if Path(environment.NVIDIA_DRIVER).exists():
        pytest.skip("this machine has the NVIDIA driver loaded")
    code = (
        "import sys\n"
        "from warehouse.capture.environment import capture_environment\n"
        "print(capture_environment()['gpus'], 'pynvml' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.split() == ["[]", "False"]
