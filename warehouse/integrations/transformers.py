"""Hugging Face transformers: ``Trainer(..., callbacks=[WarehouseCallback()])`` records the run;
after ``import warehouse.integrations.transformers``, ``report_to="warehouse"`` does the same.

- **Steps** (``on_log``): every dict the Trainer logs (the entries of
  ``trainer.state.log_history``) is a step of the run at ``state.global_step``; its fractional
  ``epoch`` is kept as the metric ``epoch_progress``, the step's epoch being the epoch it
  falls in (:func:`~warehouse.integrations.session.log_step`).
- **Evaluation** (``on_evaluate``): the metrics of each evaluation, by split (``eval_loss`` is
  ``val.loss``; ``trainer.evaluate(ds, metric_key_prefix="test")`` gives ``test.*``); the last
  evaluation of a split wins. An evaluation after training adds its split to the run.
- **Final training metrics** (``on_train_end``): the Trainer's closing summary (``train_loss``,
  ``train_runtime`` ...) as the ``train`` split; the run then completes.
- **Config**: the ``TrainingArguments`` (``args.to_dict()``, the hub token already masked by
  transformers) under ``training`` and the model's config under ``model``.
- **Ranks**: the Trainer's ``process_index``/``world_size`` decide: only the world's process
  zero records; the run records the world size.

transformers has no plugin API for ``report_to`` names: its ``Trainer`` looks the names up, at
construction, in the dict ``transformers.integrations.INTEGRATION_TO_CALLBACK`` (exported by
transformers, and where its own integrations are listed). Importing this module adds
``"warehouse"`` there, once.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback
from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK
from typing_extensions import override

from warehouse.integrations.session import RunSession, by_split, log_step

REPORT_TO = "warehouse"


class WarehouseCallback(TrainerCallback):
    """A ``TrainerCallback`` recording one warehouse run (see the module docstring)."""

    def __init__(self, experiment: str | None = None, config: Any = None, **options: Any) -> None:
        """``options``: those of ``warehouse.start_run`` (``tags``, ``primary_metric`` ...)."""
        self.session = RunSession(experiment, config, options)
        self._summary: dict[str, Any] = {}

    def _open(self, args: Any, model: Any = None) -> Any:
        config: dict[str, Any] = {"training": args.to_dict()}
        model_config = getattr(model, "config", None)
        if model_config is not None and hasattr(model_config, "to_dict"):
            config["model"] = model_config.to_dict()
        return self.session.open(config, rank=(args.process_index, args.world_size))

    @override
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._open(args, kwargs.get("model"))

    @override
    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        values = dict(logs or {})
        if "train_runtime" in values:  # the closing summary: the final training metrics
            self._summary = values
        log_step(self._open(args, kwargs.get("model")), state.global_step, values)

    @override
    def on_evaluate(
        self,
        args: Any,
        state: Any,
        control: Any,
        metrics: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._open(args, kwargs.get("model"))
        values = {k: v for k, v in (metrics or {}).items() if k != "epoch"}
        self.session.log_final(by_split(values, "val"))

    @override
    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._open(args, kwargs.get("model"))
        summary = {k: v for k, v in self._summary.items() if k != "epoch"}
        self.session.log_final(by_split(summary, "train"))
        self.session.end("completed")


INTEGRATION_TO_CALLBACK.setdefault(REPORT_TO, WarehouseCallback)

__all__ = ["REPORT_TO", "WarehouseCallback"]
