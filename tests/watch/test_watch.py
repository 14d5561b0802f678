"""`warehouse watch -- COMMAND`: pass-through, parsing, recording, exit codes, signals."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import HANG_S
from warehouse.live.step_docs import is_tick
from warehouse.stores.base import RunQuery, StepRange
from warehouse.stores.local import LocalStore
from warehouse.watch import default_experiment, exit_code, recorded_command

FIXTURES = Path(__file__).parent / "fixtures"


def watch(
    tmp_path: Path, child: str, *args: str, watch_args: tuple[str, ...] = (), **kw: Any
) -> subprocess.CompletedProcess[bytes]:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(child))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "warehouse",
            "watch",
            *watch_args,
            "--",
            sys.executable,
            str(script),
            *args,
        ],
        capture_output=True,
        cwd=tmp_path,
        timeout=HANG_S,
        **kw,
    )


def the_run(home: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with LocalStore(home) as store:
        [run] = store.search_runs(RunQuery())
        steps = list(store.steps(StepRange(run_id=run["run_id"])))
    return run, steps


REPLAY = """
    import os, sys
    from pathlib import Path
    fixtures = Path(sys.argv[1])
    os.write(1, (fixtures / "keras3_verbose1__pipe.stdout").read_bytes())
    os.write(2, (fixtures / "tqdm_flat__pipe.stderr").read_bytes())
    os.write(1, b"no newline at the end")
    sys.exit(int(sys.argv[2]))
"""


def test_a_failing_child_exits_with_its_code_and_the_run_is_failed(
    tmp_path: Path, home: Path
) -> None:
    out = watch(tmp_path, REPLAY, str(FIXTURES), "3")
    assert out.returncode == 3
    keras = (FIXTURES / "keras3_verbose1__pipe.stdout").read_bytes()
    assert out.stdout == keras + b"no newline at the end"
    assert out.stderr.startswith((FIXTURES / "tqdm_flat__pipe.stderr").read_bytes())
    run, steps = the_run(home)
    assert run["status"] == "failed"
    assert run["error"]["message"] == "the command exited with status 3"
    assert run["experiment"] == "child"
    assert run["config"] == {
        "command": [sys.executable, str(tmp_path / "child.py"), str(FIXTURES), "3"],
        "cwd": str(tmp_path),
    }
    # last values seen: Keras' final epoch (stdout) and tqdm's last postfix (stderr)
    assert run["metrics"]["val"]["accuracy"] == 0.6562
    assert run["metrics"]["train"]["accuracy"] == 0.7188
    assert run["metrics"]["train"]["acc"] == 0.928
    assert run["primary_metric"]["name"] == "val.accuracy"  # acc -> accuracy alias for Keras 3
    assert run["primary_metric"]["value"] == 0.6562
    assert len([s for s in steps if not is_tick(s)]) > 20


def test_a_child_killed_by_sigkill_gives_137_and_a_failed_run(tmp_path: Path, home: Path) -> None:
    out = watch(
        tmp_path,
        """
        import os, signal
        print('{"metric": "loss", "value": 0.5, "step": 1}', flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """,
    )
    assert out.returncode == 137
    run, steps = the_run(home)
    assert run["status"] == "failed"
    assert "SIGKILL" in run["error"]["message"]
    assert run["metrics"] == {"train": {"loss": 0.5}}
    assert [s["step"] for s in steps if not is_tick(s)] == [1]
    assert any(s.get("system", {}).get("ram_total_bytes") for s in steps)  # sampled meanwhile


@pytest.mark.slow
def test_a_child_printing_100k_lines_passes_all_through_and_is_recorded(
    tmp_path: Path, home: Path
) -> None:
    child = """
        import json, sys
        for i in range(100_000):
            if i % 100 == 0:
                print(json.dumps({"metric": "loss", "value": 1 / (i + 1), "step": i}))
            else:
                print(f"line {i}: some log output, progress {i / 1000:.3f}%")
        sys.stderr.write("\\r".join(f"{i}/100 [00:00<00:00, loss={i / 100}]" for i in range(101)))
    """
    out = watch(tmp_path, child)
    assert out.returncode == 0
    lines = out.stdout.decode().splitlines()
    assert len(lines) == 100_000
    expected = subprocess.run(
        [sys.executable, str(tmp_path / "child.py")], capture_output=True, check=True
    )
    assert hashlib.sha256(out.stdout).digest() == hashlib.sha256(expected.stdout).digest()
    assert out.stderr == expected.stderr  # \r-separated updates, unchanged
    run, steps = the_run(home)
    assert run["status"] == "completed"
    json_steps = [
        s for s in steps if "loss" in s["metrics"] and s["step"] % 100 == 0 and s["step"] < 100_000
    ]
    assert len({s["step"] for s in json_steps}) >= 1000


def test_sigterm_is_forwarded_and_the_run_is_interrupted(tmp_path: Path, home: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(
        textwrap.dedent("""
        import signal, sys, time
        def stop(signum, frame):
            print("child got SIGTERM", flush=True)
            sys.exit(143)
        signal.signal(signal.SIGTERM, stop)
        print('{"metric": "loss", "value": 0.25, "step": 7}', flush=True)
        print("ready", flush=True)
        time.sleep(60)
    """)
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "warehouse", "watch", "--", sys.executable, str(script)],
        stdout=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith(b'{"metric"')
    assert proc.stdout.readline() == b"ready\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 143
    assert proc.stdout.read() == b"child got SIGTERM\n"
    run, _ = the_run(home)
    assert run["status"] == "interrupted"
    assert run["metrics"] == {"train": {"loss": 0.25}}


def test_sigint_sent_to_watch_alone_reaches_the_child(tmp_path: Path, home: Path) -> None:
    script = tmp_path / "child.py"
    # Ctrl-C's usual handling, set explicitly: a suite started in the background by a
    # non-interactive shell inherits SIGINT ignored, and so would this child (a loaded run of
    # the suite started with `nohup ... &` failed here, the child sleeping through it)
    script.write_text(
        "import signal, time\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
        'print("ready", flush=True)\ntime.sleep(60)\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "warehouse", "watch", "--", sys.executable, str(script)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130  # the child died of SIGINT (KeyboardInterrupt)
    assert b"KeyboardInterrupt" in err
    run, _ = the_run(home)
    assert run["status"] == "interrupted"


def test_a_command_that_does_not_exist_exits_127(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "warehouse", "watch", "--", "no-such-command-here"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 127
    assert "cannot run 'no-such-command-here'" in out.stderr


def test_options_name_the_experiment_and_the_git_commit_of_the_cwd_is_kept(
    tmp_path: Path, home: Path
) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@e", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "README").write_text("x")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    commit = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    out = watch(
        tmp_path,
        'print("Epoch 1/1")\n'
        'print("5/5 - 0s - 1ms/step - acc: 0.7 - loss: 0.6 - val_acc: 0.65 - val_loss: 0.7")',
        watch_args=("--experiment", "mnist", "--total-steps", "5", "--primary-metric", "val.acc"),
    )
    assert out.returncode == 0, out.stderr
    run, steps = the_run(home)
    assert run["experiment"] == "mnist"
    assert run["git"]["commit"] == commit
    assert run["primary_metric"]["value"] == 0.65
    assert run["status"] == "completed"
    [step] = [s for s in steps if not is_tick(s)]
    assert (step["step"], step["epoch"]) == (5, 1)


# ---- pure parts ---------------------------------------------------------------------------------
def test_exit_codes_follow_the_shell() -> None:
    assert [exit_code(0), exit_code(3), exit_code(-9), exit_code(-15)] == [0, 3, 137, 143]


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["python", "train.py", "--lr", "3"], "train"),
        (["python", "-m", "pkg.trainer"], "trainer"),
        (["./run.sh"], "run.sh"),
    ],
)
def test_the_default_experiment_is_the_script_name(argv: list[str], name: str) -> None:
    assert default_experiment(argv) == name


def test_the_recorded_command_is_the_argv_in_one_place() -> None:
    assert recorded_command(("python", "train.py", "--lr", "3")) == [
        "python",
        "train.py",
        "--lr",
        "3",
    ]


def test_a_run_with_nothing_parseable_says_which_formats_watch_reads(
    tmp_path: Path, home: Path
) -> None:
    out = watch(tmp_path, 'print("hello")\n')
    assert out.returncode == 0
    assert out.stdout == b"hello\n"
    [line] = [text for text in out.stderr.decode().splitlines() if "no metrics" in text]
    assert "JSON metric lines" in line
    assert "transformers" in line
    run, _ = the_run(home)
    assert run["status"] == "completed"


def test_the_watch_command_is_registered_with_its_options() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "warehouse", "watch", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert out.returncode == 0
    for option in ("--experiment", "--total-steps", "--primary-metric", "--console"):
        assert option in out.stdout


def test_on_a_terminal_the_command_gets_a_terminal_of_the_same_size(
    tmp_path: Path, home: Path
) -> None:
    """Run from a terminal, a script draws what it draws on a terminal (tqdm, Rich, Keras
    check): ``watch`` gives it a pseudo-terminal of our size and passes its bytes on as
    written (no ``\\n`` → ``\\r\\n`` on the way)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    script = tmp_path / "child.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, os, sys
            size = os.get_terminal_size(1)
            print(os.isatty(1), os.isatty(2), size.columns, size.lines)
            print(json.dumps({"metric": "loss", "value": 0.25, "step": 3}))
            sys.stderr.write("train: 50%|#####     | loss=0.25\\r")
            """
        )
    )
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 97, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "warehouse", "watch", "--", sys.executable, str(script)],
        stdout=slave,
        stderr=slave,
        cwd=tmp_path,
    )
    os.close(slave)
    out = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        assert ready, "no output from watch within 60 s"
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0
    text = bytes(out).replace(b"\r\n", b"\n").decode()  # our test terminal adds the \r
    assert "True True 97 33\n" in text
    assert "train: 50%|#####     | loss=0.25\r" in text
    run, steps = the_run(home)
    assert run["status"] == "completed"
    assert run["metrics"]["train"]["loss"] == 0.25
    assert any(s.get("step") == 3 for s in steps if not is_tick(s))


def test_a_pause_between_a_steps_lines_does_not_split_or_change_its_point(
    tmp_path: Path, home: Path
) -> None:
    """A validation pause after a step's line was an idle flush: the step was sent without
    the values that followed, and a Rich bar's stale value stayed recorded (issue 30's
    replays under load). What a point holds does not depend on timing."""
    out = watch(
        tmp_path,
        """
        import sys, time
        print("step=20 loss=0.4", flush=True)
        time.sleep(2.5)  # longer than the old idle flush (2 s)
        print("epoch=1 val_loss=0.45", flush=True)
        print("step=40 loss=0.3", flush=True)
        """,
    )
    assert out.returncode == 0, out.stderr
    _, steps = the_run(home)
    points = [(s["step"], s["epoch"], s["metrics"]) for s in steps if not is_tick(s)]
    assert points == [(20, 1, {"loss": 0.4, "val_loss": 0.45}), (40, None, {"loss": 0.3})]
