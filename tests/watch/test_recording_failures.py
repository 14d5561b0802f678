"""`warehouse watch` keeps the command's exit code and prints no traceback, whatever fails in
its own reading or recording; metric names that are also ``log_step``'s arguments are metrics."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.watch.test_watch import the_run, watch
from warehouse.live.step_docs import is_tick

TRAINER = """
    import sys
    print("{'loss': '0.6931', 'grad_norm': '0.25', 'learning_rate': '0.001', 'epoch': '0.5'}")
    print("{'loss': '0.5123', 'grad_norm': '0.21', 'learning_rate': '0.0005', 'epoch': '1'}")
    print("{'eval_loss': '0.49', 'eval_step': '7', 'seq': '3', 'epoch': '1'}")
    sys.exit(int(sys.argv[1]))
"""


def test_metrics_named_epoch_step_and_seq_are_recorded_not_a_crash(
    tmp_path: Path, home: Path
) -> None:
    """transformers' log dicts carry ``epoch``: it was passed to ``log_step`` twice (a
    TypeError: exit 70 and an empty ``completed`` run)."""
    out = watch(tmp_path, TRAINER, "0")
    assert out.returncode == 0, out.stderr
    assert b"Traceback" not in out.stderr
    run, steps = the_run(home)
    assert run["status"] == "completed"
    assert run["error"] is None
    points = {s["step"]: s["metrics"] for s in steps if not is_tick(s)}
    assert points[1] == {"loss": 0.6931, "grad_norm": 0.25, "learning_rate": 0.001, "epoch": 0.5}
    assert points[3] == {"eval_loss": 0.49, "eval_step": 7.0, "seq": 3.0, "epoch": 1.0}
    assert run["metrics"]["train"]["epoch"] == 1.0


def test_log_step_metrics_takes_any_name(tmp_path: Path, home: Path) -> None:
    from warehouse.recording.recorder import start_run

    with start_run(experiment="names", config={}) as run:
        run.log_step_metrics(4, 1, {"epoch": 0.5, "step": 3.0, "self": 1.0, "seq": 2.0})
    from warehouse.stores.base import RunQuery, StepRange
    from warehouse.stores.local import LocalStore

    with LocalStore(home) as store:
        [doc] = store.search_runs(RunQuery())
        [step] = [s for s in store.steps(StepRange(run_id=doc["run_id"])) if not is_tick(s)]
    assert (step["step"], step["epoch"]) == (4, 1)
    assert step["metrics"] == {"epoch": 0.5, "step": 3.0, "self": 1.0, "seq": 2.0}


# A parser or the store failing inside `watch`: injected by patching our own code in a
# driver that then runs the real CLI (the failure is ours; no server is replaced).
DRIVER = """
    import sys
    from warehouse.recording.run import ActiveRun
    from warehouse.watch.parsers import OutputReader

    where = sys.argv[1]
    if where == "parser":
        real = OutputReader.feed
        def feed(self, data):
            if b"boom" in data:
                raise ValueError("a parser bug\\nover two lines")
            return real(self, data)
        OutputReader.feed = feed
    else:
        def log_step_metrics(self, step, epoch, metrics):
            raise OSError("the steps store is gone")
        ActiveRun.log_step_metrics = log_step_metrics
    sys.argv = ["warehouse", "watch", "--", *sys.argv[2:]]
    from warehouse.cli import run
    run()
"""

CHILD = """
    import sys, time
    for step in range(1, 6):
        print(f"step {step} loss={1 / step:.4f}", flush=True)
        time.sleep(0.01)
    print("boom", flush=True)
    print("step 6 loss=0.1000", flush=True)
    sys.exit(int(sys.argv[1]))
"""


def _drive(tmp_path: Path, where: str, code: int) -> tuple[subprocess.CompletedProcess[str], str]:
    """The driver's run (its exit code the command's, no traceback) and watch's one line."""
    (tmp_path / "driver.py").write_text(textwrap.dedent(DRIVER))
    (tmp_path / "child.py").write_text(textwrap.dedent(CHILD))
    out = subprocess.run(
        [
            sys.executable,
            str(tmp_path / "driver.py"),
            where,
            sys.executable,
            str(tmp_path / "child.py"),
            str(code),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == code
    assert "Traceback" not in out.stderr
    lines = [text for text in out.stderr.splitlines() if "warehouse watch" in text]
    assert len(lines) == 1, out.stderr  # once, not once per step
    return out, lines[0]


def test_a_parser_failure_keeps_the_exit_code_prints_one_line_and_the_run_records_it(
    tmp_path: Path, home: Path
) -> None:
    out, line = _drive(tmp_path, "parser", 0)
    assert out.stdout.count("step ") == 6  # the output went on, byte for byte
    assert "reading the command's output failed (ValueError: a parser bug over two lines)" in line
    run, _ = the_run(home)
    assert run["status"] == "completed"
    assert run["error"]["type"] == "RecordingFailed"
    assert "ValueError: a parser bug" in run["error"]["message"]
    assert 'driver.py", line' in run["error"]["traceback"]  # the traceback is kept, not printed


def test_a_recording_failure_keeps_a_failing_commands_code_and_its_error(
    tmp_path: Path, home: Path
) -> None:
    _, line = _drive(tmp_path, "store", 3)
    assert "recording a step failed (OSError: the steps store is gone)" in line
    run, _ = the_run(home)
    assert run["status"] == "failed"
    assert run["error"]["type"] == "CommandFailed"
    assert run["error"]["message"].startswith("the command exited with status 3; ")
    assert "OSError: the steps store is gone" in run["error"]["message"]
    assert run["metrics"]["train"]["loss"] == 0.1  # the final metrics are still recorded
