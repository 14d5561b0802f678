"""What every framework integration does the same way, over the public recording API.

- **Which run** (:class:`RunSession`): the run open in this context when there is one (a Hydra
  job the warehouse callback recorded, a ``with warehouse.start_run()`` block): the
  integration *joins* it, adds to it and leaves its end to its owner; one run per job, never
  two. Otherwise it starts its own run (``warehouse.start_run``: only global rank 0 records)
  and ends it.
- **Which split** (:func:`split_of`): a name's prefix, before ``/`` or ``_``, names the split:
  ``train``/``training``; ``val``/``valid``/``validation``/``eval``/``dev`` (all ``val``);
  ``test``. ``val_loss`` is ``val.loss``, ``train/acc`` is ``train.acc``, ``eval_loss``
  (transformers) is ``val.loss``; a name without such a prefix goes to the caller's split.
- **Steps** (:func:`log_step`): ``step`` and ``epoch`` are ``log_step``'s own parameters, so a
  framework value of that name is never passed as a metric: a whole-number ``epoch`` is the
  step's epoch; a fractional one (transformers' position in training) is kept exactly as the
  metric ``epoch_progress``, and the step's epoch is the epoch it falls in; a ``step`` value
  is the step already given (kept as ``step_value`` when it differs).
- **Values** (:func:`scalars`): Python, numpy and torch scalars as floats; anything else
  (text, arrays) is left out.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from warehouse.recording.run import ActiveRun

log = logging.getLogger(__name__)

SPLITS = {
    "train": "train",
    "training": "train",
    "val": "val",
    "valid": "val",
    "validation": "val",
    "eval": "val",
    "dev": "val",
    "test": "test",
}
"""Name prefixes that say the split, and the split each says."""


def split_of(name: str, default: str) -> tuple[str, str]:
    """``(split, metric)`` of a framework's metric name (the rule: the module docstring)."""
    for sep in ("/", "_"):
        head, found, rest = name.partition(sep)
        if found and rest and head.lower() in SPLITS:
            return SPLITS[head.lower()], rest
    return default, name


def dataset_splits(names: Iterable[str]) -> dict[str, str]:
    """The split of each evaluation set of a boosting library (``train``, ``valid_0``,
    ``test``): its name's split (:func:`split_of`: ``valid_0`` is ``val``) when no other set
    has that split, else the set's own name."""
    names = list(dict.fromkeys(names))
    guessed = {n: SPLITS.get(n.lower()) or split_of(f"{n}_", "")[0] or n for n in names}
    taken = Counter(guessed.values())
    return {n: split if taken[split] == 1 else n for n, split in guessed.items()}


def scalar(value: Any) -> float | None:
    """A number as a float (a numpy or torch scalar too), else None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    size = getattr(value, "size", None)
    numel = size() if callable(size) else size  # torch: .size() is a shape; numpy: .size
    if getattr(value, "shape", None) in ((), (1,)) or numel == 1:
        item = getattr(value, "item", None)
        if callable(item):
            inner = item()
            if isinstance(inner, int | float):
                return float(inner)
    return None


def scalars(values: Mapping[str, Any]) -> dict[str, float]:
    """The numeric values of ``values``, as floats; text, arrays and None are left out."""
    out: dict[str, float] = {}
    for name, value in values.items():
        number = scalar(value)
        if number is not None:
            out[str(name)] = number
    return out


def by_split(values: Mapping[str, Any], default: str) -> dict[str, dict[str, float]]:
    """Numeric ``values`` grouped as split -> metric -> value (:func:`split_of`)."""
    out: dict[str, dict[str, float]] = {}
    for name, number in scalars(values).items():
        split, metric = split_of(name, default)
        out.setdefault(split, {})[metric] = number
    return out


def log_step(run: ActiveRun, step: int, values: Mapping[str, Any]) -> None:
    """One step's numeric ``values`` as ``run.log_step`` takes them (``step``/``epoch``: the
    module docstring)."""
    metrics = scalars(values)
    epoch: int | None = None
    progress = metrics.pop("epoch", None)
    if progress is not None:
        if progress.is_integer():
            epoch = int(progress)
        else:  # 1.5: half-way through the second epoch (index 1)
            epoch = max(math.ceil(progress) - 1, 0)
            metrics["epoch_progress"] = progress
    given = metrics.pop("step", None)
    if given is not None and given != step:
        metrics["step_value"] = given
    run.log_step(int(step), epoch, **metrics)


class RunSession:
    """The run an integration records into: the open run it joins, or one it owns."""

    def __init__(
        self, experiment: str | None, config: Any, options: Mapping[str, Any] | None = None
    ) -> None:
        self.experiment = experiment
        self.config = config
        self.options = dict(options or {})
        self.run: ActiveRun | None = None
        self.owned = False

    def open(self, config: Any = None, rank: tuple[int, int] | None = None) -> ActiveRun:
        """The run: the one already in use, else the current run (joined), else a new one
        (``config``: the integration's own, when the user gave none)."""
        if self.run is not None:
            return self.run
        from warehouse.recording.recorder import current_run, start_run

        current = current_run()
        if current is not None:
            self.run, self.owned = current, False
            log.debug("joining the open run %s", current.run_id)
            if rank is not None:
                note_world_size(current, rank[1])
            return current
        options = dict(self.options)
        if rank is not None:
            options["rank"] = rank
        chosen = self.config if self.config is not None else config
        self.run = start_run(self.experiment, chosen, **options)
        self.owned = True
        return self.run

    def log_final(self, splits: Mapping[str, Mapping[str, float]]) -> None:
        """Final metrics per split; written at once when the run has already ended (a test
        evaluation after training adds the test split to the finished run)."""
        run = self.run
        if run is None or not splits:
            return
        for split, metrics in splits.items():
            if metrics:
                run.log_metrics(split, metrics)
        if run.record.ended_at is not None:
            run.save()

    def end(self, status: str = "completed", error: BaseException | None = None) -> None:
        """End the run if this integration started it (a joined run is ended by its owner)."""
        run = self.run
        if run is not None and self.owned and run.record.ended_at is None:
            run.end(status, error)


def note_world_size(run: ActiveRun, world_size: int) -> None:
    """Correct the world size a run recorded before the framework started its processes
    (a Hydra job that Lightning's launcher turned into several)."""
    from warehouse.recording.ranks import NullRun

    if not isinstance(run, NullRun) and world_size > 1:
        run.record.environment["world_size"] = int(world_size)


__all__ = [
    "SPLITS",
    "RunSession",
    "by_split",
    "log_step",
    "note_world_size",
    "scalar",
    "scalars",
    "split_of",
]
