"""`warehouse demo`: the digits sweep end to end, and how it fails."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

from tests.helpers import HANG_S
from warehouse.cli.demo import find_example, sweep_command
from warehouse.errors import NotFound
from warehouse.stores.base import RunQuery, SampleQuery
from warehouse.stores.local import LocalStore

REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def warehouse_demo(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warehouse", "demo", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=HANG_S,
        check=False,
    )


def stored_runs(home: Path) -> list[dict[str, Any]]:
    with LocalStore(home) as store:
        return store.search_runs(RunQuery(limit=None))


@pytest.fixture
def spaced_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A warehouse folder whose path has a space (Hydra overrides must quote it)."""
    home = tmp_path / "my warehouse"
    monkeypatch.setenv("WAREHOUSE_HOME", str(home))
    return home


@pytest.mark.slow
def test_demo_records_a_sweep_of_15_runs_in_5_experiments(spaced_home: Path) -> None:
    proc = warehouse_demo()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    docs = stored_runs(spaced_home)
    assert len(docs) == 15
    assert {d["status"] for d in docs} == {"completed"}
    assert Counter(d["experiment"] for d in docs) == {
        f"digits-{f}": 3 for f in ("logreg", "svm", "knn", "random_forest", "mlp")
    }
    # each experiment is 3 seed replicates of one configuration: same config but the seed
    for experiment in {d["experiment"] for d in docs}:
        replicates = [d for d in docs if d["experiment"] == experiment]
        assert sorted(d["config"]["seed"] for d in replicates) == [0, 1, 2]
        assert len({d["config_hash_noseed"] for d in replicates}) == 1
        assert {d["config"]["data"]["train_fraction"] for d in replicates} == {0.5}
    assert len({d["hydra"]["sweep_id"] for d in docs}) == 1
    for doc in docs:
        assert "demo" in doc["tags"]
        assert doc["config"]["model"]["name"] == doc["params"]["model.name"]
        assert doc["git"]["commit"]
        assert {s: set(m) for s, m in doc["metrics"].items()} == {
            s: {"acc", "log_loss"} for s in ("train", "val", "test")
        }
        assert doc["sample_counts"] == {"val": 359, "test": 360}
        # Hydra's folders went to the warehouse's scratch space, not into the repository
        assert Path(doc["hydra"]["sweep_dir"]).is_relative_to(spaced_home / "tmp")

    worst = min(docs, key=lambda d: d["metrics"]["val"]["acc"])
    with LocalStore(spaced_home) as store:
        rows = list(
            store.search_samples(SampleQuery(run_id=worst["run_id"], split="val", limit=None))
        )
    uris = [r["output_uri"] for r in rows if not r["correct"]]
    assert uris
    assert all(uris)
    for uri in uris:
        assert Path(unquote(urlparse(uri).path)).read_bytes().startswith(PNG_MAGIC)

    # it says where the data went and what to run next; the sweep's own chatter stays hidden
    assert str(spaced_home) in proc.stdout
    assert "Recorded 15 runs in 5 experiments" in proc.stdout
    assert "warehouse query leaderboard" in proc.stdout
    assert "warehouse query samples --best --split val --sort confidence --asc --limit 20" in (
        proc.stdout
    )
    assert "warehouse report" in proc.stdout
    assert "Launching 15 jobs" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_demo_goes_on_when_elasticsearch_and_s3_are_down_and_the_records_wait(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.servers import free_port

    # nothing listens on these ports: both servers are down for the whole sweep
    monkeypatch.setenv("WAREHOUSE_ES_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("WAREHOUSE_S3_URL", "s3://demo-bucket/runs")
    monkeypatch.setenv("WAREHOUSE_S3_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("WAREHOUSE_S3_ACCESS_KEY_ID", "demo-key")
    monkeypatch.setenv("WAREHOUSE_S3_SECRET_ACCESS_KEY", "demo-secret")
    monkeypatch.setenv("WAREHOUSE_STRICT", "1")  # the demo is non-strict whatever this says
    proc = warehouse_demo()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    docs = stored_runs(home)
    assert len(docs) == 15
    assert {d["status"] for d in docs} == {"completed"}
    for doc in docs:
        assert set(doc["metrics"]) == {"train", "val", "test"}
        assert doc["sample_counts"] == {"val": 359, "test": 360}
    # the records wait in the outbox: runs and samples for Elasticsearch, images for S3
    from warehouse.objects.local import RECORD
    from warehouse.replication.outbox import Outbox

    kinds = Counter(e.kind for e in Outbox(home / "outbox").pending())
    assert kinds["run"] >= 15
    assert kinds["samples"] == 30
    # outputs.save=all: every validation image (and a git diff when the tree is dirty)
    assert kinds["object"] >= 15 * 359
    stored = [p for p in (home / "objects").rglob("*") if p.is_file() and p.name != RECORD]
    assert kinds["object"] == len(stored)  # each folder's .sha256 record is not an object
    assert "wait in the outbox" in proc.stdout
    assert "warehouse sync" in proc.stdout
    assert "Recorded 15 runs in 5 experiments" in proc.stdout
    assert "not completed" not in proc.stdout


@pytest.mark.slow
def test_demo_fails_loudly_with_the_sweep_output_when_no_run_can_be_recorded(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAREHOUSE_PRIMARY_METRIC", "accuracy")  # no split: every run is refused
    proc = warehouse_demo()
    assert proc.returncode != 0
    assert "the demo sweep failed" in proc.stderr
    assert "warehouse demo --verbose" in proc.stderr
    assert "accuracy" in proc.stderr  # the cause, from the sweep's own output
    assert "Recorded" not in proc.stdout


def test_demo_without_the_repository_checkout_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match=r"pip install -e '\.\[examples\]'") as info:
        find_example(tmp_path)
    assert str(tmp_path / "examples" / "digits" / "train.py") in str(info.value)


def test_demo_finds_the_example_in_this_checkout() -> None:
    assert find_example() == REPO / "examples" / "digits" / "train.py"


def test_the_sweep_is_non_strict_tagged_and_quotes_an_awkward_sweep_dir(tmp_path: Path) -> None:
    command = sweep_command(Path("train.py"), Path("/tmp/my warehouse/it's"))
    assert command[:3] == [sys.executable, "train.py", "-m"]
    assert "hydra.callbacks.warehouse.strict=false" in command
    assert "seed=0,1,2" in command
    assert "++hydra.callbacks.warehouse.tags=[demo]" in command
    assert r"hydra.sweep.dir='/tmp/my warehouse/it\'s'" in command
    assert sweep_command(Path("t.py"), Path("/plain/dir"))[-3] == "hydra.sweep.dir=/plain/dir"


def test_demo_help_names_the_verbose_flag() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "warehouse", "demo", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
        check=False,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--verbose" in proc.stdout
    assert "warehouse demo" in proc.stdout
