"""LightGBM: ``lgb.train(..., callbacks=[WarehouseCallback()])`` (or the scikit-learn API's
``fit(callbacks=...)``) records the run.

- **Steps**: each boosting round is a step (``env.iteration``), with every value of
  ``env.evaluation_result_list`` named ``<set>-<metric>`` (``valid_0-l2``); with ``lgb.cv``,
  ``<set>-<metric>-mean`` and ``-stdv``, as ``record_evaluation`` keeps them.
- **Final metrics**: the latest round's values, each evaluation set a split (``training``
  is ``train``, ``valid_0`` is ``val`` unless two sets would share it:
  :func:`~warehouse.integrations.session.dataset_splits`).
- **End**: LightGBM has no end-of-training callback. The run completes after the last round
  (``env.end_iteration``); when early stopping ends training sooner, it completes when the
  program exits (as every open run does), or at once with :meth:`WarehouseCallback.end`.
- **Config**: the ``config`` given, else the training parameters (``env.params``).

Its ``order`` (25) puts it after ``record_evaluation`` (20) and before ``early_stopping`` (30),
so the round that stops training is recorded too. Inside a run already open (a Hydra job, a
``with warehouse.start_run()`` block) the callback joins it and leaves its end to it.
"""

from __future__ import annotations

from typing import Any

from warehouse.integrations.session import RunSession, dataset_splits, log_step


class WarehouseCallback:
    """A LightGBM callback recording one warehouse run (see the module docstring)."""

    order = 25
    before_iteration = False

    def __init__(self, experiment: str | None = None, config: Any = None, **options: Any) -> None:
        """``options``: those of ``warehouse.start_run`` (``tags``, ``primary_metric`` ...)."""
        self.session = RunSession(experiment, config, options)

    def __call__(self, env: Any) -> None:
        run = self.session.open(dict(env.params) if env.params else None)
        values: dict[str, float] = {}
        last: dict[str, dict[str, float]] = {}
        for item in env.evaluation_result_list or ():
            data, metric, value = item[0], item[1], item[2]
            std = item[4] if len(item) > 4 else None
            names = (
                [(metric, value)]
                if std is None
                else [
                    (f"{metric}-mean", value),
                    (f"{metric}-stdv", std),
                ]
            )
            for name, number in names:
                values[f"{data}-{name}"] = float(number)
                last.setdefault(data, {})[name] = float(number)
        log_step(run, env.iteration, values)
        splits = dataset_splits(last)
        for data, metrics in last.items():  # in memory only: written when the run ends
            run.log_metrics(splits[data], metrics)
        if env.iteration + 1 >= env.end_iteration:
            self.end()

    def end(self) -> None:
        """Complete the run now (after early stopping; the last round does it by itself)."""
        self.session.end("completed")


__all__ = ["WarehouseCallback"]
