"""The live per-step index: ``log_step`` on the training thread, everything else on one thread.

- **Training thread** (:meth:`StepLogger.log_step`): reads the clock and puts
  ``time, step, epoch, metrics`` on a deque, four slots in one ``extend`` — no validation, no
  lock, no I/O. Four slots rather than one tuple: the deque then holds no object the garbage
  collector tracks (a tuple holding a dict stays tracked; the ``**metrics`` dict of floats is
  not), so a burst of steps waiting for the thread costs no collector work.
- **The logger's thread** (``warehouse-steps``, every 0.5 s with the console on, else every
  ``flush_interval_s``): drains the deque, builds the step documents
  (:mod:`warehouse.live.step_docs`), attaches system samples, draws the console line, and hands
  the documents to ``sink`` in batches of at most :data:`BATCH_SIZE`.
- **System sampler** (:mod:`warehouse.live.system`), on its own timer.

The sink is the durable path: in a recorded run it is the run's store (the local store, and the
outbox towards Elasticsearch: :class:`~warehouse.replication.store.ReplicatingStore`), so a
store that is down costs nothing here. Should the sink itself fail (a full disk), documents wait
in memory and are offered again with backoff (1 s doubling to 30 s), at most
``max_buffered`` of them: past that the oldest are dropped, counted and logged.

Exit paths belong to :class:`warehouse.live.lifecycle.Lifecycle`: the logger joins it, so it is
flushed at interpreter exit and on SIGTERM (after which the process still terminates).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat, starmap
from typing import TYPE_CHECKING, Any

from warehouse.live.lifecycle import Lifecycle
from warehouse.live.step_docs import DocBuilder, Item

if TYPE_CHECKING:
    from warehouse.live.console import ConsoleLine
    from warehouse.live.system import Sample, SystemSampler

log = logging.getLogger(__name__)

RankSource = Callable[[bool], "list[tuple[float, int, dict[str, Any]]]"]
"""Other ranks' system samples, ``(time, rank, sample)``; called with True the last time."""

Sink = Callable[[list[dict[str, Any]]], None]
"""Takes a batch of step documents to store; it must not change them (a batch it refuses
is offered again, the same documents)."""

BATCH_SIZE = 5_000
CONSOLE_TICK_S = 0.5
CLOSE_TIMEOUT_S = 30.0
CLOSE_RETRIES_S = (0.2, 1.0)
MAX_BACKOFF_S = 30.0
PER_STEP_SAMPLE_MIN_S = 0.1


@dataclass(frozen=True)
class StepOptions:
    """How a run's steps are logged.

    ``total_steps`` gives the console line its ETA; ``tokens_per_step`` gives tokens/s, with
    ``flops_per_token`` and ``peak_flops`` also MFU; ``system_per_step`` samples the machine on
    every logged step (at most every 0.1 s) instead of every ``system_interval_s``."""

    total_steps: int | None = None
    tokens_per_step: float | None = None
    flops_per_token: float | None = None
    peak_flops: float | None = None
    system_per_step: bool = False
    system_interval_s: float = 10.0
    console: bool = True
    flush_interval_s: float = 1.0
    max_buffered: int = 100_000
    first_seq: int = 0  # a resumed run numbers its steps after the stored ones


class StepLogger:
    """Per-step training metrics of one run, shipped to ``sink`` from one background thread."""

    def __init__(
        self,
        run_id: str,
        experiment: str,
        sink: Sink,
        options: StepOptions | None = None,
    ) -> None:
        o = options or StepOptions()
        self.run_id = run_id
        self.experiment = experiment
        self.options = o
        self.flush_interval_s = max(0.01, float(o.flush_interval_s))
        self.max_buffered = max(1, int(o.max_buffered))
        self.batch_size = BATCH_SIZE
        self.close_timeout_s = CLOSE_TIMEOUT_S
        self._sink = sink
        self._buf: deque[Any] = deque()  # time, step, epoch, metrics, time, step, ...
        self._samples: deque[tuple[float, Sample]] = deque()
        # the hot path: two bound callables, looked up once
        self._put: Callable[[Item], None] = self._buf.extend
        self._time = time.time
        self._builder = DocBuilder(
            run_id,
            experiment,
            tokens_per_step=o.tokens_per_step,
            flops_per_token=o.flops_per_token,
            peak_flops=o.peak_flops,
        )
        self._builder.seq = o.first_seq
        self._console: ConsoleLine | None = None
        if o.console:
            from warehouse.live.console import ConsoleLine

            self._console = ConsoleLine(o.total_steps)
        self._started = time.time()
        self._pending: list[dict[str, Any]] = []  # built, not yet taken by the sink
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._done = threading.Condition()
        self._requested = 0  # flush() generations asked for
        self._flushed = 0  # ... and done
        self._flush_ok = True
        self._outage = False
        self._retry_at = 0.0
        self._backoff = 0.0
        self._last_handoff = time.monotonic()
        self.stats = {"logged": 0, "docs": 0, "shipped": 0, "sink_errors": 0, "dropped": 0}
        self._closed = False
        self._closing = False
        self._sampler: SystemSampler | None = None
        if o.system_interval_s > 0 or o.system_per_step:
            from warehouse.live.system import SystemSampler

            self._sampler = SystemSampler(max(o.system_interval_s, 0), on_sample=self._on_sample)
        self._last_per_step_sample = -math.inf
        self._sources: list[RankSource] = []
        self._thread = threading.Thread(target=self._loop, name="warehouse-steps", daemon=True)
        self._thread.start()
        if self._sampler is not None:
            self._sampler.start()
        _LIVE.add(self)
        Lifecycle.current().join(self)

    # ---- the hot path ----------------------------------------------------------------------
    def log_step(self, step: int, epoch: int | None = None, /, **metrics: float) -> None:
        """Record one step's metrics; returns at once (the work happens on a background thread).

        ``step`` and ``epoch`` are positional, so any name is a metric (``epoch``, ``step``)."""
        self._put((self._time(), step, epoch, metrics))

    # ---- control ---------------------------------------------------------------------------
    def add_source(self, source: RankSource) -> None:
        """Record other ranks' system samples too: ``source(final)`` is called on the logger's
        thread at every flush (``final`` at close) and returns ``(time, rank, sample)``s, each
        recorded as a document with ``rank`` (:mod:`warehouse.live.rank_system`)."""
        self._sources.append(source)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Build and hand to the sink everything logged so far; True if the sink took it."""
        with self._done:
            self._requested += 1
            target = self._requested
        self._wake.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while self._flushed < target and self._thread.is_alive():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._done.wait(left)
            return self._flush_ok and self._flushed >= target

    def close(self) -> None:
        """Flush everything, stop the thread, print the summary line (when the console is on)."""
        if self._closed or self._closing:
            return
        self._closing = True
        self._put = self._after_close
        if self._sampler is not None:
            self._sampler.stop()
            if self._sampler.interval_s > 0:  # a last sample: short runs get one too
                try:
                    self._samples.append((time.time(), self._sampler.sample()))
                except Exception:
                    log.warning("system sampling failed at close", exc_info=True)
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=self.close_timeout_s)
        if self._thread.is_alive():
            log.warning(
                "run %s: the steps store did not take the last steps within %.0f s of closing; "
                "%d step document(s) are not recorded",
                self.run_id,
                self.close_timeout_s,
                len(self._pending),
            )
        elif self._pending:
            log.error(
                "run %s: %d step document(s) could not be recorded (the store refused them); "
                "see the warnings above",
                self.run_id,
                len(self._pending),
            )
        self._closed = True
        if self._console is not None:
            b = self._builder
            self._console.summary(
                b.steps, time.time() - self._started, b.mean_step_s(), b.last_metrics
            )
        Lifecycle.current().leave(self)

    def __enter__(self) -> StepLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the lifecycle's calls -------------------------------------------------------------
    def terminate(self, reason: str) -> None:
        """SIGTERM: flush what was logged (the process then terminates)."""
        self.close()

    def at_exit(self, error: BaseException | None) -> None:
        """Interpreter exit without close(): flush what was logged."""
        self.close()

    def heartbeat(self) -> None:
        """Steps have no heartbeat of their own (the run's record has)."""

    # ---- sampler callback (sampler thread) -------------------------------------------------
    def _on_sample(self, t: float, sample: Sample) -> None:
        self._samples.append((t, sample))

    def _after_close(self, item: Item) -> None:
        log.debug("run %s: log_step after close; step %s dropped", self.run_id, item[1])

    # ---- the logger's thread ---------------------------------------------------------------
    def _loop(self) -> None:
        tick = (
            min(CONSOLE_TICK_S, self.flush_interval_s) if self._console else self.flush_interval_s
        )
        while True:
            stopping = self._stop.is_set()
            if not stopping:
                wait = tick
                if self._pending and self._retry_at:
                    wait = min(tick, max(0.0, self._retry_at - time.monotonic()))
                self._wake.wait(wait)
                self._wake.clear()
                stopping = self._stop.is_set()
            with self._done:
                generation = self._requested
            asked = generation > self._flushed
            while True:  # in chunks: a burst of steps never makes one huge batch in memory
                more = False
                try:
                    more = self._build(final=stopping)
                except Exception:  # never let the thread die: steps would pile up silently
                    log.exception("run %s: building step documents failed; continuing", self.run_id)
                ok = self._hand_over(stopping, asked)
                if not more:
                    break
            if stopping and not ok:  # closing: a few quick retries before giving up
                for pause in CLOSE_RETRIES_S:
                    time.sleep(pause)
                    if self._hand_over(True, True):
                        ok = True
                        break
            with self._done:
                self._flush_ok = ok
                self._flushed = max(self._flushed, generation)
                self._done.notify_all()
            if stopping:
                return

    def _build(self, final: bool) -> bool:
        """Build the documents of at most ``batch_size`` logged steps (and the samples taken);
        True when more steps wait."""
        buf = self._buf
        n = min(len(buf) // 4, self.batch_size)
        flat = list(starmap(buf.popleft, repeat((), 4 * n)))  # one C loop, no Python call each
        ts = flat[0::4]
        more = len(buf) >= 4 and n == self.batch_size
        final = final and not more
        samples_q = self._samples
        samples = [samples_q.popleft() for _ in range(len(samples_q))]
        if n and self.options.system_per_step and self._sampler is not None:
            now = time.time()
            if now - self._last_per_step_sample >= PER_STEP_SAMPLE_MIN_S:
                self._last_per_step_sample = now
                try:
                    samples.append((ts[-1], self._sampler.sample()))
                except Exception:
                    log.warning("system sampling failed; continuing", exc_info=True)
                samples.sort(key=lambda s: s[0])
        b = self._builder
        columns = (ts, flat[1::4], flat[2::4], flat[3::4])
        docs = b.build_columns(columns, samples, more=more) if (n or samples) else []
        for source in self._sources:
            try:
                docs.extend(starmap(b.rank_tick, source(final)))
            except Exception:
                log.warning("reading the other ranks' system samples failed", exc_info=True)
        if final:
            docs.extend(b.finish())
        self.stats["logged"] += n
        if docs:
            self.stats["docs"] += len(docs)
            self._pending.extend(docs)
            over = len(self._pending) - self.max_buffered
            if over > 0:  # the sink has failed for long: keep memory bounded
                del self._pending[:over]
                self.stats["dropped"] += over
                log.error(
                    "run %s: the steps store keeps failing; %d oldest step document(s) dropped "
                    "to bound memory (%d dropped so far)",
                    self.run_id,
                    over,
                    self.stats["dropped"],
                )
        if self._console is not None and n and b.steps:
            self._console.update(
                time.monotonic(),
                b.last_step,
                b.last_metrics,
                b.last_duration,
                b.last_system,
                force=final,
            )
        return more

    def _hand_over(self, stopping: bool, asked: bool) -> bool:
        """Give pending documents to the sink when it is time; True when none are left."""
        if not self._pending:
            return True
        now = time.monotonic()
        due = (
            stopping
            or asked
            or len(self._pending) >= self.batch_size
            or now - self._last_handoff >= self.flush_interval_s
        )
        if not due or (not stopping and not asked and now < self._retry_at):
            return False
        self._last_handoff = now
        while self._pending:
            batch = self._pending[: self.batch_size]
            if not self._send(batch):
                self._backoff = min(MAX_BACKOFF_S, max(1.0, self._backoff * 2))
                self._retry_at = time.monotonic() + self._backoff
                return False
            del self._pending[: len(batch)]
        self._retry_at, self._backoff = 0.0, 0.0
        return True

    def _send(self, docs: list[dict[str, Any]]) -> bool:
        try:
            self._sink(docs)  # a copy of the list: a sink may keep it; documents are never changed
        except Exception as exc:
            self.stats["sink_errors"] += 1
            if not self._outage:
                self._outage = True
                log.warning(
                    "run %s: the steps store refused a batch (%s: %s); the steps wait in memory "
                    "and are offered again",
                    self.run_id,
                    type(exc).__name__,
                    exc,
                )
            return False
        if self._outage:
            self._outage = False
            log.info(
                "run %s: the steps store is back; recording the steps that waited", self.run_id
            )
        self.stats["shipped"] += len(docs)
        return True

    # ---- fork ------------------------------------------------------------------------------
    def after_fork(self) -> None:
        """In a forked child (a DataLoader worker ...): the thread is gone; record nothing."""
        self._closed = True
        self._put = self._after_close


_LIVE: weakref.WeakSet[StepLogger] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for steps in list(_LIVE):
        steps.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


__all__ = ["BATCH_SIZE", "RankSource", "Sink", "StepLogger", "StepOptions"]
