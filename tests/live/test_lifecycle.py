"""A run's life has one owner: signals wait for writes, exit ends open runs, runs beat."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from warehouse.home import GITIGNORE
from warehouse.live.lifecycle import Lifecycle


def stored(home: Path, run_id: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((home / "runs" / f"{run_id}.json").read_text())
    return data


def run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )


def test_ctrl_c_inside_end_waits_until_the_run_is_written(tmp_path: Path, home: Path) -> None:
    """12 of 12 Ctrl-C arriving inside end() left a finished run 'running' (issue 14.7)."""
    proc = run_script(
        tmp_path,
        """
        import os, signal, warehouse
        from warehouse.replication import ReplicatingStore

        real = ReplicatingStore.write_runs
        def write_runs(self, docs):
            if docs[0]["status"] != "running":  # the final save: Ctrl-C lands in the middle
                os.kill(os.getpid(), signal.SIGINT)
            real(self, docs)
        ReplicatingStore.write_runs = write_runs

        run = warehouse.start_run(experiment="ctrl-c")
        run.log_metrics("val", {"acc": 0.5})
        print(run.run_id, flush=True)
        try:
            run.end()
        except KeyboardInterrupt:
            print("interrupted after the write", flush=True)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    run_id, said = proc.stdout.split()[0], proc.stdout.splitlines()[1]
    assert said == "interrupted after the write"  # the Ctrl-C was not lost, only deferred
    doc = stored(home, run_id)
    assert doc["status"] == "completed"
    assert doc["ended_at"] is not None


def test_sigterm_inside_a_save_is_handled_after_it(tmp_path: Path, home: Path) -> None:
    proc = run_script(
        tmp_path,
        """
        import os, signal, warehouse
        from warehouse.replication import ReplicatingStore

        run = warehouse.start_run(experiment="term")
        real = ReplicatingStore.write_runs
        def write_runs(self, docs):
            if docs[0]["metrics"]:  # the save after log_metrics: SIGTERM lands in the middle
                os.kill(os.getpid(), signal.SIGTERM)
            real(self, docs)
        ReplicatingStore.write_runs = write_runs
        print(run.run_id, flush=True)
        run.log_metrics("val", {"acc": 0.5})
        run.save()
        import time; time.sleep(30)
        """,
    )
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    doc = stored(home, proc.stdout.split()[0])
    assert doc["status"] == "interrupted"
    assert doc["metrics"] == {"val": {"acc": 0.5}}


@pytest.mark.parametrize(
    ("ending", "status"),
    [
        pytest.param("pass", "completed", id="normal-exit"),
        pytest.param("raise ValueError('boom')", "failed", id="uncaught-exception"),
    ],
)
def test_a_run_left_open_is_ended_at_exit(
    tmp_path: Path, home: Path, ending: str, status: str
) -> None:
    proc = run_script(
        tmp_path,
        f"""
        import warehouse
        run = warehouse.start_run(experiment="open")
        run.log_metrics("val", {{"acc": 0.5}})
        print(run.run_id, flush=True)
        {ending}
        """,
    )
    doc = stored(home, proc.stdout.split()[0])
    assert doc["status"] == status
    if status == "failed":
        assert doc["error"]["type"] == "ValueError"  # type: ignore[index]


def test_a_running_run_beats_its_heartbeat(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import warehouse

    monkeypatch.setenv("WAREHOUSE_HEARTBEAT_S", "0.05")
    beats = threading.Semaphore(0)
    run = warehouse.start_run(experiment="beating")
    real = run.heartbeat

    def counted() -> None:
        real()
        beats.release()

    monkeypatch.setattr(run, "heartbeat", counted)
    first = stored(home, run.run_id)["heartbeat_at"]
    assert beats.acquire(timeout=60)  # a first beat ...
    assert beats.acquire(timeout=60)  # ... and a second
    assert stored(home, run.run_id)["heartbeat_at"] != first
    run.end()
    assert run not in Lifecycle.current().participants  # an ended run beats no more


def test_the_warehouse_folder_ignores_itself_in_git(home: Path) -> None:
    import warehouse

    assert not home.exists()
    with warehouse.start_run(experiment="first") as run:
        run.log_metrics("val", {"acc": 0.5})
    assert (home / ".gitignore").read_text() == GITIGNORE
