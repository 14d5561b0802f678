"""The running Hydra job: its overrides as typed and its job info, redacted.

:func:`hydra_info` reads the running Hydra job (overrides, job name/number, sweep and run
directories, a ``sweep_id`` shared by all jobs of one multirun); :func:`hydra_node` and
:func:`hydra_meta` read the same from a composed config that carries Hydra's own ``hydra``
node. OmegaConf and Hydra are imported inside the functions, and only when the given object
or process already uses them.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from warehouse.capture.limits import cap_overrides
from warehouse.capture.redact import (
    RedactPolicy,
    as_policy,
    override_secrets,
    redact_config,
    redact_overrides,
)

log = logging.getLogger(__name__)


def is_omegaconf(obj: Any) -> bool:
    """Whether ``obj`` is an OmegaConf node (never importing OmegaConf to find out)."""
    omegaconf = sys.modules.get("omegaconf")  # not imported yet → obj cannot be one of its nodes
    return omegaconf is not None and isinstance(obj, omegaconf.Container)


def hydra_node(cfg: Any) -> Any:
    """Hydra's own ``hydra`` node when ``cfg`` is a composed root config that carries it."""
    if not is_omegaconf(cfg):
        return None
    from omegaconf import DictConfig

    if not isinstance(cfg, DictConfig) or cfg._get_parent() is not None or "hydra" not in cfg:
        return None
    node = cfg._get_node("hydra")
    if isinstance(node, DictConfig) and "job" in node and "runtime" in node:
        return node
    return None


def hydra_info(
    patterns: Sequence[str] | RedactPolicy | None = None,
) -> tuple[list[str], dict[str, Any]]:
    """The running Hydra job's ``(task overrides, job info)``, or ``([], {})`` outside Hydra.

    Job info: ``job_name``, ``job_num`` (int, None for single runs), ``mode`` (``RUN`` or
    ``MULTIRUN``), ``run_dir`` (the job's output dir), ``sweep_dir`` (absolute; None for single
    runs), ``sweep_id`` (12 hex digits of the sweep dir's SHA-1: the same for all jobs of one
    multirun; None for single runs) and ``original_cwd``. Overrides of secret keys are redacted
    by ``patterns`` (default: the settings' default patterns), and their values are scrubbed
    from the directories too.
    """
    if "hydra" not in sys.modules:  # Hydra not even imported: no Hydra job in this process
        return [], {}
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return [], {}
        node = HydraConfig.get()
    except Exception:  # a broken Hydra state means "not in a Hydra job" to us
        log.debug("Hydra config not readable; recording no Hydra job info", exc_info=True)
        return [], {}
    policy = as_policy(RedactPolicy() if patterns is None else patterns)
    raw_overrides, raw_meta = hydra_meta(node)
    secrets = override_secrets(raw_overrides, policy)
    meta: dict[str, Any] = redact_config(raw_meta, policy, secrets=secrets)
    return cap_overrides(redact_overrides(raw_overrides, policy)), meta


def hydra_meta(node: Any) -> tuple[list[str], dict[str, Any]]:
    """Overrides and job info read from a ``hydra`` config node (nothing redacted yet)."""

    def select(key: str) -> Any:
        from omegaconf import OmegaConf

        try:
            value = OmegaConf.select(node, key, default=None, throw_on_missing=False)
        except Exception:  # e.g. sweep.subdir needs job.num, which RUN mode leaves unset
            return None
        return None if value == "???" else value

    overrides = [*_typed(node, "task"), *_typed(node, "hydra", skip=_AUTOMATIC)]
    num = select("job.num")
    job_num = int(num) if num is not None else None
    mode_value = node.get("mode") if "mode" in node else None
    mode = getattr(mode_value, "name", None) or ("MULTIRUN" if job_num is not None else "RUN")
    cwd = select("runtime.cwd")
    sweep_dir = None
    if mode == "MULTIRUN" and (raw := select("sweep.dir")) is not None:
        sweep_dir = os.path.normpath(os.path.join(str(cwd or ""), str(raw)))
    meta = {
        "job_name": select("job.name"),
        "job_num": job_num,
        "mode": mode,
        "run_dir": select("runtime.output_dir"),
        "sweep_dir": sweep_dir,
        "sweep_id": _sweep_id(sweep_dir) if sweep_dir else None,
        "original_cwd": cwd,
    }
    return overrides, meta


_AUTOMATIC = ("hydra.mode=",)
"""Overrides Hydra adds itself (``hydra.mode=MULTIRUN``): the mode is recorded as ``mode``."""


def _typed(node: Any, group: str, skip: tuple[str, ...] = ()) -> list[str]:
    """The overrides of ``hydra.overrides.<group>`` exactly as typed: never interpolated
    (``+note=${db.password}`` stays that, not the password it would resolve to)."""
    from omegaconf import ListConfig

    try:
        overrides = node._get_node("overrides")
        items = overrides._get_node(group) if overrides is not None else None
    except Exception:  # no such node in this Hydra version
        return []
    if not isinstance(items, ListConfig) or items._is_none() or items._is_missing():
        return []
    typed = [str(getattr(items._get_node(i), "_value", lambda: None)()) for i in range(len(items))]
    return [o for o in typed if not o.startswith(skip)]


def _sweep_id(sweep_dir: str) -> str:
    return hashlib.sha1(sweep_dir.encode(), usedforsecurity=False).hexdigest()[:12]


__all__ = ["hydra_info", "hydra_meta", "hydra_node", "is_omegaconf"]
