"""Deleting runs works whatever the state of Elasticsearch and of the outbox (issue 25 item 8).

Before, `warehouse runs delete` looked the runs up in Elasticsearch only: with Elasticsearch
down it was refused (exit 3), and a run still waiting in the outbox was "no run with id"
(exit 4). Real servers: a noida-db of this test alone, stopped and started.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import warehouse
from tests.helpers import run_main
from tests.servers import NoidaServer
from warehouse.replication.outbox import Outbox
from warehouse.settings import load
from warehouse.stores.base import RunQuery
from warehouse.stores.elastic import ElasticStore, init_elasticsearch
from warehouse.stores.local import LocalStore


@pytest.fixture
def es(private_es: NoidaServer, monkeypatch: pytest.MonkeyPatch) -> NoidaServer:
    monkeypatch.setenv("WAREHOUSE_ES_URL", private_es.url)
    monkeypatch.setenv("WAREHOUSE_INDEX_PREFIX", "wh")
    monkeypatch.setenv("WAREHOUSE_SYSTEM_INTERVAL_S", "0")
    return private_es


def _up(es: NoidaServer) -> None:
    """Elasticsearch answers, its templates installed."""
    es.start()
    init_elasticsearch(load())


def _record(name: str) -> str:
    with warehouse.start_run(name) as run:
        run.log_metrics("val", {"acc": 0.5})
        run.log_samples("val", [{"sample_id": str(i), "loss": i} for i in range(5)])
    return run.run_id


def _remote_ids(url: str) -> set[str]:
    with ElasticStore(url, prefix="wh") as remote:
        return {d["run_id"] for d in remote.search_runs(RunQuery(limit=None, fields=["run_id"]))}


def _local_ids(home: Path) -> set[str]:
    with LocalStore(home) as local:
        return {d["run_id"] for d in local.search_runs(RunQuery(limit=None, fields=["run_id"]))}


def test_with_elasticsearch_down_the_deletion_is_queued_and_ships_when_it_is_back(
    es: NoidaServer,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _up(es)
    kept, victim = _record("kept"), _record("victim")
    assert _remote_ids(es.url) == {kept, victim}
    es.stop()
    code, _, err = run_main(["runs", "delete", victim, "--yes"], monkeypatch, capsys)
    assert code == 0, err  # was exit 3: looked up in Elasticsearch only
    assert "deleted 1 run(s)" in err
    assert _local_ids(home) == {kept}
    assert [e.kind for e in Outbox(home / "outbox").pending()] == ["delete"]
    es.start()
    code, _, err = run_main(["sync"], monkeypatch, capsys)
    assert code == 0, err
    assert _remote_ids(es.url) == {kept}
    assert _local_ids(home) == {kept}


def test_a_run_still_in_the_outbox_can_be_deleted_and_never_comes_back(
    es: NoidaServer,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_id = _record("offline")  # Elasticsearch was never up: every write waits
    assert Outbox(home / "outbox").count() > 0
    _up(es)
    code, _, err = run_main(["runs", "delete", run_id[:8], "--yes"], monkeypatch, capsys)
    assert code == 0, err  # was exit 4: "no run with id" (not in Elasticsearch yet)
    for _ in range(2):
        code, _, err = run_main(["sync"], monkeypatch, capsys)
        assert code == 0, err
        assert run_id not in _remote_ids(es.url)
        assert _local_ids(home) == set()


def test_a_run_in_neither_store_is_not_found_and_a_remote_one_needs_elasticsearch(
    es: NoidaServer,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _up(es)
    code, _, err = run_main(["runs", "delete", "nosuchrun", "--yes"], monkeypatch, capsys)
    assert code == 4, err
    assert "no run with id 'nosuchrun'" in err
    es.stop()
    code, _, err = run_main(["runs", "delete", "nosuchrun", "--yes"], monkeypatch, capsys)
    assert code == 3, err  # perhaps recorded elsewhere: it cannot be looked up now
    assert "cannot look up run(s) nosuchrun in Elasticsearch" in err
