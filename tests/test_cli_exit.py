"""The process entry (``warehouse.cli.run``) leaves through ``os._exit`` once a command is
done: what a normal exit does that matters must still happen (issue 15's overhead)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from warehouse.cli import _exit_status


def _python(code: str, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, WAREHOUSE_HOME=str(home), WAREHOUSE_CONSOLE="0")
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_atexit_handlers_and_running_threads_finish_before_the_process_leaves(
    tmp_path: Path,
) -> None:
    code = f"""
import atexit, sys, threading, time
from pathlib import Path
from warehouse.cli import run
atexit.register(lambda: Path({str(tmp_path / "atexit")!r}).write_text("ran"))
def late():
    time.sleep(0.3)
    Path({str(tmp_path / "thread")!r}).write_text("ran")
threading.Thread(target=late).start()
sys.argv = ["warehouse", "--help"]
run()
"""
    proc = _python(code, tmp_path / "wh")
    assert proc.returncode == 0, proc.stderr
    assert "Usage: warehouse" in proc.stdout
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "ran"


def test_exit_codes_and_the_whole_output_survive_the_fast_exit(tmp_path: Path) -> None:
    home = tmp_path / "wh"
    entry = "import sys; from warehouse.cli import run; sys.argv[0] = 'warehouse'; run()"
    for code in (0, 3):
        watched = _python(entry, home, "watch", "--", sys.executable, "-c", f"exit({code})")
        assert watched.returncode == code, watched.stderr
    missing = _python(entry, home, "query", "show", "no-such-run")
    assert missing.returncode == 4
    assert "no run with id 'no-such-run'" in missing.stderr
    listed = _python(entry, home, "query", "runs", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert sorted(r["status"] for r in runs) == ["completed", "failed"]


def test_a_message_given_to_sys_exit_is_printed_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _exit_status(None) == 0
    assert _exit_status(5) == 5
    assert capsys.readouterr().err == ""
    assert _exit_status("stopped: bad input") == 1
    assert capsys.readouterr().err == "stopped: bad input\n"
