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
- Derived figures (:mod:`warehouse.live.step_figures`): ``tokens_per_s``, ``mfu``, the
  ``grad_norm`` spike flag and the ``loss`` trend. Figures the caller logs itself are never
  overwritten.
- Built a batch at a time: each column (stamps, durations, flags) is one comprehension over
  the batch and the documents one more; :func:`encode_lines` turns a batch into JSON lines with
  one orjson call.
- A system sample is attached (``system``, ``gpus``) to the first step logged after it was
  taken; a sample no step follows before the next sample becomes a *sampling tick* of its own
  (empty ``metrics``, the last step and epoch seen, no ``duration_s``). Each sample appears once.
"""

from __future__ import annotations

import logging
from collections import deque
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from warehouse.live.step_figures import (
    LossTrend,
    SpikeDetector,
    flops_utilisation,
    step_duration,
    tokens_per_second,
)
from warehouse.models import normalise_name
from warehouse.values import IsoStamps

if TYPE_CHECKING:
    from warehouse.live.system import Sample

log = logging.getLogger(__name__)

Item = tuple[float, Any, Any, dict[str, Any]]
"""What ``log_step`` logs: ``(time, step, epoch, metrics)``."""
Columns = tuple[list[float], list[Any], list[Any], list[dict[str, Any]]]
"""Logged items as columns: times, steps, epochs, metrics."""


_INT = frozenset({int})
_INT_NONE = frozenset({int, type(None)})
_FLOAT = frozenset({float})


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
        # the column-wise path's flags: one dict per combination, shared by the documents that
        # have it (documents are never changed once built; it saves a dict per step)
        self._flag_dicts: dict[tuple[bool | None, str | None], dict[str, Any] | None] = {
            (spike, trend): None
            if spike is None and trend is None
            else {"grad_norm_spike": spike}
            if trend is None
            else {"loss_trend": trend}
            if spike is None
            else {"grad_norm_spike": spike, "loss_trend": trend}
            for spike in (None, False, True)
            for trend in (None, "down", "flat", "up")
        }

    # ---------------------------------------------------------------------------------------
    def build(
        self, items: list[Item], samples: list[tuple[float, Sample]], *, more: bool = False
    ) -> list[dict[str, Any]]:
        """Documents for ``items`` (in order), with ``samples`` attached or as ticks; ``more``:
        further items logged before now follow at once (samples past these wait for them)."""
        if not items:
            return self.build_columns(([], [], [], []), samples, more=more)
        ts, steps, epochs, mets = map(list, zip(*items, strict=True))
        return self.build_columns((ts, steps, epochs, mets), samples, more=more)

    def build_columns(
        self, columns: Columns, samples: list[tuple[float, Sample]], *, more: bool = False
    ) -> list[dict[str, Any]]:
        """:meth:`build` of the items given as columns (times, steps, epochs, metrics).

        Items between two sample times are built together (:meth:`_segment`): one pass that
        checks the whole run of items at once and, when every step is an ``int``, every metric
        name already normalised and every value a finite ``float`` (the usual training loop),
        builds their documents column-wise (:meth:`_fast_docs`); anything else takes the
        item-by-item path (:meth:`_step_doc`). Both give the same documents."""
        self.samples.extend(samples)
        docs: list[dict[str, Any]] = []
        pending = self.samples
        ts = columns[0]
        n = len(ts)
        i = 0
        while i < n:
            if pending and pending[0][0] <= ts[i]:  # a sample is due: item by item
                t = ts[i]
                attach = None
                while pending and pending[0][0] <= t:
                    if attach is not None:
                        docs.append(self._tick(*attach))
                    attach = pending.popleft()
                doc = self._step_doc((t, columns[1][i], columns[2][i], columns[3][i]))
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
                while j < n and ts[j] < limit:
                    j += 1
            if i or j < n:
                _, steps, epochs, mets = columns
                docs.extend(self._segment((ts[i:j], steps[i:j], epochs[i:j], mets[i:j])))
            else:
                docs.extend(self._segment(columns))
            i = j
        # samples newer than every step: all but the latest become ticks (a step may still come)
        while len(pending) > 1 and not more:
            docs.append(self._tick(*pending.popleft()))
        return docs

    def _segment(self, columns: Columns) -> list[dict[str, Any]]:
        """Documents for items no sample falls between."""
        docs = self._fast_docs(columns)
        if docs is None:
            docs = [d for d in map(self._step_doc, zip(*columns, strict=True)) if d is not None]
        return docs

    def _fast_docs(self, columns: Columns) -> list[dict[str, Any]] | None:
        """The documents of the items in ``columns`` built column-wise, or None where any item
        needs the careful path (a step or epoch that is not an int, a name to normalise, a
        value that is not a finite float). Same documents, same state afterwards, as
        :meth:`_step_doc`.

        Each column (stamps, durations, flags) is one comprehension over the batch and the
        documents one more: no per-item method call."""
        ts, steps, epochs, mets = columns
        if not ts:
            return []
        if not set(map(type, steps)) <= _INT or not set(map(type, epochs)) <= _INT_NONE:
            return None
        names = self.names
        keys = set(chain.from_iterable(mets))
        for key in keys:
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
        n = len(ts)
        # durations: per step since the previous logged step (the first of a run has none)
        prev_ts: list[Any] = [self.prev_t, *ts[:-1]]
        prev_steps: list[Any] = [self.prev_step, *steps[:-1]]
        first = 1 if self.prev_t is None or self.prev_step is None else 0
        durations: list[float | None] = [None] * first
        durations += [
            (t - pt) / (s - ps) if s > ps else t - pt
            for t, pt, s, ps in zip(
                ts[first:], prev_ts[first:], steps[first:], prev_steps[first:], strict=True
            )
        ]
        # the metrics dicts are log_step's own **kwargs (nobody else holds them): used as they
        # are, unless derived figures are to be added (a caller of build() may share one dict)
        derived = bool(self.tokens_per_step or (self.flops_per_token and self.peak_flops))
        if derived:
            mets = self._derived(mets, durations)
        flags = self._flags(mets)
        run_id, experiment, seq = self.run_id, self.experiment, self.seq
        stamps, numbers = self._stamps(ts), range(seq, seq + n)
        rows = zip(stamps, numbers, steps, epochs, durations, mets, flags or mets, strict=True)
        if flags is not None and None not in flags:  # every step flagged: the usual loop
            docs = [
                {
                    "@timestamp": stamp,
                    "run_id": run_id,
                    "experiment": experiment,
                    "seq": number,
                    "step": step,
                    "epoch": epoch,
                    "duration_s": duration,
                    "metrics": metrics,
                    "flags": flag,
                }
                for stamp, number, step, epoch, duration, metrics, flag in rows
            ]
        else:
            docs = [
                {
                    "@timestamp": stamp,
                    "run_id": run_id,
                    "experiment": experiment,
                    "seq": number,
                    "step": step,
                    "epoch": epoch,
                    "duration_s": duration,
                    "metrics": metrics,
                }
                for stamp, number, step, epoch, duration, metrics, _ in rows
            ]
            if flags is not None:
                for doc, flag in zip(docs, flags, strict=True):
                    if flag is not None:
                        doc["flags"] = flag
        if first:  # the first step of the run: no duration (the item-by-item path's key order)
            doc = docs[0]
            del doc["duration_s"]
            doc["metrics"] = doc.pop("metrics")
            if "flags" in doc:
                doc["flags"] = doc.pop("flags")
        self.seq = seq + n
        if self.first_t is None:
            self.first_t, self.first_step = ts[0], steps[0]
        self.prev_t, self.prev_step = ts[-1], steps[-1]
        self.last_step, self.last_epoch = steps[-1], epochs[-1]
        if n > first:
            self.last_duration = durations[-1]
        self.steps += n
        if len(mets[-1]) == len(keys) and not derived:  # the last step has every name
            self.last_metrics.update(mets[-1])
        else:
            self.last_metrics.update(chain.from_iterable(map(dict.items, mets)))
        return docs

    def _stamps(self, ts: list[float]) -> list[str]:
        """``self.iso(t)`` of each time: the date part formatted once per distinct second."""
        iso = self.iso
        seconds = list(map(int, ts))
        prefix = {sec: iso(float(sec))[:-7] for sec in set(seconds)}
        # %d truncates a float, as int() does; a third faster here than an f-string's int()
        return [
            "%s%06dZ" % (prefix[sec], (t - sec) * 1e6)  # noqa: UP031
            for t, sec in zip(ts, seconds, strict=True)
        ]

    def _derived(
        self, mets: list[dict[str, Any]], durations: list[float | None]
    ) -> list[dict[str, Any]]:
        """Copies of the metrics with ``tokens_per_s`` and ``mfu`` added (unless logged)."""
        tokens = self.tokens_per_step
        fpt, peak = self.flops_per_token, self.peak_flops
        mfu_on = bool(fpt and peak)
        out = []
        for metrics, per_step in zip(mets, durations, strict=True):
            metrics = dict(metrics)
            if tokens and per_step is not None and per_step > 0 and "tokens_per_s" not in metrics:
                metrics["tokens_per_s"] = tokens / per_step
            if mfu_on and "mfu" not in metrics and "tokens_per_s" in metrics:
                metrics["mfu"] = metrics["tokens_per_s"] * fpt / peak
            out.append(metrics)
        return out

    def _flags(self, mets: list[dict[str, Any]]) -> list[dict[str, Any] | None] | None:
        """Each step's ``flags`` (None: no flag), from the spike detector and the loss trend."""
        n = len(mets)
        grads, losses = _column(mets, "grad_norm"), _column(mets, "loss")
        if not grads and not losses:
            return None
        spikes: list[Any] = [None] * n
        if grads:
            spikes = self.spike.push_many(grads)
            if len(grads) != n:
                it = iter(spikes)
                spikes = [next(it) if "grad_norm" in m else None for m in mets]
        trends: list[str | None] = [None] * n
        if losses:
            trends = self.trend.push_many(losses)
            if len(losses) != n:
                it2 = iter(trends)
                trends = [next(it2) if "loss" in m else None for m in mets]
        table = self._flag_dicts
        return [table[pair] for pair in zip(spikes, trends, strict=True)]

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
        doc = self._tick_doc(t)
        self._attach(doc, sample)
        return doc

    def _tick_doc(self, t: float) -> dict[str, Any]:
        """A document with no step metrics at ``t``, the next ``seq``, the last step seen."""
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
        return doc

    def rank_tick(self, t: float, rank: int, sample: Sample) -> dict[str, Any]:
        """A document of another rank's system figures (``system_per_rank``): ``rank`` and
        ``host`` set, next in this run's ``seq``; this process's own figures stay apart."""
        doc = self._tick_doc(t)
        doc["rank"] = rank
        if sample.get("host"):
            doc["host"] = sample["host"]
        if sample.get("system"):
            doc["system"] = dict(sample["system"])
        if sample.get("gpus"):
            doc["gpus"] = [dict(g) for g in sample["gpus"]]
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


def _column(mets: list[dict[str, Any]], name: str) -> list[Any]:
    """The values of metric ``name`` in the steps that have it, in order."""
    try:
        return list(map(itemgetter(name), mets))  # every step has it: one C loop
    except KeyError:
        return [m[name] for m in mets if name in m]


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
