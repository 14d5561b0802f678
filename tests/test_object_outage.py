"""An object store (S3) that is down never fails a run nor costs it its metrics (issue 14, 8).

Uploads wait in the outbox with their bytes in the local object folder, even in strict mode:
nothing is lost, so there is nothing to fail the training step for.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import warehouse
from tests.servers import free_port
from warehouse.replication.outbox import Outbox
from warehouse.settings import load
from warehouse.stores.base import RunQuery
from warehouse.stores.local import LocalStore


@pytest.fixture
def s3_down(home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """WAREHOUSE_S3_* pointing at a port where nothing listens (the S3 server is stopped)."""
    endpoint = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("WAREHOUSE_S3_URL", "s3://stopped-bucket/runs")
    monkeypatch.setenv("WAREHOUSE_S3_ENDPOINT", endpoint)
    monkeypatch.setenv("WAREHOUSE_S3_ACCESS_KEY_ID", "key-id")
    monkeypatch.setenv("WAREHOUSE_S3_SECRET_ACCESS_KEY", "secret-key")
    return endpoint


@pytest.mark.parametrize("strict", ["0", "1"])
def test_a_run_logging_outputs_while_s3_is_down_completes_with_its_metrics(
    s3_down: str, home: Path, monkeypatch: pytest.MonkeyPatch, strict: str
) -> None:
    monkeypatch.setenv("WAREHOUSE_STRICT", strict)
    monkeypatch.setenv("WAREHOUSE_CAPTURE_GIT_DIFF", "0")  # the count below is of our objects
    settings = load()
    with warehouse.start_run("outage", {"lr": 0.1}, settings=settings) as run:
        run.log_metrics("val", {"acc": 0.75})
        uris = [run.log_output("val", str(i), f"image {i}".encode(), "image/png") for i in range(3)]
        run.log_artifact(b"weights", "model.bin")
        run.log_metrics("test", {"acc": 0.5})
    with LocalStore(home) as store:
        [doc] = store.search_runs(RunQuery(limit=None))
    assert doc["status"] == "completed"
    assert doc["metrics"] == {"val": {"acc": 0.75}, "test": {"acc": 0.5}}
    assert [a["name"] for a in doc["artifacts"] if a["kind"] == "artifacts"] == ["model.bin"]
    assert all(u.startswith("s3://stopped-bucket/runs/") for u in uris)
    waiting = Counter(e.kind for e in Outbox(home / "outbox").pending())
    assert waiting["object"] == 4  # three outputs and the artifact, bytes kept locally
    local = {p.name for p in (home / "objects").rglob("*") if p.is_file()}
    assert {"0.png", "1.png", "2.png", "model.bin"} <= local
