"""Derived step figures, each a small pure function or a small state machine, tested alone.

:func:`tokens_per_second`, :func:`flops_utilisation` (MFU), :class:`SpikeDetector` (``grad_norm``
above 5x its moving average after 10 values) and :class:`LossTrend` (``down``, ``flat``, ``up``:
the mean ``loss`` of the newer vs the older half of the last 50 steps, ±1 %). Each state
machine has ``push`` (one value) and ``push_many`` (a batch, the same arithmetic in the same
order, for the column-wise document builder of :mod:`warehouse.live.step_docs`).
"""

from __future__ import annotations

import math
from collections import deque

SPIKE_FACTOR = 5.0
SPIKE_WARMUP = 10
SPIKE_ALPHA = 0.02
TREND_HALF = 25
TREND_MIN = 10
TREND_THRESHOLD = 0.01


# derived figures: pure functions ----------------------------------------------------------------
def step_duration(prev_t: float | None, prev_step: int | None, t: float, step: int) -> float | None:
    """Seconds per step since the previous logged step (None for the first)."""
    if prev_t is None or prev_step is None:
        return None
    passed = step - prev_step
    elapsed = t - prev_t
    return elapsed / passed if passed > 0 else elapsed


def tokens_per_second(tokens_per_step: float | None, duration_s: float) -> float | None:
    """Throughput in tokens/s, when the run said how many tokens a step takes."""
    if not tokens_per_step or duration_s <= 0:
        return None
    return tokens_per_step / duration_s


def flops_utilisation(
    tokens_per_s: float, flops_per_token: float | None, peak_flops: float | None
) -> float | None:
    """Model FLOPs utilisation: achieved FLOP/s over the hardware's peak."""
    if not flops_per_token or not peak_flops:
        return None
    return tokens_per_s * flops_per_token / peak_flops


# derived figures: small state machines ----------------------------------------------------------
class LossTrend:
    """Mean of the newer vs the older half of the last ``2*half`` values, updated in O(1)."""

    def __init__(self, half: int = TREND_HALF) -> None:
        self.half = half
        self.old: deque[float] = deque()
        self.new: deque[float] = deque()
        self.old_sum = 0.0
        self.new_sum = 0.0

    def push(self, value: float) -> str | None:
        self.new.append(value)
        self.new_sum += value
        if len(self.new) > self.half:
            moved = self.new.popleft()
            self.new_sum -= moved
            self.old.append(moved)
            self.old_sum += moved
            if len(self.old) > self.half:
                self.old_sum -= self.old.popleft()
        if len(self.old) + len(self.new) < TREND_MIN or not self.old:
            return None
        old_mean = self.old_sum / len(self.old)
        new_mean = self.new_sum / len(self.new)
        change = (new_mean - old_mean) / max(abs(old_mean), 1e-12)
        if change < -TREND_THRESHOLD:
            return "down"
        if change > TREND_THRESHOLD:
            return "up"
        return "flat"

    def push_many(self, values: list[float]) -> list[str | None]:
        """:meth:`push` of each value in turn: the same arithmetic, in the same order; once both
        halves are full, without a call or a deque operation per value."""
        half = self.half
        old, new = self.old, self.new
        out: list[str | None] = []
        i = 0
        while i < len(values) and (len(old) < half or len(new) < half):  # filling up
            out.append(self.push(values[i]))
            i += 1
        if i == len(values):
            return out
        rest = values[i:] if i else values
        window = [*old, *new, *rest]  # the value at j: moved out of new at j+half, of old at j
        old_sum, new_sum = self.old_sum, self.new_sum
        lo, hi = -TREND_THRESHOLD, TREND_THRESHOLD
        for value, moved, popped in zip(rest, window[half:], window, strict=False):
            new_sum = new_sum + value - moved
            old_sum = old_sum + moved - popped
            old_mean = old_sum / half
            scale = old_mean if old_mean >= 0 else -old_mean
            change = (new_sum / half - old_mean) / (scale if scale > 1e-12 else 1e-12)
            out.append("down" if change < lo else "up" if change > hi else "flat")
        self.old_sum, self.new_sum = old_sum, new_sum
        self.old = deque(window[-2 * half : -half])
        self.new = deque(window[-half:])
        return out


class SpikeDetector:
    """Gradient-norm spikes: a value above 5x the moving average of the earlier ones."""

    def __init__(self) -> None:
        self.count = 0
        self.avg = 0.0

    def push(self, value: float) -> bool:
        if not math.isfinite(value):
            return True
        spike = self.count >= SPIKE_WARMUP and value > SPIKE_FACTOR * self.avg
        clipped = min(value, SPIKE_FACTOR * self.avg) if self.count >= SPIKE_WARMUP else value
        self.count += 1
        if self.count <= SPIKE_WARMUP:
            self.avg += (clipped - self.avg) / self.count  # plain mean while warming up
        else:
            self.avg += SPIKE_ALPHA * (clipped - self.avg)
        return spike

    def push_many(self, values: list[float]) -> list[bool]:
        """:meth:`push` of each (finite) value in turn, without a call each."""
        count, avg = self.count, self.avg
        out: list[bool] = []
        i = 0
        while i < len(values) and count < SPIKE_WARMUP:
            out.append(False)
            count += 1
            avg += (values[i] - avg) / count  # plain mean while warming up
            i += 1
        append = out.append
        factor, alpha = SPIKE_FACTOR, SPIKE_ALPHA
        for value in values[i:] if i else values:
            limit = factor * avg
            append(value > limit)
            avg += alpha * ((value if value < limit else limit) - avg)
        self.count, self.avg = count + len(values) - i, avg
        return out


__all__ = [
    "LossTrend",
    "SpikeDetector",
    "flops_utilisation",
    "step_duration",
    "tokens_per_second",
]
