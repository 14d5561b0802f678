"""XGBoost: ``xgb.train(..., callbacks=[WarehouseCallback()])`` (or the scikit-learn API's
``callbacks=``) records the run.

- **Steps** (``after_iteration``): each boosting round is a step (its index), with the round's
  value of every evaluation set and metric from ``evals_log``, named as XGBoost prints them
  (``train-rmse``, ``eval-logloss``); with ``xgb.cv`` a round's ``(mean, std)`` is kept as
  ``<set>-<metric>-mean`` and ``-std``.
- **Final metrics** (``after_training``): the last round's values, each evaluation set a split
  (``train``; ``eval``/``valid``/``validation_0`` are ``val`` unless two sets would share it:
  :func:`~warehouse.integrations.session.dataset_splits`); the run then completes.
- **Config**: the ``config`` given, else the booster's own (``Booster.save_config()``).

Inside a run already open (a Hydra job, a ``with warehouse.start_run()`` block) the callback
joins it and leaves its end to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from typing_extensions import override
from xgboost.callback import TrainingCallback

from warehouse.integrations.session import RunSession, dataset_splits, log_step


class WarehouseCallback(TrainingCallback):
    """An XGBoost ``TrainingCallback`` recording one warehouse run (see the module docstring)."""

    def __init__(self, experiment: str | None = None, config: Any = None, **options: Any) -> None:
        """``options``: those of ``warehouse.start_run`` (``tags``, ``primary_metric`` ...)."""
        super().__init__()
        self.session = RunSession(experiment, config, options)
        self._last: dict[str, dict[str, float]] = {}

    @override
    def before_training(self, model: Any) -> Any:
        config = None
        if self.session.config is None and hasattr(model, "save_config"):
            config = json.loads(model.save_config())
        self.session.open(config)
        return model

    @override
    def after_iteration(self, model: Any, epoch: int, evals_log: Mapping[str, Any]) -> bool:
        values: dict[str, float] = {}
        last: dict[str, dict[str, float]] = {}
        for data, metrics in evals_log.items():
            for metric, history in metrics.items():
                for name, value in _round_values(metric, history[-1]):
                    values[f"{data}-{name}"] = value
                    last.setdefault(data, {})[name] = value
        self._last = last
        log_step(self.session.open(), epoch, values)
        return False  # never stops training

    @override
    def after_training(self, model: Any) -> Any:
        splits = dataset_splits(self._last)
        self.session.log_final({splits[data]: values for data, values in self._last.items()})
        self.session.end("completed")
        return model


def _round_values(metric: str, value: float | Sequence[float]) -> list[tuple[str, float]]:
    """A round's value: a number (``train``), or ``(mean, std)`` (``cv``)."""
    if isinstance(value, int | float):
        return [(metric, float(value))]
    return [(f"{metric}-mean", float(value[0])), (f"{metric}-std", float(value[1]))]


__all__ = ["WarehouseCallback"]
