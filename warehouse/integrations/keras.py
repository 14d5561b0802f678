"""Keras 3: ``model.fit(..., callbacks=[WarehouseCallback()])`` records the run.

- **Steps**: each epoch's ``logs`` (the values ``History`` keeps) is a step of the run, step
  and epoch both the epoch's index.
- **Final metrics** at ``on_train_end``: the last epoch's values, by split (``val_loss`` is
  ``val.loss``; a name without a split prefix is ``train``:
  :func:`~warehouse.integrations.session.split_of`); the run then completes.
- **Test split**: ``model.evaluate()`` after training (the same callback in its ``callbacks``)
  adds its results to the run as the ``test`` split; the validation ``fit`` runs between
  epochs is not a test.
- **Config**: the ``config`` given, else ``fit``'s parameters (epochs, steps per epoch).

Inside a run already open (a Hydra job the warehouse callback records, a ``with
warehouse.start_run()`` block) the callback joins it and leaves its end to it.
"""

from __future__ import annotations

from typing import Any

import keras
from typing_extensions import override

from warehouse.integrations.session import RunSession, by_split, log_step, scalars


class WarehouseCallback(keras.callbacks.Callback):
    """A Keras callback recording one warehouse run (see the module docstring)."""

    def __init__(self, experiment: str | None = None, config: Any = None, **options: Any) -> None:
        """``options``: those of ``warehouse.start_run`` (``tags``, ``primary_metric`` ...)."""
        super().__init__()
        self.session = RunSession(experiment, config, options)
        self._training = False
        self._last: dict[str, Any] = {}

    @override
    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._training = True
        self.session.open(dict(self.params or {}))

    @override
    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        values = dict(logs or {})
        self._last = values
        log_step(self.session.open(), epoch, {**values, "epoch": epoch})

    @override
    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self._training = False
        self.session.log_final(by_split(logs or self._last, "train"))
        self.session.end("completed")

    @override
    def on_test_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._training:  # fit's validation between epochs: in the epoch's logs already
            return
        ended = self.session.run is None
        self.session.open()
        self.session.log_final({"test": scalars(logs or {})})
        if ended:  # evaluate() without fit: a run of its own
            self.session.end("completed")


__all__ = ["WarehouseCallback"]
