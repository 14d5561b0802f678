"""The one owner of what happens to open runs when the process is stopped, exits or goes on.

Open runs and step loggers *join* the process's :class:`Lifecycle`; it installs, once, what
they all need, and removes it when the last one leaves:

- **SIGTERM**: every participant is terminated, newest first (a run records ``interrupted``,
  its steps flushed), then the signal goes on: to the handler installed before, or the default
  action, so the process still terminates as it would have.
- **SIGINT** (Ctrl-C): ``KeyboardInterrupt`` as usual (a ``with start_run()`` block records
  ``interrupted``).
- Both signals are **deferred while a write is under way** on the main thread
  (:meth:`Lifecycle.writing`): the interrupted frame may hold the store's locks, so recording
  from the handler would wait on them forever, and a Ctrl-C inside ``end()`` would leave a
  finished run ``running``. The signal is handled the moment the write returns.
- **Interpreter exit** (``atexit``): participants still open are finished; a run ends
  ``completed``, or ``failed`` when an uncaught exception is ending the process.
- **Heartbeat**: a daemon thread calls ``heartbeat()`` on every participant every
  ``heartbeat_s``, so a run killed without a chance to say so (SIGKILL, out of memory) stops
  beating and shows as ``lost``.

Handlers are installed only from the main thread (Python allows no other). A forked child
(a DataLoader worker) leaves its parent's participants alone.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType, TracebackType
from typing import Any, ClassVar, Protocol

log = logging.getLogger(__name__)

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Participant(Protocol):
    """What joins the lifecycle: an open run, a step logger."""

    def terminate(self, reason: str) -> None:
        """The process received SIGTERM: finish now."""
        ...

    def at_exit(self, error: BaseException | None) -> None:
        """The interpreter exits (``error``: the uncaught exception ending it, if any)."""
        ...

    def heartbeat(self) -> None:
        """Say "still alive" (called from the heartbeat thread)."""
        ...


class Lifecycle:
    """The process-wide lifecycle (:meth:`current`); see the module docstring."""

    _instance: ClassVar[Lifecycle | None] = None
    _instance_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self._participants: list[Participant] = []
        self._lock = threading.RLock()
        self._writing = 0  # main-thread writes under way
        self._pending: tuple[int, FrameType | None] | None = None
        self._previous: dict[int, Any] = {}
        self._atexit = False
        self._uncaught: BaseException | None = None
        self._previous_excepthook: Any = None
        self._beat_s: float | None = None
        self._beat_stop = threading.Event()
        self._beat_thread: threading.Thread | None = None

    @classmethod
    def existing(cls) -> Lifecycle | None:
        """The process's lifecycle if one was made (never makes one)."""
        return cls._instance

    @classmethod
    def current(cls) -> Lifecycle:
        with cls._instance_lock:
            if cls._instance is None:
                cls._instance = Lifecycle()
            return cls._instance

    # joining ----------------------------------------------------------------------------------
    def join(self, participant: Participant, heartbeat_s: float | None = None) -> None:
        """Start looking after ``participant`` (``heartbeat_s``: beat it that often)."""
        with self._lock:
            self._participants.append(participant)
            if not self._atexit:
                atexit.register(self._at_exit)
                self._watch_exceptions()
                self._atexit = True
            if heartbeat_s is not None and heartbeat_s > 0:
                self._beat_s = (
                    heartbeat_s if self._beat_s is None else min(self._beat_s, heartbeat_s)
                )
                self._start_heartbeat()
        self._install_signals()

    def leave(self, participant: Participant) -> None:
        """Stop looking after ``participant``; the last one out restores the signal handlers."""
        with self._lock:
            with contextlib.suppress(ValueError):
                self._participants.remove(participant)
            empty = not self._participants
            if empty:
                self._beat_stop.set()
                self._beat_s = None
        if empty:
            self._restore_signals()

    @property
    def participants(self) -> list[Participant]:
        with self._lock:
            return list(self._participants)

    # writes ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Mark a write under way on this thread: SIGTERM/SIGINT wait until it returns."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        self._writing += 1
        try:
            yield
        finally:
            self._writing -= 1
            pending = self._pending
            if not self._writing and pending is not None:
                self._pending = None
                self._on_signal(*pending)

    # signals ----------------------------------------------------------------------------------
    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in _SIGNALS:
            if signum in self._previous:
                continue
            try:
                self._previous[signum] = signal.signal(signum, self._on_signal)
            except (ValueError, OSError):  # not allowed here (an embedded interpreter ...)
                return

    def _restore_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # ours stay; with no participant they only pass the signal on
        for signum, previous in list(self._previous.items()):
            with contextlib.suppress(ValueError, OSError, TypeError):
                if signal.getsignal(signum) == self._on_signal:
                    signal.signal(signum, previous)
            del self._previous[signum]

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._writing:
            self._pending = (signum, frame)  # handled when the write returns
            return
        previous = self._previous.get(signum, signal.SIG_DFL)
        if signum == signal.SIGTERM:
            for participant in reversed(self.participants):
                try:
                    participant.terminate("terminated by SIGTERM")
                except Exception:  # never block the termination
                    log.exception("could not record the termination of %r", participant)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:  # the default action: terminate, as if we had never been here
            self._restore_signals()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    # exit -------------------------------------------------------------------------------------
    def _watch_exceptions(self) -> None:
        """Remember an uncaught exception, so that exit records ``failed``, not ``completed``."""
        self._previous_excepthook = sys.excepthook

        def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
            self._uncaught = value
            self._previous_excepthook(kind, value, tb)

        sys.excepthook = hook

    def _at_exit(self) -> None:
        for participant in reversed(self.participants):
            try:
                participant.at_exit(self._uncaught)
            except Exception:
                log.exception("could not finish %r at exit", participant)

    # heartbeat --------------------------------------------------------------------------------
    def _start_heartbeat(self) -> None:
        if self._beat_thread is not None and self._beat_thread.is_alive():
            return
        self._beat_stop = threading.Event()
        self._beat_thread = threading.Thread(
            target=self._beat, args=(self._beat_stop,), name="warehouse-heartbeat", daemon=True
        )
        self._beat_thread.start()

    def _beat(self, stop: threading.Event) -> None:
        while not stop.wait(self._beat_s or 30.0):
            for participant in self.participants:
                try:
                    participant.heartbeat()
                except Exception:  # the next beat tries again
                    log.debug("heartbeat of %r failed", participant, exc_info=True)

    def after_fork(self) -> None:
        """In a forked child: the parent's runs are not ours to end, its threads are gone."""
        self._participants.clear()
        self._writing = 0
        self._pending = None
        self._beat_thread = None
        self._beat_s = None


def _after_fork_in_child() -> None:
    if (instance := Lifecycle.existing()) is not None:
        instance.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


__all__ = ["Lifecycle", "Participant"]
