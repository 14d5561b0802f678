"""WarehouseCallback: records every Hydra job as a run — glue to the recorder, nothing else.

Enable it with one line in your primary config (the ``hydra_plugins.warehouse_hydra``
search-path plugin ships the ``warehouse`` callback config)::

    defaults:
      - override hydra/callbacks: warehouse

or spell the target out::

    hydra:
      callbacks:
        warehouse:
          _target_: warehouse.recording.hydra.WarehouseCallback
          experiment: resnet        # default: the Hydra job name
          primary_metric: val.acc
          strict: false

``on_job_start`` opens the run (status ``running``, config, git, environment);
``on_job_end`` closes it with the task's return value — a mapping split → metrics
(``{"val": {"acc": 0.9}}``) or flat ``"split/metric"`` keys (``{"val/acc": 0.9}``); flat keys
without a split go to the split ``all``; a bare number is the ``primary_metric`` — and the
job's status.

Hydra turns exceptions raised by callbacks into warnings, so by default a failing warehouse
only warns and never fails the experiment. With ``strict: true`` a warehouse failure ends the
process with the error (``SystemExit``), which Hydra does not swallow.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf
from typing_extensions import override  # typing.override needs Python 3.12

log = logging.getLogger(__name__)


class WarehouseCallback(Callback):
    """One run per Hydra job (multirun: one per job, all sharing the sweep id)."""

    def __init__(
        self,
        experiment: str | None = None,
        primary_metric: str | None = None,
        direction: str | None = None,
        home: str | None = None,
        strict: bool | None = None,
        tags: list[str] | None = None,
        **settings: Any,
    ) -> None:
        self.experiment = experiment
        self.tags = list(tags or [])
        self._params = {
            "primary_metric": primary_metric,
            "direction": direction,
            "home": home,
            "strict": strict,
            **settings,
        }
        self._run: Any = None

    @override
    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._run = None
        settings = None
        try:
            settings = self._settings()
            from warehouse.capture.config import hydra_info
            from warehouse.recording.recorder import Recorder

            overrides, meta = hydra_info(settings.redaction)
            task_cfg = OmegaConf.masked_copy(config, [str(k) for k in config if k != "hydra"])
            experiment = _job_value(config, "experiment") or self.experiment
            experiment = experiment or meta.get("job_name") or "default"
            self._run = Recorder(settings).start_run(
                experiment,
                task_cfg,
                tags=self.tags,
                cwd=Path(meta["original_cwd"]) if meta.get("original_cwd") else None,
                hydra=(overrides, meta),
            )
        except Exception as exc:
            self._fail("could not open the run", exc, settings)

    @override
    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        run, self._run = self._run, None
        if run is None:
            return
        try:
            if job_return.status == JobStatus.COMPLETED:
                _log_returned_metrics(run, job_return.return_value)
                run.end("completed")
            else:
                # the task's exception: Hydra's public return_value re-raises it
                error = job_return._return_value  # noqa: SLF001
                status = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
                run.end(status, error if isinstance(error, BaseException) else None)
        except Exception as exc:
            with contextlib.suppress(Exception):  # the first error is the one to report
                run.end("failed", exc)
            self._fail("could not record the run's end", exc, run.settings)

    def _settings(self) -> Any:
        from warehouse.settings import find_default_home, load

        cwd = Path(HydraConfig.get().runtime.cwd) if HydraConfig.initialized() else Path.cwd()
        params = {k: v for k, v in self._params.items() if v is not None}
        if params.get("home"):
            params["home"] = str((cwd / str(params["home"])).resolve())
        settings = load(hydra=params, cwd=cwd)
        if settings.home is None:  # stable: the original cwd's git root, not Hydra's job dir
            settings = settings.model_copy(update={"home": find_default_home(cwd)})
        return settings

    def _fail(self, what: str, exc: Exception, settings: Any) -> None:
        strict = bool(getattr(settings, "strict", False) or self._params.get("strict"))
        redaction = getattr(settings, "redaction", None)
        text = str(exc) if redaction is None else redaction.text(str(exc))
        message = f"warehouse: {what}: {type(exc).__name__}: {text}"
        if strict:
            raise SystemExit(f"{message} (strict mode)") from exc
        log.warning("%s — the experiment goes on; set strict: true to fail instead", message)


def _log_returned_metrics(run: Any, value: Any) -> None:
    """The job's returned metrics; a value that is not a number (a checkpoint path) is left
    out with a warning, never costing the run its other metrics or its completed status.
    A bare number is the primary metric: its split and name come from the callback's
    ``primary_metric`` (the setting's, ``val.acc``, when the callback names none)."""
    from warehouse.errors import InvalidRecord

    if _is_number(value):
        from warehouse.models import resolve_metric

        metric = resolve_metric(run.settings.primary_metric)
        value = {metric.split: {metric.name: value}}
    skipped: list[str] = []
    for split, metrics in split_metrics(value).items():
        for name, number in metrics.items():
            try:
                run.log_metrics(split, {name: number})
            except InvalidRecord:
                skipped.append(f"{split}.{name}={number!r}")
    if skipped:
        log.warning(
            "warehouse: the job returned values that are not numbers, not recorded as metrics: "
            "%s — return numbers only; put paths and text in the config or in run tags",
            ", ".join(skipped),
        )


def _is_number(value: Any) -> bool:
    """A bare number a task returned (a numpy or torch scalar too), not a bool."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    item = getattr(value, "item", None)
    shape = getattr(value, "shape", None)
    return callable(item) and shape in ((), None) and not isinstance(value, str | bytes)


def _job_value(config: DictConfig, key: str) -> Any:
    """A callback parameter resolved against this job's config (``digits-${model.name}``).

    Hydra builds callbacks once per multirun from the base config, so interpolations in their
    parameters would otherwise be frozen at the first job's values.
    """
    callbacks = OmegaConf.select(config, "hydra.callbacks", default=None) or {}
    for entry in callbacks.values():
        if str(entry.get("_target_", "")).endswith("warehouse.recording.hydra.WarehouseCallback"):
            try:
                return OmegaConf.select(entry, key, default=None)
            except Exception:  # an unresolvable interpolation: fall back to the constructor value
                return None
    return None


def split_metrics(value: Any) -> dict[str, dict[str, Any]]:
    """A task's return value as split → metrics (``{"val": {...}}`` or ``{"val/acc": x}``)."""
    if value is None:
        return {}
    if isinstance(value, DictConfig):
        value = OmegaConf.to_container(value, resolve=True)
    if not isinstance(value, Mapping):
        log.warning(
            "the task returned %s, not a mapping of split -> metrics; no final metrics recorded",
            type(value).__name__,
        )
        return {}
    result: dict[str, dict[str, Any]] = {}
    for key, item in value.items():
        if isinstance(item, Mapping):
            result.setdefault(str(key), {}).update(item)
        elif "/" in str(key):
            split, name = str(key).split("/", 1)
            result.setdefault(split, {})[name] = item
        else:
            result.setdefault("all", {})[str(key)] = item
    return result
