"""Progress bars over time: which values on a redrawn bar are new, and at which step.

A bar is redrawn many times and keeps showing values that were set long ago: Lightning's
bar shows the previous epoch's ``val_*`` at every step of the next epoch; a bar that moves
on draws the old postfix before the new one is set; a bar's last frame repeats the last
values. So:

- a frame whose values are all unchanged is a redraw of old values (the bar moved on, or
  closed): it gives no point; except right after a frame of the same bar at the same counter
  inside the bar (Lightning's bar draws each step twice: the counter moves with the old
  values, then the new values are set; when they print the same, the second drawing is still
  the step's);
- a metric first shown at the end of a bar (counter = total), at the start of one (counter
  0, a bar reset showing what the last one had), or in the middle of a bar that already showed
  other metrics without it (validation values arriving mid-epoch) is an epoch-level metric:
  recorded when its printed value changes, and again at its first showing after an epoch
  header (Keras: each epoch's line is new, even with the value of the epoch before);
- an epoch-level metric that changes on two of the bar's frames in a row, inside the bar, is
  per step after all;
- the other metrics are per step: each frame that shows new values records them all (a value
  may repeat from one step to the next), once per counter: a bar drawn again at the same
  counter with new values again has a stale counter (tqdm's iterator moves its counter only
  every ``mininterval``, while ``set_postfix`` draws at every step), so which step those
  values belong to is unknown and they are skipped; so are values changing again at counter
  0 (elsewhere a metric shown only now and then, as validation values are, is left alone).
  For a tqdm bar that is the clock they are kept aside: when its counter then moves by k and
  exactly k - 1 such drawings came between, each drawing was one step (``set_postfix`` once a
  step), and they are recorded at the steps in between.

Lightning's Rich bar is drawn by a timer thread, sometimes after the counter moved but
before the step's values were set (in a terminal, 2 drawings in 216 of the captures showed the
step before's values), so its per-step values are taken only from a second drawing at the same
counter: one that shows new values, or the same values again (the thread draws again only
once something changed after its last drawing: the step's values, or the epoch's end); its
epoch-level values are certain.

A bar's position is its counter plus the counts of the bars of the same kind before it (bars
restart every epoch), so the series is global. With several bars (nested bars, with metrics
or without), the fastest one (the largest position) is the clock: the others' values are
recorded at its current step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from warehouse.watch.parsers.reading import Reading

# Families whose bar may be drawn between the counter's update and the metrics' update
# (Lightning's Rich bar renders on a timer thread): a frame's per-step values may belong to the
# step before. Only a redraw at the same counter with new values is certain.
LAGGING = frozenset({"rich"})


@dataclass
class _Bar:
    offset: int = 0
    counter: int | None = None
    total: int | None = None
    restart: bool = False  # a new epoch began (Keras header): the next frame starts a bar
    shown: dict[str, str] = field(default_factory=dict)  # last text shown, per metric
    per_step: dict[str, bool] = field(default_factory=dict)
    recorded: dict[str, str] = field(default_factory=dict)  # last text recorded, per metric
    changed: dict[str, bool] = field(default_factory=dict)  # on the last frame showing it
    taken: tuple[int, int] | None = None  # (offset, counter) whose values were read
    unsure: tuple[int, int] | None = None  # where per-step values were drawn once (lagging)
    stale: list[dict[str, float]] = field(default_factory=list)  # drawn there since (tqdm)
    created: int = 0  # the frame count (of all bars) when this bar was first drawn
    finished: int | None = None  # the frame count when its counter reached its total

    @property
    def done(self) -> bool:
        return self.total is not None and self.counter is not None and self.counter >= self.total

    @property
    def position(self) -> int:
        return self.offset + (self.counter or 0)


class Bars:
    """Bar frames in; the step and the new metrics of each frame out."""

    def __init__(self) -> None:
        self._bars: dict[str, _Bar] = {}
        self._clock: _Bar | None = None
        self._frames = 0
        self._last: _Bar | None = None  # the bar of the frame before
        self.between: list[tuple[int, dict[str, float]]] = []  # steps a stale counter skipped
        self._unsure_left = 0  # steps a lagging bar drew once and never again (values left out)

    @property
    def unsure_steps(self) -> int:
        """How many steps' per-step values a lagging bar (Lightning's Rich bar in a terminal)
        drew only once, so that whether they were that step's is unknown: they are not
        recorded, and ``warehouse watch`` says so at the end (counted, not kept: O(1))."""
        return self._unsure_left + sum(bar.unsure is not None for bar in self._bars.values())

    def new_epoch(self, prefix: str) -> None:
        """An epoch header was printed: bars named ``prefix...`` start again at their next frame."""
        for name, bar in self._bars.items():
            if name.startswith(prefix):
                bar.restart = True

    def read(self, reading: Reading) -> tuple[int, dict[str, float]] | None:
        """The step of this frame and the metrics it records, or None for a redraw."""
        counter = reading.counter
        if counter is None:
            return None  # a unit-scaled counter ("1.2k/5.0k"): no step to put values at
        self._frames += 1
        bar = self._bars.get(reading.bar or "")
        if bar is None:
            bar = self._bars[reading.bar or ""] = _Bar(created=self._frames)
            if reading.family in LAGGING and reading.epoch is not None and reading.total:
                bar.offset = reading.epoch * reading.total  # "Epoch 2/2" seen alone (a pipe)
        again, self._last = self._last is bar, bar  # this bar drew the frame before too
        self._settle(bar, reading)
        if bar.counter is not None and (bar.restart or counter < bar.counter):
            done = bar.counter
            if bar.total is not None and bar.counter <= bar.total:
                done = bar.total
            bar.offset += done
        if bar.restart:  # an epoch header: every value shown from now on is this epoch's
            bar.recorded.clear()
            bar.restart = False
        same_counter = counter == bar.counter
        unchanged = all(bar.shown.get(name) == text for name, text in reading.texts.items())
        late = bool(bar.shown)  # the bar showed metrics before: a metric new to it joined late
        bar.shown.update(reading.texts)
        bar.counter, bar.total = counter, reading.total
        if bar.done:
            bar.finished = bar.finished or self._frames
        else:
            bar.finished = None
        clock = self._clock  # every bar's frame moves the clock, with values or without
        if (
            clock is None
            or clock is bar
            or bar.position > clock.position
            or (clock.finished is not None and bar.created > clock.finished)
        ):
            self._clock = clock = bar
        lagging = reading.family in LAGGING
        inside = counter > 0 and (reading.total is None or counter < reading.total)
        here = (bar.offset, counter)
        taken = bar.taken == here  # this counter's step was read: it is stale now
        if taken and reading.family == "tqdm" and reading.metrics:
            bar.stale.append(dict(reading.metrics))
        # drawn twice alike at one counter (not the reset at 0): no longer maybe the step before's
        settled = lagging and same_counter and counter > 0 and bar.unsure == here
        if settled:
            bar.unsure = None
        elif unchanged and not (again and same_counter and inside and not lagging and not taken):
            return None  # a redraw (at the end: tqdm's close() draws the last frame again)
        if not reading.metrics or (lagging and bar.position == 0):
            return None  # nothing; or, before a step ran, Lightning's sanity check values
        if _stopped_short(clock, bar, reading):
            return None
        new: dict[str, float] = {}
        for name, value in reading.metrics.items():
            text = reading.texts.get(name, repr(value))
            per_step = bar.per_step.get(name)
            if per_step is None:
                per_step = bar.per_step[name] = inside and not late
            changed = bar.recorded.get(name) != text
            if changed and inside and not per_step and bar.changed.get(name):
                bar.per_step[name] = per_step = True
            bar.changed[name] = changed
            if per_step and lagging and not same_counter:
                if bar.unsure is not None and bar.unsure != here:
                    self._unsure_left += 1  # the one before was never drawn again
                bar.unsure = here
                continue  # drawn before or after this step's values were set: unknown
            if taken and not settled and (per_step or counter == 0):
                continue  # a stale counter: the step these values belong to is unknown
            if per_step or changed:
                new[name] = value
                bar.recorded[name] = text
                bar.taken = here
        return clock.position, new

    def _settle(self, bar: _Bar, reading: Reading) -> None:
        """Before ``bar`` moves to this frame's counter: the drawings kept at its stale counter
        are the steps it skipped if there is one for each (see the module docstring)."""
        stale, bar.stale = bar.stale, []
        counter, taken = reading.counter, bar.taken
        if not stale or taken is None or counter is None or bar.counter is None:
            return
        if bar.restart or taken != (bar.offset, bar.counter) or bar is not self._clock:
            return
        if counter - bar.counter == len(stale) + 1:
            start = bar.offset + bar.counter + 1
            self.between += [(start + i, metrics) for i, metrics in enumerate(stale)]
        elif counter == bar.counter:
            bar.stale = stale  # still drawing at that counter


def _stopped_short(clock: _Bar, bar: _Bar, reading: Reading) -> bool:
    """Another tqdm bar draws while the clock bar was last drawn short of its total: tqdm
    draws every ``mininterval`` only, and a bar cleared at its end (``leave=False``) never
    draws its last count, so where the clock stood is unknown (an outer bar's postfix set
    after the inner loop ended): its values are not placed."""
    return (
        clock is not bar
        and reading.family == "tqdm"
        and clock.total is not None
        and clock.counter is not None
        and 0 < clock.counter < clock.total
    )


__all__ = ["Bars"]
