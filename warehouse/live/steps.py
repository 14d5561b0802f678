"""The live per-step index: ``log_step`` on the training thread, everything else behind it.

:class:`StepLogger` owns the path from ``run.log_step(step, loss=...)`` to the steps store:

- **Training thread** (:meth:`StepLogger.log_step`): appends one tuple ``(time, step, epoch,
  metrics)`` to a deque — no validation, no locks, no I/O (about 0.3 µs).
- **Flush thread** (``warehouse-steps-flush``, every 0.5 s with the console on, else every
  ``flush_interval_s``): drains the deque and turns the tuples into step documents (the shape
  in ``COMMON.md``: ``@timestamp``, ``run_id``, ``experiment``, ``seq``, ``step``, ``epoch``,
  ``duration_s``, ``metrics``, ``flags``, ``system``, ``gpus``), computes the derived figures,
  attaches system samples and draws the console line.
- **Ship thread** (``warehouse-steps-ship``): calls ``sink(docs)`` in batches of at most
  ``batch_size``. When the sink raises (store slow or down), the batch is spilled to
  ``spill_dir`` as JSON lines and retried with backoff (1 s doubling to 30 s); spilled segments
  are shipped, oldest first, before anything newer. When more than ``max_buffered`` documents
  wait in memory, they are spilled too: memory stays bounded whatever the store does.
- **System sampler** (``warehouse.live.system``), every ``system_interval_s`` seconds.

Policies (decided here, once):

- ``seq`` counts documents of this logger from 0, in order; the document id is
  ``run_id:seq``, so a retried batch replaces, never duplicates.
- ``duration_s`` is the time per step since the previously logged step: the elapsed seconds
  divided by how many steps passed (a run logging every 10th step still gets a per-step
  time). The first step has none.
- Metric values are converted with ``float()`` (numpy and torch scalars work). Non-finite
  values (NaN, ±inf) and non-numbers are **dropped from ``metrics``** — JSON and Elasticsearch
  have no NaN — with one warning per metric name. A non-finite ``grad_norm`` sets
  ``flags.grad_norm_spike``.
- Derived figures: ``tokens_per_s`` = ``tokens_per_step`` / ``duration_s``; ``mfu`` =
  ``tokens_per_s * flops_per_token / peak_flops``; ``flags.grad_norm_spike`` when
  ``grad_norm`` > 5x its moving average (after 10 values); ``flags.loss_trend`` (``down``,
  ``flat``, ``up``) comparing the mean ``loss`` of the newer and older halves of the last 50
  steps (±1 %). Figures the caller logs itself are never overwritten.
- A system sample is attached (``system`` and ``gpus``) to the first step logged after it was
  taken; a sample with no step after it before the next sample (a slow step, a program that
  logs no metrics) becomes a document of its own: a *sampling tick* with empty ``metrics``,
  the last step and epoch seen, and no ``duration_s``. Each sample thus appears exactly once.
- Documents handed to the sink are fresh dicts; the sink may keep them.

Everything is flushed by :meth:`StepLogger.close`, at normal interpreter exit (``atexit``)
and on SIGTERM (a handler installed only from the main thread, which then chains to the
previous handler or re-raises the default action so the process still terminates). What
cannot be shipped at close stays in ``spill_dir``; :func:`ship_spilled` ships it later.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import math
import os
import signal
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from warehouse.models import normalise_name

if TYPE_CHECKING:
    from warehouse.live.console import ConsoleLine
    from warehouse.live.system import Sample, SystemSampler

log = logging.getLogger(__name__)

Sink = Callable[[list[dict[str, Any]]], None]
_Item = tuple[float, Any, Any, dict[str, Any]]

BATCH_SIZE = 5_000
CONSOLE_TICK_S = 0.5
CLOSE_TIMEOUT_S = 30.0
CLOSE_RETRIES_S = (0.2, 1.0)
MAX_BACKOFF_S = 30.0
SPIKE_FACTOR = 5.0
SPIKE_WARMUP = 10
SPIKE_ALPHA = 0.02
TREND_HALF = 25
TREND_MIN = 10
TREND_THRESHOLD = 0.01
PER_STEP_SAMPLE_MIN_S = 0.1


# ---------------------------------------------------------------------------------------------
# tuples -> documents (the flush thread's state; no locking: one thread owns it)
# ---------------------------------------------------------------------------------------------
class _Trend:
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


class _Spike:
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


class _Iso:
    """ISO-8601 UTC timestamps with microseconds, the date part cached per second."""

    def __init__(self) -> None:
        self.second = -1
        self.prefix = ""

    def __call__(self, t: float) -> str:
        sec = int(t)
        if sec != self.second:
            self.second = sec
            self.prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        return f"{self.prefix}.{int((t - sec) * 1e6):06d}Z"


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
        self.iso = _Iso()
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
        self.spike = _Spike()
        self.trend = _Trend()
        self.samples: deque[tuple[float, Sample]] = deque()  # taken, not yet attached

    # ---------------------------------------------------------------------------------------
    def build(
        self, items: list[_Item], samples: list[tuple[float, Sample]]
    ) -> list[dict[str, Any]]:
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
    def _step_doc(self, item: _Item) -> dict[str, Any] | None:
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
        if self.prev_t is not None and self.prev_step is not None:
            passed = step - self.prev_step
            elapsed = t - self.prev_t
            per_step = elapsed / passed if passed > 0 else elapsed
            doc["duration_s"] = per_step
            self.last_duration = per_step
            if per_step > 0 and self.tokens_per_step and "tokens_per_s" not in metrics:
                metrics["tokens_per_s"] = self.tokens_per_step / per_step
        if (
            self.flops_per_token
            and self.peak_flops
            and "mfu" not in metrics
            and "tokens_per_s" in metrics
        ):
            metrics["mfu"] = metrics["tokens_per_s"] * self.flops_per_token / self.peak_flops
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


# ---------------------------------------------------------------------------------------------
# spill segments
# ---------------------------------------------------------------------------------------------
def _segments(spill_dir: Path) -> list[Path]:
    try:
        return sorted(spill_dir.glob("*.jsonl"))
    except OSError:
        return []


def _write_segment(spill_dir: Path, docs: list[dict[str, Any]]) -> Path:
    spill_dir.mkdir(parents=True, exist_ok=True)
    path = spill_dir / f"{docs[0]['seq']:012d}.jsonl"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for doc in docs:
            out.write(json.dumps(doc, allow_nan=False, separators=(",", ":")))
            out.write("\n")
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    return path


def _read_segment(path: Path) -> list[dict[str, Any]]:
    docs = []
    with open(path, encoding="utf-8") as src:
        for line in src:
            if line.strip():
                try:
                    docs.append(json.loads(line))
                except ValueError:  # a torn last line after a crash: the rest is good
                    log.warning("skipping a damaged line in spilled steps %s", path)
    return docs


def spilled_count(spill_dir: str | os.PathLike[str]) -> int:
    """How many step documents wait in ``spill_dir``."""
    total = 0
    for path in _segments(Path(spill_dir)):
        with open(path, "rb") as src:
            total += sum(1 for line in src if line.strip())
    return total


def ship_spilled(
    spill_dir: str | os.PathLike[str], sink: Sink, batch_size: int = BATCH_SIZE
) -> int:
    """Ship the step documents waiting in ``spill_dir`` (oldest first); return how many.

    A segment is removed once all of it is shipped. When ``sink`` raises, what is left stays
    on disk and the exception propagates (for ``warehouse sync`` to report).
    """
    folder = Path(spill_dir)
    shipped = 0
    for path in _segments(folder):
        docs = _read_segment(path)
        for start in range(0, len(docs), batch_size):
            try:
                sink(docs[start : start + batch_size])
            except Exception:
                if start:
                    _write_segment(folder, docs[start:])
                    path.unlink(missing_ok=True)
                raise
            shipped += len(docs[start : start + batch_size])
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty
    return shipped


# ---------------------------------------------------------------------------------------------
# the logger
# ---------------------------------------------------------------------------------------------
class StepLogger:
    """Per-step training metrics of one run, shipped to ``sink`` from background threads."""

    def __init__(
        self,
        run_id: str,
        experiment: str,
        sink: Sink,
        spill_dir: Path,
        *,
        console: bool = True,
        total_steps: int | None = None,
        system_interval_s: float = 10.0,
        system_per_step: bool = False,
        tokens_per_step: float | None = None,
        flops_per_token: float | None = None,
        peak_flops: float | None = None,
        flush_interval_s: float = 1.0,
        max_buffered: int = 100_000,
        first_seq: int = 0,
    ) -> None:
        self.run_id = run_id
        self.experiment = experiment
        self.spill_dir = Path(spill_dir)
        self.total_steps = total_steps
        self.flush_interval_s = max(0.01, float(flush_interval_s))
        self.max_buffered = max(1, int(max_buffered))
        self.batch_size = BATCH_SIZE
        self.close_timeout_s = CLOSE_TIMEOUT_S
        self.system_per_step = system_per_step
        self._sink = sink
        self._buf: deque[_Item] = deque()
        self._samples: deque[tuple[float, Sample]] = deque()
        # the hot path: two bound callables, looked up once
        self._append: Callable[[_Item], None] = self._buf.append
        self._time = time.time
        self._builder = DocBuilder(
            run_id,
            experiment,
            tokens_per_step=tokens_per_step,
            flops_per_token=flops_per_token,
            peak_flops=peak_flops,
        )
        self._builder.seq = first_seq  # a resumed run numbers its steps after the stored ones
        self._console: ConsoleLine | None = None
        if console:
            from warehouse.live.console import ConsoleLine

            self._console = ConsoleLine(total_steps)
        self._started = time.time()
        # shipping state (shared by the two threads; guarded by _lock)
        self._lock = threading.RLock()  # re-entrant: close() may run in a SIGTERM handler
        self._queue: deque[list[dict[str, Any]]] = deque()
        self._queued = 0
        self._ship_wake = threading.Event()
        self._flush_wake = threading.Event()
        self._stop_flush = threading.Event()
        self._stop_ship = threading.Event()
        self._done = threading.Condition(self._lock)
        self._requested = 0  # flush() generations
        self._converted = 0
        self._shipped_gen = 0
        self._ship_ok = True
        self._outage = False
        self._retry_at = 0.0
        self._backoff = 0.0
        self.stats = {"logged": 0, "docs": 0, "shipped": 0, "spilled": 0, "sink_errors": 0}
        self._closed = False
        self._closing = False
        # the sampler
        self._sampler: SystemSampler | None = None
        if system_interval_s > 0 or system_per_step:
            from warehouse.live.system import SystemSampler

            self._sampler = SystemSampler(
                system_interval_s if system_interval_s > 0 else 0,
                on_sample=self._on_sample,
            )
        self._last_per_step_sample = -math.inf
        # threads
        self._flusher = threading.Thread(
            target=self._flush_loop, name="warehouse-steps-flush", daemon=True
        )
        self._shipper = threading.Thread(
            target=self._ship_loop, name="warehouse-steps-ship", daemon=True
        )
        self._flusher.start()
        self._shipper.start()
        if self._sampler is not None:
            self._sampler.start()
        if _segments(self.spill_dir):
            # a previous logger of this run left steps behind: ship them first, and number
            # ours after them so that no id is reused
            self._builder.seq = max(
                self._builder.seq,
                max((d.get("seq", -1) for d in iter_docs(self.spill_dir)), default=-1) + 1,
            )
            self._ship_wake.set()
        atexit.register(self._at_exit)
        _LIVE.add(self)
        self._prev_sigterm: Any = None
        self._sigterm_installed = False
        self._install_sigterm()

    # ---- the hot path ----------------------------------------------------------------------
    def log_step(self, step: int, epoch: int | None = None, **metrics: float) -> None:
        """Record one step's metrics; returns at once (the work happens on a background thread)."""
        self._append((self._time(), step, epoch, metrics))

    # ---- control ---------------------------------------------------------------------------
    def flush(self, timeout: float | None = 30.0) -> bool:
        """Convert and ship everything logged so far; True if it reached the sink."""
        with self._lock:
            self._requested += 1
            target = self._requested
        self._flush_wake.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while self._shipped_gen < target and self._shipper.is_alive():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._done.wait(left)
            return self._ship_ok and self._shipped_gen >= target

    def close(self) -> None:
        """Flush everything, stop the threads, print the summary line (when the console is on)."""
        if self._closed or self._closing:
            return
        self._closing = True
        self._append = self._after_close
        if self._sampler is not None:
            self._sampler.stop()
            if self._sampler.interval_s > 0:  # a last sample: short runs get one too
                try:
                    self._samples.append((time.time(), self._sampler.sample()))
                except Exception:
                    log.warning("system sampling failed at close", exc_info=True)
        self._stop_flush.set()
        self._flush_wake.set()
        self._flusher.join(timeout=self.close_timeout_s)
        self._stop_ship.set()
        self._ship_wake.set()
        self._shipper.join(timeout=self.close_timeout_s)
        if self._shipper.is_alive():
            log.warning(
                "run %s: the steps store did not answer within %.0f s at close; "
                "the steps not yet shipped are kept in %s",
                self.run_id,
                self.close_timeout_s,
                self.spill_dir,
            )
            self._spill_queue()
        self._closed = True
        left = spilled_count(self.spill_dir) if _segments(self.spill_dir) else 0
        if left:
            log.warning(
                "run %s: %d step document(s) could not be shipped and are kept in %s; "
                "they are shipped by 'warehouse sync' or the next logger of this run",
                self.run_id,
                left,
                self.spill_dir,
            )
        if self._console is not None:
            b = self._builder
            self._console.summary(
                b.steps, time.time() - self._started, b.mean_step_s(), b.last_metrics
            )
        with contextlib.suppress(Exception):
            atexit.unregister(self._at_exit)
        self._restore_sigterm()

    def __enter__(self) -> StepLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- sampler callback (sampler thread) -------------------------------------------------
    def _on_sample(self, t: float, sample: Sample) -> None:
        self._samples.append((t, sample))

    def _after_close(self, item: _Item) -> None:
        log.debug("run %s: log_step after close; step %s dropped", self.run_id, item[1])

    # ---- the flush thread ------------------------------------------------------------------
    def _flush_loop(self) -> None:
        tick = (
            min(CONSOLE_TICK_S, self.flush_interval_s) if self._console else self.flush_interval_s
        )
        last_handoff = time.monotonic()
        handed = 0
        while True:
            stopping = self._stop_flush.is_set()
            if not stopping:
                self._flush_wake.wait(tick)
                self._flush_wake.clear()
                stopping = self._stop_flush.is_set()
            with self._lock:
                generation = self._requested
            try:
                self._convert(final=stopping)
            except Exception:  # never let the thread die: steps would pile up silently
                log.exception("run %s: converting steps failed; continuing", self.run_id)
            now = time.monotonic()
            with self._lock:
                self._converted = generation
                queued = self._queued
                over = queued > self.max_buffered
            if over:
                self._spill_queue()
            if (
                stopping
                or over
                or generation > handed
                or queued >= self.batch_size
                or (queued and now - last_handoff >= self.flush_interval_s)
            ):
                self._ship_wake.set()
                last_handoff, handed = now, generation
            if stopping:
                return

    def _convert(self, final: bool) -> None:
        buf = self._buf
        n = len(buf)
        items = [buf.popleft() for _ in range(n)]
        samples_q = self._samples
        samples = [samples_q.popleft() for _ in range(len(samples_q))]
        if items and self.system_per_step and self._sampler is not None:
            now = time.time()
            if now - self._last_per_step_sample >= PER_STEP_SAMPLE_MIN_S:
                self._last_per_step_sample = now
                try:
                    samples.append((items[-1][0], self._sampler.sample()))
                except Exception:
                    log.warning("system sampling failed; continuing", exc_info=True)
                samples.sort(key=lambda s: s[0])
        b = self._builder
        docs = b.build(items, samples) if (items or samples) else []
        if final:
            docs.extend(b.finish())
        self.stats["logged"] += n
        if docs:
            self.stats["docs"] += len(docs)
            with self._lock:
                self._queue.append(docs)
                self._queued += len(docs)
        if self._console is not None and items and b.steps:
            self._console.update(
                time.monotonic(),
                b.last_step,
                b.last_metrics,
                b.last_duration,
                b.last_system,
                force=final,
            )

    # ---- the ship thread -------------------------------------------------------------------
    def _ship_loop(self) -> None:
        while True:
            stopping = self._stop_ship.is_set()
            if not stopping:
                wait = max(0.0, self._retry_at - time.monotonic()) if self._retry_at else None
                self._ship_wake.wait(wait if wait else self.flush_interval_s * 5)
                self._ship_wake.clear()
                stopping = self._stop_ship.is_set()
                if not stopping and time.monotonic() < self._retry_at:
                    # backing off; but honour explicit flush() requests with one attempt
                    with self._lock:
                        wanted = self._converted > self._shipped_gen
                    if not wanted:
                        continue
            with self._lock:
                generation = self._converted
            ok = self._ship_everything()
            if stopping and not ok:  # closing: a few quick retries before leaving it on disk
                for pause in CLOSE_RETRIES_S:
                    time.sleep(pause)
                    ok = self._ship_everything()
                    if ok:
                        break
            if ok:
                self._retry_at = 0.0
                self._backoff = 0.0
            else:
                self._backoff = min(MAX_BACKOFF_S, max(1.0, self._backoff * 2))
                self._retry_at = time.monotonic() + self._backoff
            with self._done:
                self._ship_ok = ok
                self._shipped_gen = max(self._shipped_gen, generation)
                self._done.notify_all()
            if stopping:
                if not ok:
                    self._spill_queue()
                return

    def _ship_everything(self) -> bool:
        for path in _segments(self.spill_dir):
            try:
                docs = _read_segment(path)
            except OSError:
                log.warning("cannot read spilled steps %s", path, exc_info=True)
                continue
            for start in range(0, len(docs), self.batch_size):
                if not self._send(docs[start : start + self.batch_size]):
                    if start:
                        self._write_spill(docs[start:], count=False)
                        path.unlink(missing_ok=True)
                    return False
            path.unlink(missing_ok=True)
        while True:
            batch: list[dict[str, Any]] = []
            with self._lock:
                while self._queue and len(batch) + len(self._queue[0]) <= self.batch_size:
                    part = self._queue.popleft()
                    self._queued -= len(part)
                    batch.extend(part)
                if not batch and self._queue:  # one oversized part
                    batch = self._queue.popleft()
                    self._queued -= len(batch)
            if not batch:
                with contextlib.suppress(OSError):
                    if self.spill_dir.is_dir():
                        self.spill_dir.rmdir()
                return True
            for start in range(0, len(batch), self.batch_size):
                if not self._send(batch[start : start + self.batch_size]):
                    self._write_spill(batch[start:])
                    return False

    def _send(self, docs: list[dict[str, Any]]) -> bool:
        try:
            self._sink(docs)
        except Exception as exc:
            self.stats["sink_errors"] += 1
            if not self._outage:
                self._outage = True
                log.warning(
                    "run %s: the steps store refused a batch (%s: %s); steps are kept in %s "
                    "and retried",
                    self.run_id,
                    type(exc).__name__,
                    exc,
                    self.spill_dir,
                )
            return False
        if self._outage:
            self._outage = False
            log.info("run %s: the steps store is back; shipping kept steps", self.run_id)
        self.stats["shipped"] += len(docs)
        return True

    # ---- spilling ----------------------------------------------------------------------------
    def _spill_queue(self) -> None:
        with self._lock:
            parts = list(self._queue)
            self._queue.clear()
            self._queued = 0
        docs = [d for part in parts for d in part]
        if docs:
            self._write_spill(docs)

    def _write_spill(self, docs: list[dict[str, Any]], count: bool = True) -> None:
        try:
            _write_segment(self.spill_dir, docs)
        except (OSError, ValueError):
            log.exception(
                "run %s: cannot spill %d step documents to %s; they are lost",
                self.run_id,
                len(docs),
                self.spill_dir,
            )
            return
        if count:
            with self._lock:
                self.stats["spilled"] += len(docs)

    # ---- exit paths ----------------------------------------------------------------------
    def _forked(self) -> None:
        """In a forked child (a DataLoader worker ...): the threads are gone; ship nothing."""
        self._closed = True
        self._append = self._after_close
        self._sigterm_installed = False
        with contextlib.suppress(Exception):
            atexit.unregister(self._at_exit)

    def _at_exit(self) -> None:
        try:
            self.close()
        except Exception:
            log.exception("run %s: flushing steps at exit failed", self.run_id)

    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            self._prev_sigterm = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, self._on_sigterm)
        except (ValueError, OSError):  # not allowed here (embedded interpreter ...)
            return
        self._sigterm_installed = True

    def _restore_sigterm(self) -> None:
        if not self._sigterm_installed:
            return
        if threading.current_thread() is not threading.main_thread():
            return  # our handler stays; once closed it only chains
        with contextlib.suppress(ValueError, OSError, TypeError):
            if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                signal.signal(signal.SIGTERM, self._prev_sigterm)
                self._sigterm_installed = False

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        try:
            self.close()
        except Exception:
            log.exception("run %s: flushing steps on SIGTERM failed", self.run_id)
        previous = self._prev_sigterm
        if callable(previous):
            previous(signum, frame)
            return
        if previous == signal.SIG_IGN:
            return
        # the default action: terminate, as if we had never been here
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


_LIVE: weakref.WeakSet[StepLogger] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for steps in list(_LIVE):
        steps._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def ship_spill_root(
    spill_root: Path, sink_for: Callable[[str, str], Sink]
) -> tuple[int, list[tuple[str, str]]]:
    """Ship every run's spilled steps under ``spill_root`` (``<home>/spill/<run_id>/``)
    through ``sink_for(run_id, experiment)``: (documents shipped, [(run_id, why not)]).

    For ``warehouse sync``, after the steps store was down when a run ended. A logger still
    running may ship the same segments at the same time: steps are keyed by ``run_id:seq``,
    so a document shipped twice is stored once.
    """
    shipped: int = 0
    failed: list[tuple[str, str]] = []
    try:
        folders = sorted(p for p in spill_root.iterdir() if p.is_dir())
    except OSError:
        return 0, []
    for folder in folders:
        run_id = folder.name
        first = next(iter_docs(folder), None)
        if first is None:
            with contextlib.suppress(OSError):
                folder.rmdir()
            continue
        experiment = str(first.get("experiment") or "default")
        try:
            shipped += ship_spilled(folder, sink_for(run_id, experiment))
        except Exception as exc:  # the rest stays on disk for the next sync
            failed.append((run_id, f"{type(exc).__name__}: {exc}"))
    return shipped, failed


def spilled_total(spill_root: Path) -> int:
    """Step documents waiting under ``spill_root``, all runs together."""
    try:
        return sum(spilled_count(p) for p in spill_root.iterdir() if p.is_dir())
    except OSError:
        return 0


def iter_docs(spill_dir: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The documents waiting in ``spill_dir``, oldest first (for inspection and tests)."""
    for path in _segments(Path(spill_dir)):
        yield from _read_segment(path)


__all__ = [
    "DocBuilder",
    "Sink",
    "StepLogger",
    "is_tick",
    "iter_docs",
    "ship_spill_root",
    "ship_spilled",
    "spilled_count",
    "spilled_total",
]
