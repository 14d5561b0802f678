"""Issue 14 item 15: while the disk is full, every query and `status` still answers — reading
never needs to write (before, a reader rebuilt and wrote the run catalog, and failed).

The warehouse is put on a real full disk (a tiny tmpfs filled up) where the test may mount
one (root); otherwise its folder is made read-only (for root, whom permissions do not bind,
the commands also run with a file size limit of 0: no file can grow)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != "filler"
    }


@contextlib.contextmanager
def _full_disk(source: Path) -> Iterator[tuple[Path, Callable[[], None] | None]]:
    """``source`` copied onto a disk with no room left (or a read-only copy); yields the
    copy and the function the commands must run under (None: as this user)."""
    base = Path(tempfile.mkdtemp(prefix="wh-full-"))
    base.chmod(0o755)
    mounted = False
    if os.geteuid() == 0:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(base)],
            capture_output=True,
            check=False,
        )
        mounted = done.returncode == 0
    target = base / "home"
    try:
        shutil.copytree(source, target)
        demote: Callable[[], None] | None = None
        if mounted:  # fill the disk: every write from now on fails with ENOSPC
            with contextlib.suppress(OSError), open(base / "filler", "wb", buffering=0) as filler:
                while True:
                    filler.write(b"\0" * 65536)
        else:
            for path in [target, *target.rglob("*")]:
                path.chmod(0o555 if path.is_dir() else 0o444)
            if os.geteuid() == 0:  # permissions do not bind root: no file may grow either

                def demote() -> None:
                    import resource
                    import signal

                    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
                    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))

        yield target, demote
    finally:
        if mounted:
            subprocess.run(["umount", str(base)], check=False)
        for path in [base, *base.rglob("*")]:
            with contextlib.suppress(OSError):
                path.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def _build(home: Path) -> tuple[str, int]:
    import warehouse
    from warehouse.settings import load

    settings = load(cli={"home": str(home), "system_interval_s": 0})
    run_id = ""
    for n in range(4):
        with warehouse.start_run("full", {"lr": n}, settings=settings) as run:
            run.log_metrics("val", {"acc": n / 10})
            run.log_samples("val", [{"sample_id": str(i), "loss": i / 3} for i in range(25)])
            for step in range(3):
                run.log_step(step, loss=1.0 / (step + 1))
            run_id = run.run_id
    shutil.rmtree(home / "catalog")  # a reader must now build the catalog: in memory only
    return run_id, 4


def test_every_query_and_status_answer_on_a_full_disk(tmp_path: Path) -> None:
    source = tmp_path / "warehouse"
    run_id, runs = _build(source)
    with _full_disk(source) as (home, demote):
        before = _snapshot(home)
        env = {
            "PATH": os.environ["PATH"],
            "PYTHONPATH": str(REPO),
            "HOME": str(home.parent),
            "WAREHOUSE_HOME": str(home),
            "WAREHOUSE_CONSOLE": "0",
            "NO_COLOR": "1",
        }

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "warehouse", *args],
                cwd=str(home.parent),
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                preexec_fn=demote,
                check=False,
            )

        status = cli("status", "-f", "json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)[0]["runs"] == runs
        listed = cli("query", "runs", "-f", "json")
        assert listed.returncode == 0, listed.stderr
        assert len(json.loads(listed.stdout)) == runs
        best = cli("query", "best", "--metric", "val.acc", "-f", "json")
        assert best.returncode == 0, best.stderr
        assert json.loads(best.stdout)[0]["run_id"] == run_id  # lr=3: the best acc
        samples = cli("query", "samples", "--run", run_id, "--split", "val", "-f", "json")
        assert samples.returncode == 0, samples.stderr
        assert len(json.loads(samples.stdout)) == 25
        steps = cli("query", "steps", run_id, "-f", "json")
        assert steps.returncode == 0, steps.stderr
        assert [s["step"] for s in json.loads(steps.stdout) if "step" in s][:3] == [0, 1, 2]
        for answer in (status, listed, best, samples, steps):
            assert "Traceback" not in answer.stderr
        assert _snapshot(home) == before  # nothing was written
