"""Environment capture: where and with what a run ran (host, user, Python, packages, GPUs).

Package versions come from the installed distributions' folder names on ``sys.path``
(``name-version.dist-info``, as the wheel spec writes them), read with one directory listing
per path entry; a folder name without a version (``.egg-info`` of a develop install) falls
back to ``importlib.metadata``. No package is imported, so a run that never touches
TensorFlow does not pay for importing it, and no metadata file is parsed (~10 ms saved at
every run start). GPU names come from NVML when ``nvidia-ml-py`` is installed and a driver
is loaded (on Linux ``/proc/driver/nvidia`` exists); otherwise ``gpus`` is empty, silently,
and ``pynvml`` is not even imported. Everything but ``CUDA_VISIBLE_DEVICES`` is read once
per process.
"""

from __future__ import annotations

import functools
import getpass
import logging
import os
import platform
import re
import socket
import sys
from importlib import metadata
from typing import Any

log = logging.getLogger(__name__)

NVIDIA_DRIVER = "/proc/driver/nvidia"
"""Present on Linux while the NVIDIA kernel driver is loaded (what NVML talks to)."""

KEY_PACKAGES = (
    "results-warehouse",
    "torch",
    "torchvision",
    "tensorflow",
    "keras",
    "jax",
    "jaxlib",
    "flax",
    "scikit-learn",
    "numpy",
    "scipy",
    "pandas",
    "polars",
    "pyarrow",
    "hydra-core",
    "omegaconf",
    "lightning",
    "pytorch-lightning",
    "transformers",
    "datasets",
    "accelerate",
    "peft",
    "deepspeed",
    "timm",
    "xgboost",
    "lightgbm",
    "catboost",
    "onnxruntime",
)
"""Distributions whose installed version every run records (the ones that change results)."""


def capture_environment() -> dict[str, Any]:
    """``host``, ``user``, ``python``, ``platform``, ``executable``, ``packages``, ``gpus`` and,
    when set, ``cuda_visible_devices`` — a fresh dict on every call."""
    env: dict[str, Any] = dict(_static())
    env["packages"] = dict(_packages())
    env["gpus"] = list(_gpu_names())
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        env["cuda_visible_devices"] = visible
    return env


@functools.cache
def _static() -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "user": _user(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "executable": sys.executable,
    }


def _user() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no USER/LOGNAME and no passwd entry (containers with a random uid)
        return None


@functools.cache
def _packages() -> dict[str, str]:
    found = _installed(frozenset(KEY_PACKAGES))
    versions: dict[str, str] = {}
    for name in KEY_PACKAGES:
        if name not in found:
            continue
        version = found[name]
        if version is None:  # a folder name without its version: read the metadata
            try:
                version = metadata.version(name)
            except Exception as exc:  # broken metadata of one package must not stop a run
                log.debug("version of %s not readable: %s", name, exc)
                continue
        versions[name] = version
    return versions


_SEPARATORS = re.compile(r"[-_.]+")
_INFO = (".dist-info", ".egg-info")


def _installed(wanted: frozenset[str]) -> dict[str, str | None]:
    """The version of each distribution in ``wanted`` that ``sys.path`` holds (the first
    one found, as imports would), from the ``.dist-info``/``.egg-info`` folder names."""
    found: dict[str, str | None] = {}
    for entry in sys.path:
        try:
            names = [e.name for e in os.scandir(entry or ".") if e.name.endswith(_INFO)]
        except OSError:  # a zip file, a missing folder: nothing installed there for us
            continue
        for folder in names:
            stem = folder.rsplit(".", 1)[0]
            raw, _, version = stem.partition("-")
            name = _SEPARATORS.sub("-", raw).lower()
            if name in wanted and name not in found:
                found[name] = version.partition("-")[0] or None  # egg-info: name-ver-pyX.Y
    return found


def nvidia_driver_absent() -> bool:
    """True where NVML certainly cannot answer (Linux without the NVIDIA driver loaded):
    then ``pynvml`` is not even imported (12-19 ms)."""
    return sys.platform.startswith("linux") and not os.path.exists(NVIDIA_DRIVER)


@functools.cache
def _gpu_names() -> tuple[str, ...]:
    if nvidia_driver_absent():
        return ()
    try:
        import pynvml
    except ImportError:
        return ()
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no GPU, no permission: nothing to record
        return ()
    try:
        names = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(index))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return tuple(names)
    except Exception as exc:
        log.debug("GPU names not readable through NVML: %s", exc)
        return ()
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception as exc:
            log.debug("NVML shutdown failed: %s", exc)


__all__ = ["KEY_PACKAGES", "capture_environment", "nvidia_driver_absent"]
