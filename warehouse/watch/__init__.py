"""``warehouse watch -- COMMAND ...``: record a run from a program's output alone.

The command runs as a child process. Its stdout and stderr are read as raw bytes (``os.read``
on the pipes, one thread each) and written to ours at once, byte for byte — ``\\r`` progress
bars included. A parser thread reads each stream on its own
(:class:`warehouse.watch.parsers.OutputReader`); the points it finds are logged as steps
through the run's step logger, which also samples the machine. The run is recorded through
the recorder: config ``{"command": recorded_command(argv), "cwd": ...}``, git of the cwd,
final metrics = the last value seen of each metric (``val_*``/``eval_*`` → split ``val``,
``test_*`` → ``test``, others → ``train``), status
``completed`` on exit 0, ``failed`` otherwise, ``interrupted`` when it ended after a signal we
forwarded. We exit with the child's code (killed by signal N → 128 + N).

The child starts first and the run is opened while it runs, so recording adds next to
nothing to its wall time. Where our own stdout or stderr is a terminal, the child's goes to
a pseudo-terminal of the same size (:mod:`warehouse.watch.terminal`), so that it draws the
progress bars it would draw without us; with both redirected it gets pipes and keeps
Python's default block buffering, exactly as when run directly. SIGTERM (and SIGINT, unless we share
the terminal's foreground process group, where the terminal already sent it to the child)
is forwarded to the child. A failing warehouse never fails the command (unless ``strict``).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from warehouse.watch.parsers import FORMATS, OutputReader, Point, split_metrics

if TYPE_CHECKING:
    from warehouse.capture.redact import RedactPolicy
    from warehouse.recording.run import ActiveRun
    from warehouse.settings import Settings

log = logging.getLogger(__name__)

READ_SIZE = 1 << 16
DRAIN_TIMEOUT_S = 2.0
QUEUE_CHUNKS = 256  # read chunks waiting for the parser (16 MiB at most)
PIPE_BYTES = 1 << 20  # a roomy pipe: the child rarely waits for us
NICE = 10
UNSURE_NOTE = (
    "{steps} step(s) drawn only once by Lightning's Rich progress bar were not recorded: in a "
    "terminal it may draw a step's counter before that step's values. For every step, add "
    "warehouse's Lightning logger (README: PyTorch Lightning), or run with the default "
    "TQDMProgressBar"
)
SWITCH_INTERVAL_S = 0.0005  # hand the GIL back to the pass-through threads quickly

Step = Point


class CommandFailed(Exception):
    """The watched command exited with a non-zero status or was killed (the run's error)."""


class RecordingFailed(Exception):
    """Reading or recording the command's output failed (kept as the run's error)."""


# ---------------------------------------------------------------------------------------------
# the watcher
# ---------------------------------------------------------------------------------------------
def _write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:  # our stdout/stderr went away (closed pipe): keep draining the child
            return False
        view = view[written:]
    return True


class Watcher:
    """Runs one command, passes its output through, and feeds the steps it prints to a run."""

    def __init__(self, argv: Sequence[str], *, cwd: Path | None = None) -> None:
        self.argv = list(argv)
        self.cwd = cwd or Path.cwd()
        self.readers = [OutputReader(), OutputReader()]  # stdout, stderr: each read on its own
        self.steps_seen = 0
        self._lock = threading.Lock()
        self._log_step: Callable[[Step], None] | None = None
        self._early: list[Step] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._readers: list[threading.Thread] = []
        self._parser: threading.Thread | None = None
        self._chunks: queue.Queue[tuple[int, bytes | None]] = queue.Queue(maxsize=QUEUE_CHUNKS)
        self.forwarded: int | None = None
        self._terminal: tuple[int, int, int] | None = None  # master, slave, the size's source
        self.failure: BaseException | None = None  # the first failure reading or recording
        self.failures = 0

    # ---- the child ---------------------------------------------------------------------------
    def start(self, out_fd: int = 1, err_fd: int = 2) -> None:
        """Start the command with its output on pipes (on a pseudo-terminal where ours is a
        terminal: :mod:`warehouse.watch.terminal`), the pass-through readers and the parser."""
        env = dict(os.environ)
        out_tty, err_tty = _isatty(out_fd), _isatty(err_fd)
        if out_tty or err_tty:
            env.setdefault("PYTHONUNBUFFERED", "1")
            self._open_terminal(out_fd if out_tty else err_fd)
        slave = self._terminal[1] if self._terminal else None
        try:
            self._proc = subprocess.Popen(
                self.argv,
                stdout=slave if out_tty and slave is not None else subprocess.PIPE,
                stderr=slave if err_tty and slave is not None else subprocess.PIPE,
                env=env,
                cwd=self.cwd,
                bufsize=0,
            )
        finally:
            if slave is not None:
                os.close(slave)  # the child holds it now: its exit ends our reads (EIO)
        sources: list[tuple[int, int, str]] = []
        for pipe, fd, name in (
            (self._proc.stdout, out_fd, "stdout"),
            (self._proc.stderr, err_fd, "stderr"),
        ):
            if pipe is not None:
                _grow_pipe(pipe.fileno())
                sources.append((pipe.fileno(), fd, name))
        if self._terminal:  # stdout and stderr both on it when both of ours are terminals
            sources.insert(
                0 if out_tty else 1, (self._terminal[0], out_fd if out_tty else err_fd, "terminal")
            )
        self._parser = threading.Thread(
            target=self._parse_loop, args=(len(sources),), name="warehouse-watch-parse", daemon=True
        )
        self._parser.start()
        for index, (src, fd, name) in enumerate(sources):
            thread = threading.Thread(
                target=self._pump,
                args=(src, fd, index),
                name=f"warehouse-watch-{name}",
                daemon=True,
            )
            thread.start()
            self._readers.append(thread)

    def _open_terminal(self, like_fd: int) -> None:
        from warehouse.watch.terminal import open_terminal

        try:
            master, slave = open_terminal(like_fd)
        except OSError as exc:  # no pseudo-terminals left: pipes, as when not on a terminal
            log.debug("warehouse watch: no pseudo-terminal for the command (%s)", exc)
            return
        self._terminal = (master, slave, like_fd)

    def resize(self) -> None:
        """Our terminal changed size (SIGWINCH): so does the command's."""
        if self._terminal:
            from warehouse.watch.terminal import copy_size

            copy_size(self._terminal[2], self._terminal[0])

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def _pump(self, src: int, dst: int, index: int) -> None:
        """Copy the child's bytes to ours at once; hand them to the parser afterwards."""
        passing = True
        chunks = self._chunks
        while True:
            try:
                data = os.read(src, READ_SIZE)
            except InterruptedError:
                continue
            except OSError:
                break
            if not data:
                break
            if passing:
                passing = _write_all(dst, data)
            chunks.put((index, data))  # blocks only when the parser is far behind
        chunks.put((index, None))

    def _parse_loop(self, streams: int) -> None:
        open_streams = streams
        while open_streams:
            index, data = self._chunks.get()
            try:
                with self._lock:
                    reader = self.readers[index]
                    if data is None:
                        open_streams -= 1
                        points = reader.close()
                    else:
                        points = reader.feed(data)
                    for point in points:
                        self._emit(point)
            except Exception as exc:  # a parser bug must not stop the pass-through or the run
                self.failed("reading the command's output", exc)

    def final_metrics(self) -> dict[str, dict[str, float]]:
        """The last value of every metric seen, by split (``val_*`` → val, ``test_*`` → test)."""
        latest: dict[str, float] = {}
        for reader in self.readers:
            latest.update(reader.assembler.latest)
        return split_metrics(latest)

    @property
    def unsure_steps(self) -> int:
        """Steps whose values were drawn once by a bar that may draw a step's counter before
        its values (Lightning's Rich bar in a terminal): left out rather than guessed."""
        return sum(reader.assembler.unsure_steps for reader in self.readers)

    def _emit(self, step: Step) -> None:  # under self._lock
        self.steps_seen += 1
        if self._log_step is None:
            self._early.append(step)
        else:
            self._record(self._log_step, step)

    def _record(self, log_step: Callable[[Step], None], step: Step) -> None:
        try:
            log_step(step)
        except Exception as exc:  # the command goes on, its exit code unchanged
            self.failed("recording a step", exc)

    def failed(self, doing: str, exc: BaseException) -> None:
        """A failure of ours while the command runs: one line on stderr (the first time, no
        traceback), kept for the run's record; the command and its output go on."""
        self.failures += 1
        if self.failure is not None:
            return
        self.failure = exc
        message = " ".join(str(exc).split())[:300]
        log.warning(
            "warehouse watch: %s failed (%s: %s); the command goes on, the run keeps the error",
            doing,
            type(exc).__name__,
            message,
        )

    def attach(self, log_step: Callable[[Step], None]) -> None:
        """Send steps to ``log_step`` from now on (steps seen before are sent first)."""
        with self._lock:
            for step in self._early:
                self._record(log_step, step)
            self._early.clear()
            self._log_step = log_step

    def wait(self) -> int:
        """Wait for the child and its output; its exit status (``-N`` when killed by signal N)."""
        assert self._proc is not None
        # blocking: returns the moment the child exits (a timeout would poll, up to 50 ms
        # late); our signal handlers still run while it waits (PEP 475). A step's point is
        # sent when the next step begins or the output ends, never on a pause: what a point
        # holds must not depend on timing (a validation pause between a step's lines).
        code = self._proc.wait()
        # a grandchild may keep the pipes open after the child exits: don't wait for it
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        for thread in self._readers:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self._parser is not None and not any(t.is_alive() for t in self._readers):
            self._parser.join()  # every byte read is parsed (a backlog of seconds at most)
        with self._lock:
            for reader in self.readers:
                for point in reader.assembler.flush():
                    self._emit(point)
        if self._terminal and not any(t.is_alive() for t in self._readers):
            os.close(self._terminal[0])
            self._terminal = None
        return code

    def forward(self, signum: int) -> None:
        """Send ``signum`` to the child (if it still runs)."""
        if self._proc is not None and self._proc.poll() is None:
            self.forwarded = signum
            with contextlib.suppress(ProcessLookupError):
                self._proc.send_signal(signum)


def _grow_pipe(fd: int) -> None:
    """Ask Linux for a bigger pipe buffer (elsewhere, or when refused, keep the default)."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setsize is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setsize, PIPE_BYTES)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _in_terminal_foreground() -> bool:
    """True when a Ctrl-C typed in our terminal reaches the child by itself."""
    for fd in (0, 1, 2):
        try:
            return os.tcgetpgrp(fd) == os.getpgrp()
        except OSError:
            continue
    return False


def exit_code(status: int) -> int:
    """A shell's exit code for a child status: N, or 128 + N when killed by signal N."""
    return 128 - status if status < 0 else status


def describe(status: int) -> str:
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        return f"the command was killed by {name} (exit {exit_code(status)})"
    return f"the command exited with status {status}"


def recorded_command(argv: Sequence[str], redaction: RedactPolicy | None = None) -> list[str]:
    """The command as the run records it: values of secret-looking flags (``--password X``,
    ``--api-key=Y``, ``db.password=Z``) and secret-looking values hidden
    (:func:`warehouse.capture.redact.redact_command`)."""
    from warehouse.capture.redact import RedactPolicy, redact_command

    return redact_command(argv, redaction or RedactPolicy.from_environment())


def default_experiment(argv: Sequence[str]) -> str:
    """An experiment name from the command: the script's stem (``train.py`` → ``train``)."""
    for arg in argv[1:]:
        if arg.endswith(".py"):
            return Path(arg).stem
    if len(argv) >= 3 and argv[1] == "-m":
        return argv[2].rsplit(".", 1)[-1]
    return Path(argv[0]).name if argv else "watch"


# ---------------------------------------------------------------------------------------------
# the command
# ---------------------------------------------------------------------------------------------
def watch(
    argv: Sequence[str],
    *,
    experiment: str | None = None,
    total_steps: int | None = None,
    primary_metric: str | None = None,
    console: bool = False,
    settings: Settings | None = None,
    out_fd: int = 1,
    err_fd: int = 2,
    tune_process: bool = False,
) -> int:
    """Run ``argv``, record it as a run, return the exit code to leave with.

    ``tune_process`` (the CLI sets it: the process does nothing else) lowers this process's
    CPU priority once the command runs, so the command keeps the CPU first, and shortens the
    GIL switch interval, so the pass-through threads are never kept waiting by the parser.
    """
    if not argv:
        from warehouse.errors import ConfigurationError

        raise ConfigurationError(
            "warehouse watch needs a command to run, e.g. warehouse watch -- python train.py"
        )
    cwd = Path.cwd()
    if tune_process:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
    watcher = Watcher(argv, cwd=cwd)
    watcher.start(out_fd, err_fd)  # FileNotFoundError / PermissionError: the caller reports
    if tune_process:
        with contextlib.suppress(OSError):
            os.nice(NICE)  # after the start: the command keeps its own priority
    restore = _forward_signals(watcher)
    run: ActiveRun | None = None
    try:
        run = _open_run(
            watcher, argv, cwd, experiment, total_steps, primary_metric, console, settings
        )
        if run is not None:
            active = run

            def log_step(step: Step) -> None:
                active.log_step_metrics(step[0], step[1], step[2])  # any name: "epoch" too

            watcher.attach(log_step)
        status = watcher.wait()
    finally:
        restore()
    if run is not None:
        _close_run(run, watcher, status, primary_metric, settings)
    return exit_code(status)


def _open_run(
    watcher: Watcher,
    argv: Sequence[str],
    cwd: Path,
    experiment: str | None,
    total_steps: int | None,
    primary_metric: str | None,
    console: bool,
    settings: Settings | None,
) -> ActiveRun | None:
    from warehouse.live.steps import StepOptions
    from warehouse.recording.recorder import start_run
    from warehouse.settings import load

    strict = False
    try:
        if settings is None:
            settings = load(cli={"console": console})
        elif console != settings.console:
            settings = settings.model_copy(update={"console": console})
        strict = settings.strict
        name = experiment or settings.experiment or default_experiment(argv)
        return start_run(
            experiment=name,
            config={"command": recorded_command(argv, settings.redaction), "cwd": str(cwd)},
            settings=settings,
            cwd=cwd,
            steps=StepOptions(total_steps=total_steps),
            primary_metric=primary_metric,
        )
    except Exception as exc:
        if strict:
            watcher.forward(signal.SIGTERM)
            raise
        log.warning(
            "warehouse watch: cannot record this run (%s: %s); the command runs unrecorded",
            type(exc).__name__,
            str(exc) if settings is None else settings.redaction.text(str(exc)),
        )
        return None


def _close_run(
    run: ActiveRun,
    watcher: Watcher,
    status: int,
    primary_metric: str | None,
    settings: Settings | None,
) -> None:
    from warehouse.models import PrimaryMetric, RunStatus

    try:
        final = watcher.final_metrics()
        if not final and watcher.steps_seen == 0:
            log.warning("warehouse watch: no metrics found in the output; it reads %s", FORMATS)
        for split, metrics in final.items():
            run.log_metrics(split, metrics)
        unsure = watcher.unsure_steps
        if unsure:
            run.note(UNSURE_NOTE.format(steps=unsure))
            log.warning("warehouse watch: %s", UNSURE_NOTE.format(steps=unsure))
        if primary_metric is None:
            _pick_primary_alias(run, PrimaryMetric)
        error: BaseException | None = None if status == 0 else CommandFailed(describe(status))
        if watcher.failure is not None:
            error = _with_failure(error, watcher)
        if status == 0:
            run.end(RunStatus.COMPLETED, error)
        elif watcher.forwarded is not None:
            run.end(RunStatus.INTERRUPTED, error)
        else:
            run.end(RunStatus.FAILED, error)
    except Exception as exc:
        if settings is not None and settings.strict:
            raise
        log.warning(
            "warehouse watch: recording the end of run %s failed (%s: %s)",
            run.run_id,
            type(exc).__name__,
            run.settings.redaction.text(str(exc)),
        )


def _with_failure(error: BaseException | None, watcher: Watcher) -> BaseException:
    """The run's error when reading or recording the output failed: that failure (its
    traceback kept on the run), after the command's own failure if it failed."""
    failure = watcher.failure
    assert failure is not None
    what = f"{type(failure).__name__}: {failure}"
    times = f" ({watcher.failures} times)" if watcher.failures > 1 else ""
    text = f"warehouse watch failed reading or recording the output{times}: {what}"
    out = RecordingFailed(text) if error is None else CommandFailed(f"{error}; {text}")
    out.__cause__ = failure
    return out


def _pick_primary_alias(run: ActiveRun, model: Any) -> None:
    """Keras 3 says ``accuracy`` where the default primary metric says ``acc`` (and back)."""
    pm = run.record.primary_metric
    if pm is None or pm.metric in run.record.metrics.get(pm.split, {}):
        return
    aliases = {"acc": "accuracy", "accuracy": "acc"}
    other = aliases.get(pm.metric)
    if other and other in run.record.metrics.get(pm.split, {}):
        run.record.primary_metric = model(
            name=f"{pm.split}.{other}", split=pm.split, metric=other, direction=pm.direction
        )


def _forward_signals(watcher: Watcher) -> Callable[[], None]:
    """Install SIGTERM/SIGINT/SIGHUP forwarding and SIGWINCH resizing (main thread only);
    return the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and _in_terminal_foreground():
            return  # the terminal sent it to the child too; sending it twice breaks cleanups
        watcher.forward(signum)

    def resized(signum: int, frame: FrameType | None) -> None:
        watcher.resize()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):
            previous[sig] = signal.signal(sig, handler)
    with contextlib.suppress(ValueError, OSError):
        previous[signal.SIGWINCH] = signal.signal(signal.SIGWINCH, resized)

    def restore() -> None:
        for sig, prev in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, prev)

    return restore


__all__ = [
    "CommandFailed",
    "RecordingFailed",
    "Watcher",
    "default_experiment",
    "exit_code",
    "recorded_command",
    "watch",
]
