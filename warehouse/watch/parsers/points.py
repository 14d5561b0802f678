"""Readings in, points out: ``(step, epoch, metrics)`` rows, and the run's last values.

Each family's position (see the README's table):

- JSON lines: the ``step`` printed; a line with only ``epoch`` attaches to the last step
  seen, or, when no line gave steps, is the step numbered by its epoch; a metric line with
  neither is a final metric of the run (no point).
- Keras: batches counted over the epochs (the counter plus the batches of earlier epochs),
  epoch as in ``Epoch 3/10`` (from 1). A bar that starts without an ``Epoch`` header after
  an epoch's bar finished is ``evaluate()``'s (or ``predict()``'s) after ``fit()``: its values
  are of other data (often the test set, which Keras does not say), so they are neither steps
  nor the run's final training metrics, and are left out.
- tqdm and Rich bars (Lightning's among them): the bar's counter plus the counts of earlier
  bars of the same kind; the epoch is the number in a label such as ``Epoch 0`` or
  ``Epoch 0/2``, as printed (Lightning counts from 0).
- transformers: the k-th log line is step k; its fractional epoch is the metric ``epoch``.

Readings of the same step merge into one point, emitted when another step begins or when
the stream ends (never on a pause: a validation pause between a step's lines does not split
it). Nothing here depends on timing.
"""

from __future__ import annotations

from warehouse.watch.parsers.bars import Bars
from warehouse.watch.parsers.reading import Reading

Point = tuple[int, int | None, dict[str, float]]
SPLITS = (("val_", "val"), ("eval_", "val"), ("test_", "test"))
HELD = 8  # showings of a repeating line kept until it changes
HELD_SERIES = 512


class Assembler:
    """Turns one stream's readings into points; remembers the last value of each metric."""

    def __init__(self) -> None:
        self.latest: dict[str, float] = {}
        self._bars = Bars()
        self._epoch: int | None = None  # from Keras' "Epoch k/n"
        self._epoch_done: tuple[int, int] | None = None  # (counter, total) that ended an epoch
        self._last_step: int | None = None  # of a point whose step the text gave
        self._clock: int | None = None  # the last step a line or bar gave (not an epoch's)
        self._context: int | None = None  # the epoch last named
        self._held: dict[str, list[Point]] = {}  # a repeating line's showings, until a series
        self._pending: Point | None = None

    def feed(self, reading: Reading) -> list[Point]:
        """Points completed by this reading (usually none or one)."""
        if reading.epoch is not None:
            self._context = reading.epoch
        if reading.series is not None:
            return self._series(reading)
        if reading.header:
            self._epoch, self._epoch_done = reading.epoch, None
            self._bars.new_epoch("keras")
            return []
        if reading.final:
            self.latest.update(reading.metrics)
            return []
        metrics = reading.metrics
        epoch = reading.epoch
        if reading.family == "keras":
            epoch = self._epoch
            if reading.counter is None:  # Keras 2.0 verbose=2: the epoch line alone
                step = self._epoch_step()
            else:
                if self._after_fit(reading):
                    return []
                read = self._bars.read(reading)
                if read is None:
                    return []
                step, metrics = read
        elif reading.bar is not None:
            self.latest.update(metrics)  # the last drawing holds the last values, step or not
            read = self._bars.read(reading)
            between = self._between(epoch)
            if read is None:
                return between
            step, metrics = read
            self._clock = step
            if between:
                return between + self._point(step, epoch, metrics)
        elif reading.step is not None:
            step = self._clock = reading.step
        elif reading.epoch is not None:  # a line with an epoch alone: the epoch's values
            step = self._clock if self._clock is not None else reading.epoch
            if not metrics:
                return []
            self.latest.update(metrics)
            return self._add(step, epoch, metrics, apart=True)
        else:
            return []
        self.latest.update(metrics)
        return self._point(step, epoch, metrics)

    def _epoch_step(self) -> int:
        """Where an epoch's values go: the last step the output gave (batches are the clock),
        else the epoch (epochs are), else the step after the last."""
        if self._clock is not None:
            return self._clock
        if self._epoch is not None:
            return self._epoch
        return (self._last_step or 0) + 1

    def _series(self, reading: Reading) -> list[Point]:
        """A repeating line with no position: at the clock, else its epoch, else its count;
        held until it repeats with other numbers (a line seen once is no point)."""
        if self._clock is not None:
            step = self._clock
        elif self._context is not None:
            step = self._context
        else:
            step = reading.count or 0
        point = (step, self._context, reading.metrics)
        key = reading.series or ""
        if reading.held:
            held = self._held.setdefault(key, [])
            if len(held) < HELD:
                held.append(point)
            if len(self._held) > HELD_SERIES:
                del self._held[next(iter(self._held))]
            return []
        out: list[Point] = []
        for earlier in self._held.pop(key, []):
            self.latest.update(earlier[2])
            out += self._add(*earlier, apart=True)
        self.latest.update(reading.metrics)
        return out + self._add(*point, apart=True)

    def _after_fit(self, reading: Reading) -> bool:
        """A Keras bar begun with no ``Epoch`` header after an epoch's bar ended."""
        counter, total = reading.counter or 0, reading.total
        done = self._epoch_done
        if done is not None and (total != done[1] or counter < done[0]):
            return True
        if self._epoch is not None and total is not None and counter >= total:
            self._epoch_done = (counter, total)
        return False

    def _between(self, epoch: int | None) -> list[Point]:
        """Points of the steps a stale tqdm counter skipped, now placed."""
        out: list[Point] = []
        for step, metrics in self._bars.between:
            out += self._point(step, epoch, metrics)
        self._bars.between = []
        return out

    def _point(self, step: int, epoch: int | None, metrics: dict[str, float]) -> list[Point]:
        if not metrics:
            return []
        self._last_step = step
        return self._add(step, epoch, metrics)

    @property
    def unsure_steps(self) -> int:
        """Steps whose values a lagging bar drew once and were left out (see ``Bars``)."""
        return self._bars.unsure_steps

    def flush(self) -> list[Point]:
        """The point being assembled, if any."""
        point, self._pending = self._pending, None
        return [point] if point is not None else []

    def final_metrics(self) -> dict[str, dict[str, float]]:
        """The last value of every metric, by split: ``val_*``/``eval_*`` → val, ``test_*``."""
        return split_metrics(self.latest)

    def _add(
        self, step: int, epoch: int | None, metrics: dict[str, float], apart: bool = False
    ) -> list[Point]:
        """``apart``: values placed at a step rather than printed at it (an epoch's, a
        repeating line's): where the step already has another value of the same name, they
        form a point of their own at that step instead of replacing it."""
        out: list[Point] = []
        pending = self._pending
        clash = (
            apart
            and pending is not None
            and any(
                name in pending[2] and pending[2][name] != value for name, value in metrics.items()
            )
        )
        if pending is not None and (pending[0] != step or clash):
            out.append(pending)
            pending = None
        if pending is None:
            self._pending = (step, epoch, dict(metrics))
        else:
            pending[2].update(metrics)
            if pending[1] is None and epoch is not None:
                self._pending = (step, epoch, pending[2])
        return out


def split_metrics(latest: dict[str, float]) -> dict[str, dict[str, float]]:
    """Metrics by split: ``val_*`` and ``eval_*`` → val, ``test_*`` → test, others → train."""
    out: dict[str, dict[str, float]] = {}
    for name, value in latest.items():
        split, metric = "train", name
        for prefix, target in SPLITS:
            if name.startswith(prefix) and len(name) > len(prefix):
                split, metric = target, name[len(prefix) :]
                break
        out.setdefault(split, {})[metric] = value
    return out


__all__ = ["SPLITS", "Assembler", "Point", "split_metrics"]
