"""Lightning: ``Trainer(logger=WarehouseLogger())`` records the run from inside Lightning.

- **Config**: the module's (and datamodule's) hparams (``self.save_hyperparameters()``), given
  to ``log_hyperparams`` when training starts; the run opens at the first logged step (or at
  the end, when nothing was logged).
- **Steps**: every ``log_metrics(metrics, step)`` call Lightning makes (the values it also gives
  ``CSVLogger``) is a step of the run; Lightning's ``epoch`` is the step's epoch.
- **Final metrics**: ``trainer.callback_metrics`` when Lightning finalizes the logger (the end of
  ``fit``, ``validate`` or ``test``), mapped to splits by name (``train_``/``val_``/``test_``,
  ``train/`` ...; :func:`~warehouse.integrations.session.split_of`); a name without a split
  prefix goes to the split of the stage (``train`` after ``fit``, ``val`` after ``validate``,
  ``test`` after ``test``). ``trainer.test()`` after ``fit`` adds the test split to the run.
- **Status**: ``finalize("success")`` completes the run, ``"failed"`` fails it with the error
  being raised, ``"finished"`` (Lightning's SLURM requeue) records it interrupted. Inside a run
  already open (a Hydra job the warehouse callback records) the logger joins that run and
  leaves its end to it.
- **Ranks**: only global rank 0 logs (Lightning's ``rank_zero_only``, and the trainer's
  ``global_rank``/``world_size`` given to ``start_run``); the run records the world size.
"""

from __future__ import annotations

import sys
import weakref
from argparse import Namespace
from collections.abc import Mapping
from typing import Any

from lightning.pytorch.loggers.logger import Logger
from lightning.pytorch.utilities import rank_zero_only
from typing_extensions import override

from warehouse.integrations.session import RunSession, by_split, log_step

_STATUS = {"success": "completed", "failed": "failed", "finished": "interrupted"}
_STAGE_SPLIT = {"fit": "train", "validate": "val", "test": "test"}


class WarehouseLogger(Logger):
    """A Lightning ``Logger`` recording one warehouse run (see the module docstring)."""

    def __init__(self, experiment: str | None = None, config: Any = None, **options: Any) -> None:
        """``options``: those of ``warehouse.start_run`` (``tags``, ``primary_metric`` ...)."""
        super().__init__()
        self.session = RunSession(experiment, config, options)
        self._trainer: weakref.ReferenceType[Any] | None = None
        self._hparams: dict[str, Any] | None = None

    @property
    @override
    def name(self) -> str | None:
        run = self.session.run
        return run.experiment if run is not None else self.session.experiment

    @property
    @override
    def version(self) -> str | None:
        run = self.session.run
        return run.run_id if run is not None else None

    @rank_zero_only
    @override
    def log_hyperparams(
        self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any
    ) -> None:
        # the run opens at the first logged step: after Lightning has set its signal handlers,
        # so that each of the two restores the other's (a failed fit finalizes before
        # Lightning's teardown)
        self._hparams = vars(params) if isinstance(params, Namespace) else dict(params)

    @rank_zero_only
    @override
    def log_graph(self, model: Any, input_array: Any = None) -> None:
        # Lightning calls this with the module right after log_hyperparams: the one place a
        # logger meets the trainer, whose callback_metrics hold the final values
        try:
            trainer = model.trainer
        except RuntimeError:  # a module not attached to a trainer
            return
        if trainer is not None:
            self._trainer = weakref.ref(trainer)

    @rank_zero_only
    @override
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        run = self.session.open(self._hparams, rank=self._rank())
        log_step(run, 0 if step is None else step, metrics)

    @rank_zero_only
    @override
    def finalize(self, status: str) -> None:
        trainer = self._trainer() if self._trainer is not None else None
        if trainer is None:
            if self.session.run is None:
                return
        else:
            self.session.open(self._hparams, rank=self._rank())
            default = _STAGE_SPLIT.get(str(getattr(trainer.state.fn, "value", "fit")), "train")
            self.session.log_final(by_split(trainer.callback_metrics, default))
        outcome = _STATUS.get(status, "interrupted")
        error = sys.exception() if outcome == "failed" else None
        self.session.end(outcome, error)

    def _rank(self) -> tuple[int, int] | None:
        trainer = self._trainer() if self._trainer is not None else None
        if trainer is None:
            return None
        return int(trainer.global_rank), int(trainer.world_size)


__all__ = ["WarehouseLogger"]
