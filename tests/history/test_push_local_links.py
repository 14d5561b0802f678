"""push never writes links to files on this machine into the team's store unasked (issue 32,
item 4): with no object store to copy the files to, runs linking them are refused before
anything is written; ``--local-links`` pushes them as they are, counted and warned about."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import warehouse
from tests.helpers import run_main
from warehouse.filters.docpath import strings
from warehouse.query import views
from warehouse.settings import load
from warehouse.stores.base import RunQuery
from warehouse.stores.elastic import ElasticStore, init_elasticsearch
from warehouse.stores.local import LocalStore

OUTPUTS = 4  # per run with outputs


@pytest.fixture
def solo(home: Path) -> list[str]:
    """Two runs with outputs and an artifact in the local folder, one with neither."""
    ids = []
    for i in range(3):
        with warehouse.start_run(f"solo-{i}", config={"lr": i}) as run:
            run.log_metrics("val", {"acc": 0.5 + i / 10})
            run.log_samples("val", [{"sample_id": k, "correct": k % 2} for k in range(10)])
            if i < 2:
                for k in range(OUTPUTS):
                    run.log_output("val", k, f"png-{i}-{k}".encode(), content_type="image/png")
                run.log_artifact(b"weights", name="model.bin")
        ids.append(run.run_id)
    return ids


@pytest.fixture
def cluster(solo: list[str], es_env: dict[str, str]) -> dict[str, str]:
    init_elasticsearch(load())
    return es_env


def local_links(home: Path) -> tuple[int, int]:
    """The runs holding file:// links, and the links, as the local store has them: in run
    documents (artifacts, the git diff when the tree is dirty) and sample output_uri."""
    runs = links = 0
    with LocalStore(home) as store:
        for doc in store.search_runs(RunQuery(limit=None)):
            found = sum(1 for s in strings(doc) if s.startswith("file://"))
            for split in doc.get("sample_counts") or {}:
                for batch in store.sample_batches(doc["run_id"], split, ["output_uri"]):
                    uris = batch.column("output_uri").to_pylist()
                    found += sum(1 for u in uris if u and u.startswith("file://"))
            runs += found > 0
            links += found
    return runs, links


def remote_runs() -> list[dict[str, Any]]:
    with ElasticStore.from_settings(load()) as remote:
        return views.runs(remote, limit=None)


def test_push_without_s3_refuses_runs_linking_local_files_and_writes_nothing(
    cluster: dict[str, str],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs, links = local_links(home)
    assert links >= 2 * (OUTPUTS + 1)
    code, _, err = run_main(["push"], monkeypatch, capsys)
    assert code == 2, err
    said = " ".join(err.split())
    assert f"{runs} of the 3 run(s) to push link {links:,} file(s) in this machine's" in said
    assert "WAREHOUSE_S3_URL" in said
    assert "--local-links" in said
    assert remote_runs() == []  # refused before anything was written


def test_push_with_local_links_writes_them_counted_and_warns(
    cluster: dict[str, str],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs, links = local_links(home)
    code, out, err = run_main(["push", "--local-links", "-f", "json"], monkeypatch, capsys)
    assert code == 0, err
    assert f'"local_links": {links}' in out
    said = " ".join(err.split())
    assert f"warning: {links:,} link(s) in {runs} pushed run(s) point at files on this" in said
    assert len(remote_runs()) == 3
    code, _, err = run_main(["push", "--local-links"], monkeypatch, capsys)
    assert code == 0, err
    assert "no objects (WAREHOUSE_S3_URL is not set)" in err  # not "0 object(s)"


def test_push_to_es_only_refuses_local_links_even_with_s3_set(
    cluster: dict[str, str],
    s3_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_main(["push", "--to-es"], monkeypatch, capsys)
    assert code == 2, err
    assert "--local-links" in err
    assert remote_runs() == []


def test_push_with_s3_leaves_no_local_link_on_the_cluster(
    cluster: dict[str, str],
    s3_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_main(["push", "-f", "json"], monkeypatch, capsys)
    assert code == 0, err
    assert '"local_links": 0' in out
    assert "warning" not in err
    docs = remote_runs()
    assert len(docs) == 3
    with ElasticStore.from_settings(load()) as remote:
        for doc in docs:
            assert not [s for s in strings(doc) if s.startswith("file://")]
            for batch in remote.sample_batches(doc["run_id"], "val", ["output_uri"]):
                uris = [u for u in batch.column("output_uri").to_pylist() if u]
                assert all(u.startswith("s3://") for u in uris), uris
