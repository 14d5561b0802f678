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

import json
import logging
import math
from collections import deque
from itertools import chain
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

_INT = frozenset({int})
_INT_NONE = frozenset({int, type(None)})
_FLOAT = frozenset({float})


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
        """:meth:`push` of each value in turn (the same arithmetic, without a call each)."""
        half = self.half
        old, new = self.old, self.new
        old_sum, new_sum = self.old_sum, self.new_sum
        out: list[str | None] = []
        for value in values:
            new.append(value)
            new_sum += value
            if len(new) > half:
                moved = new.popleft()
                new_sum -= moved
                old.append(moved)
                old_sum += moved
                if len(old) > half:
                    old_sum -= old.popleft()
            if len(old) + len(new) < TREND_MIN or not old:
                out.append(None)
                continue
            old_mean = old_sum / len(old)
            new_mean = new_sum / len(new)
            change = (new_mean - old_mean) / max(abs(old_mean), 1e-12)
            out.append(
                "down"
                if change < -TREND_THRESHOLD
                else "up"
                if change > TREND_THRESHOLD
                else "flat"
            )
        self.old_sum, self.new_sum = old_sum, new_sum
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
        for value in values:
            if count >= SPIKE_WARMUP:
                limit = SPIKE_FACTOR * avg
                out.append(value > limit)
                count += 1
                avg += SPIKE_ALPHA * ((value if value < limit else limit) - avg)
            else:
                out.append(False)
                count += 1
                avg += (value - avg) / count  # plain mean while warming up
        self.count, self.avg = count, avg
        return out


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
        self._sources: dict[str, str] = {}  # stored name -> the first logged name that gave it
        self.warned: set[str] = set()
        self.spike = SpikeDetector()
        self.trend = LossTrend()
        self.samples: deque[tuple[float, Sample]] = deque()  # taken, not yet attached

    # ---------------------------------------------------------------------------------------
    def build(
        self, items: list[Item], samples: list[tuple[float, Sample]], *, more: bool = False
    ) -> list[dict[str, Any]]:
        """Documents for ``items`` (in order), with ``samples`` attached or as ticks; ``more``:
        further items logged before now follow at once (samples past these wait for them).

        Items between two sample times are built together (:meth:`_segment`): one pass that
        checks the whole run of items at once and, when every step is an ``int``, every metric
        name already normalised and every value a finite ``float`` (the usual training loop),
        builds their documents with the per-document work reduced to a dict literal; anything
        else takes the item-by-item path (:meth:`_step_doc`). Both give the same documents."""
        self.samples.extend(samples)
        docs: list[dict[str, Any]] = []
        pending = self.samples
        n = len(items)
        i = 0
        while i < n:
            if pending and pending[0][0] <= items[i][0]:  # a sample is due: item by item
                t = items[i][0]
                attach = None
                while pending and pending[0][0] <= t:
                    if attach is not None:
                        docs.append(self._tick(*attach))
                    attach = pending.popleft()
                doc = self._step_doc(items[i])
                i += 1
                if doc is None:
                    if attach is not None:
                        pending.appendleft(attach)
                    continue
                if attach is not None:
                    self._attach(doc, attach[1])
                docs.append(doc)
                continue
            j = n
            if pending:  # the run of items taken before the next sample
                limit = pending[0][0]
                j = i + 1
                while j < n and items[j][0] < limit:
                    j += 1
            docs.extend(self._segment(items[i:j] if i or j < n else items))
            i = j
        # samples newer than every step: all but the latest become ticks (a step may still come)
        while len(pending) > 1 and not more:
            docs.append(self._tick(*pending.popleft()))
        return docs

    def _segment(self, items: list[Item]) -> list[dict[str, Any]]:
        """Documents for items no sample falls between."""
        docs = self._fast_docs(items)
        if docs is None:
            docs = [d for d in map(self._step_doc, items) if d is not None]
        return docs

    def _fast_docs(self, items: list[Item]) -> list[dict[str, Any]] | None:
        """The documents of ``items`` built column-wise, or None where any item needs the
        careful path (a step or epoch that is not an int, a name to normalise, a value that
        is not a finite float). Same documents, same state afterwards, as :meth:`_step_doc`."""
        if not items:
            return []
        steps = [it[1] for it in items]
        mets: list[dict[str, Any]] = [it[3] for it in items]
        if not set(map(type, steps)) <= _INT or not set(map(type, [it[2] for it in items])) <= (
            _INT_NONE
        ):
            return None
        names = self.names
        for key in set(chain.from_iterable(mets)):
            name = names.get(key)
            if name is None:
                name = self._normalised(key)
            if name != key:
                return None
        values = list(chain.from_iterable(map(dict.values, mets)))
        if not set(map(type, values)) <= _FLOAT:
            return None
        total = sum(values)
        if total - total != 0.0:  # a NaN or an infinity somewhere (or an overflowing sum)
            return None
        # the metrics dicts are log_step's own **kwargs (nobody else holds them): used as they
        # are, unless derived figures are to be added (a caller of build() may share one dict)
        tokens = self.tokens_per_step
        fpt, peak = self.flops_per_token, self.peak_flops
        mfu_on = bool(fpt and peak)
        if tokens or mfu_on:
            mets = [dict(m) for m in mets]
        run_id, experiment, iso = self.run_id, self.experiment, self.iso
        seq = self.seq
        prev_t, prev_step = self.prev_t, self.prev_step
        last_duration = self.last_duration
        docs: list[dict[str, Any]] = []
        append = docs.append
        for (t, step, epoch, _), metrics in zip(items, mets, strict=True):
            doc = {
                "@timestamp": iso(t),
                "run_id": run_id,
                "experiment": experiment,
                "seq": seq,
                "step": step,
                "epoch": epoch,
            }
            seq += 1
            if prev_t is not None and prev_step is not None:
                passed = step - prev_step
                elapsed = t - prev_t
                per_step = elapsed / passed if passed > 0 else elapsed
                doc["duration_s"] = last_duration = per_step
                if tokens and per_step > 0 and "tokens_per_s" not in metrics:
                    metrics["tokens_per_s"] = tokens / per_step
            if mfu_on and "mfu" not in metrics and "tokens_per_s" in metrics:
                metrics["mfu"] = metrics["tokens_per_s"] * fpt / peak
            doc["metrics"] = metrics
            prev_t, prev_step = t, step
            append(doc)
        grads = [(d, m["grad_norm"]) for d, m in zip(docs, mets, strict=True) if "grad_norm" in m]
        if grads:
            for (doc, _), spike in zip(
                grads, self.spike.push_many([g for _, g in grads]), strict=True
            ):
                doc["flags"] = {"grad_norm_spike": spike}
        losses = [(d, m["loss"]) for d, m in zip(docs, mets, strict=True) if "loss" in m]
        if losses:
            for (doc, _), trend in zip(
                losses, self.trend.push_many([v for _, v in losses]), strict=True
            ):
                if trend is not None:
                    flags = doc.get("flags")
                    if flags is None:
                        doc["flags"] = {"loss_trend": trend}
                    else:
                        flags["loss_trend"] = trend
        last = items[-1]
        self.seq = seq
        if self.first_t is None:
            self.first_t, self.first_step = items[0][0], items[0][1]
        self.prev_t, self.prev_step = prev_t, prev_step
        self.last_step, self.last_epoch = last[1], last[2]
        self.last_duration = last_duration
        self.steps += len(items)
        update = self.last_metrics.update
        for metrics in mets:
            update(metrics)
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
                name = self._normalised(key)
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

    def _normalised(self, key: str) -> str:
        """A metric name as stored (cached); says once when two names become the same one
        (``top-1 acc`` and ``top-1.acc``): in a step where both are logged, one value wins."""
        name = self.names[key] = normalise_name(key)
        first = self._sources.setdefault(name, key)
        if first != key:
            self._warn_once(
                f"collision:{name}",
                "step metrics %r and %r are both stored as %r; where both are logged in one "
                "step only one value is kept: rename one of them",
                first,
                key,
                name,
            )
        return name

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self.warned:
            self.warned.add(key)
            log.warning("run %s: %s", self.run_id, message % args)


def encode_lines(docs: list[dict[str, Any]], run_id: str, experiment: str) -> bytes:
    """Step documents as JSON lines, the batch at once: what a store appends to a run's steps
    file. Each line holds ``{**doc, "run_id": run_id, "experiment": experiment}``: the same
    content as ``json.dumps(..., ensure_ascii=False, default=str)`` line by line, several times
    faster (orjson over the whole batch when it is installed, else one reused encoder).

    Values JSON has no type for are written as ``str(value)``, as ``default=str`` does."""
    if not docs:
        return b""
    rows = docs
    if any(d.get("run_id") != run_id or d.get("experiment") != experiment for d in docs):
        rows = [{**d, "run_id": run_id, "experiment": experiment} for d in docs]
    try:
        import orjson
    except ImportError:
        pass
    else:
        dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
        try:
            return b"".join([dumps(d, option=newline) for d in rows])
        except (TypeError, orjson.JSONEncodeError):  # a value orjson refuses: json's way
            pass
    encode = json.JSONEncoder(ensure_ascii=False, default=str).encode
    return ("\n".join(map(encode, rows)) + "\n").encode()


def is_tick(doc: dict[str, Any]) -> bool:
    """True for a sampling-tick document (system figures only, no step metrics logged)."""
    return not doc.get("metrics") and "duration_s" not in doc and "system" in doc


__all__ = [
    "DocBuilder",
    "Item",
    "LossTrend",
    "SpikeDetector",
    "encode_lines",
    "flops_utilisation",
    "is_tick",
    "step_duration",
    "tokens_per_second",
]
