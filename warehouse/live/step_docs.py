"""Step documents: what ``log_step`` tuples and system samples become, and the figures derived.

The shape (one document per logged step, or per system sample no step came after)::

    {"@timestamp", "run_id", "experiment", "seq", "step", "epoch", "duration_s",
     "metrics": {...}, "flags": {...}, "system": {...}, "gpus": [...]}

Policies, decided here once:

- ``seq`` counts documents of this logger from ``first_seq``, in order; the document id is
  ``run_id:seq``, so a document shipped twice is stored once.
- ``duration_s`` (:func:`step_duration`) is the time per step since the previously logged step:
  elapsed seconds over the steps that passed (a run logging every 10th step still gets a
  per-step time). The first step has none.
- Metric values are converted with ``float()`` (numpy and torch scalars work). Non-finite values
  and non-numbers are dropped from ``metrics`` (JSON and Elasticsearch have no NaN), with one
  warning per metric name; a non-finite ``grad_norm`` sets ``flags.grad_norm_spike``.
- Derived figures, each a small pure function or a small state machine, tested alone:
  :func:`tokens_per_second`, :func:`flops_utilisation` (MFU), :class:`SpikeDetector`
  (``grad_norm`` above 5x its moving average after 10 values) and :class:`LossTrend` (``down``,
  ``flat``, ``up``: the mean ``loss`` of the newer vs the older half of the last 50 steps,
  ±1 %). Figures the caller logs itself are never overwritten.
- A system sample is attached (``system``, ``gpus``) to the first step logged after it was
  taken; a sample no step follows before the next sample becomes a *sampling tick* of its own
  (empty ``metrics``, the last step and epoch seen, no ``duration_s``). Each sample appears once.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from typing import TYPE_CHECKING, Any

from warehouse.models import normalise_name
from warehouse.values import IsoStamps

if TYPE_CHECKING:
    from warehouse.live.system import Sample

log = logging.getLogger(__name__)

Item = tuple[float, Any, Any, dict[str, Any]]
"""What ``log_step`` appends: ``(time, step, epoch, metrics)``."""

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


class DocBuilder:
    """Turns logged tuples and system samples into step documents, in order."""

    def __init__(
        self,
        run_id: str,
        experiment: str,
        *,
        tokens_per_step: float | None = None,
        flops_per_token: float | None = None,
        peak_flops: float | None = None,
    ) -> None:
        self.run_id = run_id
        self.experiment = experiment
        self.tokens_per_step = tokens_per_step
        self.flops_per_token = flops_per_token
        self.peak_flops = peak_flops
        self.seq = 0
        self.iso = IsoStamps()
        self.prev_t: float | None = None
        self.prev_step: int | None = None
        self.last_step = 0
        self.last_epoch: int | None = None
        self.first_t: float | None = None
        self.first_step = 0
        self.steps = 0
        self.last_metrics: dict[str, float] = {}
        self.last_duration: float | None = None
        self.last_system: dict[str, Any] | None = None
        self.names: dict[str, str] = {}
        self.warned: set[str] = set()
        self.spike = SpikeDetector()
        self.trend = LossTrend()
        self.samples: deque[tuple[float, Sample]] = deque()  # taken, not yet attached

    # ---------------------------------------------------------------------------------------
    def build(self, items: list[Item], samples: list[tuple[float, Sample]]) -> list[dict[str, Any]]:
        """Documents for ``items`` (in order), with ``samples`` attached or as ticks."""
        self.samples.extend(samples)
        docs: list[dict[str, Any]] = []
        pending = self.samples
        for item in items:
            t = item[0]
            attach = None
            while pending and pending[0][0] <= t:
                if attach is not None:
                    docs.append(self._tick(*attach))
                attach = pending.popleft()
            doc = self._step_doc(item)
            if doc is None:
                if attach is not None:
                    pending.appendleft(attach)
                continue
            if attach is not None:
                self._attach(doc, attach[1])
            docs.append(doc)
        # samples newer than every step: all but the latest become ticks (a step may still come)
        while len(pending) > 1:
            docs.append(self._tick(*pending.popleft()))
        return docs

    def finish(self) -> list[dict[str, Any]]:
        """Ticks for the samples no step came after (at close)."""
        docs = [self._tick(*s) for s in self.samples]
        self.samples.clear()
        return docs

    # ---------------------------------------------------------------------------------------
    def _step_doc(self, item: Item) -> dict[str, Any] | None:
        t, raw_step, raw_epoch, raw_metrics = item
        try:
            step = int(raw_step)
            epoch = None if raw_epoch is None else int(raw_epoch)
        except (TypeError, ValueError, OverflowError):
            self._warn_once(
                "!step",
                "log_step got step=%r epoch=%r, not integers; that step is dropped",
                raw_step,
                raw_epoch,
            )
            return None
        metrics: dict[str, float] = {}
        flags: dict[str, Any] = {}
        names = self.names
        for key, value in raw_metrics.items():
            name = names.get(key)
            if name is None:
                name = names[key] = normalise_name(key)
            try:
                number = float(value)
            except (TypeError, ValueError, OverflowError):
                self._warn_once(
                    name,
                    "step metric %r has a non-numeric value %r; it is not recorded",
                    name,
                    value,
                )
                continue
            if number - number == 0.0:  # finite
                metrics[name] = number
            else:
                if name == "grad_norm":
                    flags["grad_norm_spike"] = True
                self._warn_once(
                    name,
                    "step metric %r is %s at step %s; non-finite values are not "
                    "recorded in the step index",
                    name,
                    number,
                    step,
                )
        doc: dict[str, Any] = {
            "@timestamp": self.iso(t),
            "run_id": self.run_id,
            "experiment": self.experiment,
            "seq": self.seq,
            "step": step,
            "epoch": epoch,
        }
        self.seq += 1
        per_step = step_duration(self.prev_t, self.prev_step, t, step)
        if per_step is not None:
            doc["duration_s"] = per_step
            self.last_duration = per_step
            if "tokens_per_s" not in metrics:
                rate = tokens_per_second(self.tokens_per_step, per_step)
                if rate is not None:
                    metrics["tokens_per_s"] = rate
        if "mfu" not in metrics and "tokens_per_s" in metrics:
            mfu = flops_utilisation(metrics["tokens_per_s"], self.flops_per_token, self.peak_flops)
            if mfu is not None:
                metrics["mfu"] = mfu
        if "grad_norm" in metrics:
            flags["grad_norm_spike"] = self.spike.push(metrics["grad_norm"])
        if "loss" in metrics:
            trend = self.trend.push(metrics["loss"])
            if trend is not None:
                flags["loss_trend"] = trend
        doc["metrics"] = metrics
        if flags:
            doc["flags"] = flags
        if self.first_t is None:
            self.first_t, self.first_step = t, step
        self.prev_t, self.prev_step = t, step
        self.last_step, self.last_epoch = step, epoch
        self.steps += 1
        if metrics:
            self.last_metrics.update(metrics)
        return doc

    def mean_step_s(self) -> float | None:
        """Mean time per step between the first and the last logged step."""
        if self.first_t is None or self.prev_t is None or self.last_step <= self.first_step:
            return None
        return (self.prev_t - self.first_t) / (self.last_step - self.first_step)

    def _attach(self, doc: dict[str, Any], sample: Sample) -> None:
        system = sample.get("system")
        if system:
            doc["system"] = dict(system)
            self.last_system = system
        gpus = sample.get("gpus")
        if gpus:
            doc["gpus"] = [dict(g) for g in gpus]

    def _tick(self, t: float, sample: Sample) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "@timestamp": self.iso(t),
            "run_id": self.run_id,
            "experiment": self.experiment,
            "seq": self.seq,
            "step": self.last_step,
            "epoch": self.last_epoch,
            "metrics": {},
        }
        self.seq += 1
        self._attach(doc, sample)
        return doc

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self.warned:
            self.warned.add(key)
            log.warning("run %s: %s", self.run_id, message % args)


def is_tick(doc: dict[str, Any]) -> bool:
    """True for a sampling-tick document (system figures only, no step metrics logged)."""
    return not doc.get("metrics") and "duration_s" not in doc and "system" in doc


__all__ = [
    "DocBuilder",
    "Item",
    "LossTrend",
    "SpikeDetector",
    "flops_utilisation",
    "is_tick",
    "step_duration",
    "tokens_per_second",
]
