"""Environment capture: where and with what a run ran (host, user, Python, packages, GPUs).

Package versions come from installed distributions' metadata (``importlib.metadata``); no
package is imported, so a run that never touches TensorFlow does not pay for importing it.
GPU names come from NVML when ``nvidia-ml-py`` is installed and a driver answers; otherwise
``gpus`` is empty, silently. Everything but ``CUDA_VISIBLE_DEVICES`` is read once per process.
"""

from __future__ import annotations

import functools
import getpass
import logging
import os
import platform
import socket
import sys
from importlib import metadata
from typing import Any

log = logging.getLogger(__name__)

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
    versions: dict[str, str] = {}
    for name in KEY_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception as exc:  # broken metadata of one package must not stop a run
            log.debug("version of %s not readable: %s", name, exc)
    return versions


@functools.cache
def _gpu_names() -> tuple[str, ...]:
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


__all__ = ["KEY_PACKAGES", "capture_environment"]
