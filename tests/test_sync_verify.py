"""`warehouse sync --verify` compares both sides by content and names every damage (issue 25,
item 2; issue 14 item 6 before it).

Real servers only: the session's Elasticsearch-API server and S3 server. Each damage is made
from the outside (bytes flipped, files edited, documents overwritten through the raw client),
then verify must name it by run id and path, repair it from the side that is right (saying
which), and exit 5; run again, it finds nothing left.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from elasticsearch import Elasticsearch

from tests.helpers import run_main
from tests.servers import S3Server
from warehouse.replication.verify import RESULT_NAME
from warehouse.settings import Settings, load
from warehouse.stores.base import RunQuery, StepRange
from warehouse.stores.doc_digest import stamp
from warehouse.stores.elastic import ElasticStore, init_elasticsearch
from warehouse.stores.local import LocalStore


def _record(settings: Settings, runs: int, *, outputs: bool = False) -> list[str]:
    import warehouse

    init_elasticsearch(settings)
    ids = []
    for n in range(runs):
        with warehouse.start_run("verified", {"n": n}, settings=settings) as run:
            run.log_metrics("val", {"acc": n / 10})
            if outputs:
                run.log_output("val", "0", f"image {n}".encode(), content_type="image/png")
            run.log_samples("val", [{"sample_id": str(i), "loss": i / 7} for i in range(20)])
            for step in range(10):
                run.log_step(step, loss=1.0 / (step + 1))
            ids.append(run.run_id)
    return ids


@pytest.fixture
def es_settings(es_env: dict[str, str]) -> Settings:
    return load(cli={"system_interval_s": 0})


def _local_state(home: Path) -> dict[str, Any]:
    state: dict[str, Any] = {}
    with LocalStore(home) as store:
        for doc in store.search_runs(RunQuery(limit=None)):
            run_id = doc["run_id"]
            folder = home / "samples" / run_id
            splits = {}
            for path in sorted(folder.glob("*.parquet")) if folder.is_dir() else []:
                batches = store.sample_batches(run_id, path.stem, ["sample_id"])
                splits[path.stem] = sorted(v for b in batches for v in b.column(0).to_pylist())
            seqs = sorted(s["seq"] for s in store.steps(StepRange(run_id=run_id)))
            state[run_id] = (doc["updated_at"], splits, seqs)
    return state


def _remote_state(url: str, prefix: str, run_ids: list[str]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    with Elasticsearch(url) as client:
        for kind in ("runs", "samples", "steps"):
            if client.indices.exists(index=f"{prefix}-{kind}").body:
                client.indices.refresh(index=f"{prefix}-{kind}")
        for run_id in run_ids:
            found = client.options(ignore_status=404).get(index=f"{prefix}-runs", id=run_id)
            version = found.body["_source"]["updated_at"] if found.body.get("found") else None
            hits = client.search(
                index=f"{prefix}-samples", query={"term": {"run_id": run_id}}, size=1000
            ).body["hits"]["hits"]
            splits: dict[str, list[str]] = {}
            for hit in hits:
                splits.setdefault(hit["_source"]["split"], []).append(hit["_source"]["sample_id"])
            seqs: list[int] = []
            if client.indices.exists(index=f"{prefix}-steps").body:
                steps = client.search(
                    index=f"{prefix}-steps", query={"term": {"run_id": run_id}}, size=1000
                ).body["hits"]["hits"]
                seqs = sorted(h["_source"]["seq"] for h in steps)
            state[run_id] = (version, {k: sorted(v) for k, v in sorted(splits.items())}, seqs)
    return state


def test_verify_finds_what_the_remote_lacks_reships_it_and_status_shows_it(
    home: Path,
    es_settings: Settings,
    es_url: str,
    es_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids = _record(es_settings, 3)
    code, out, _ = run_main(["status", "-f", "json"], monkeypatch, capsys)
    assert json.loads(out)[0]["last verification"].startswith("never")
    local = _local_state(home)
    assert _remote_state(es_url, es_prefix, ids) == local
    # the remote loses things behind the outbox's back (an old snapshot restored, say)
    with Elasticsearch(es_url) as client:
        client.delete(index=f"{es_prefix}-runs", id=ids[0], refresh=True)
        client.delete_by_query(
            index=f"{es_prefix}-samples",
            query={
                "bool": {"filter": [{"term": {"run_id": ids[1]}}, {"range": {"loss": {"gt": 1}}}]}
            },
            refresh=True,
        )
        client.delete_by_query(
            index=f"{es_prefix}-steps",
            query={
                "bool": {"filter": [{"term": {"run_id": ids[2]}}, {"range": {"seq": {"gte": 4}}}]}
            },
            refresh=True,
        )
    assert _remote_state(es_url, es_prefix, ids) != local
    code, _, err = run_main(["sync"], monkeypatch, capsys)
    assert "the outbox is empty" in err  # what sync alone says: it cannot see the loss
    code, _, err = run_main(["sync", "--verify"], monkeypatch, capsys)
    assert code == 0, err  # nothing was damaged: the remote only lagged, and caught up
    assert f"run {ids[0]}: the run document is not in Elasticsearch; re-shipped" in err
    assert f"run {ids[1]}: samples val: 20 row(s) locally, 8 in Elasticsearch; re-shipped" in err
    assert f"run {ids[2]}: steps: 10 locally, 4 in Elasticsearch; re-shipped" in err
    assert "3 difference(s), 3 repaired" in err
    assert _remote_state(es_url, es_prefix, ids) == local
    code, out, _ = run_main(["status", "-f", "json"], monkeypatch, capsys)
    shown = json.loads(out)[0]["last verification"]
    assert "3 run(s) compared with Elasticsearch: 3 difference(s), 3 repaired" in shown
    saved = json.loads((home / RESULT_NAME).read_text())
    assert saved["remaining"] == 0


def _flip_a_data_byte(path: Path) -> None:
    """The last data byte of the ``loss`` column: its page CRC no longer matches."""
    meta = pq.ParquetFile(path).metadata
    column = meta.row_group(0).column(meta.schema.names.index("loss"))
    data = bytearray(path.read_bytes())
    start = column.dictionary_page_offset or column.data_page_offset
    data[start + column.total_compressed_size - 1] ^= 0x55
    path.write_bytes(bytes(data))


def test_verify_names_each_damage_by_run_and_path_takes_the_good_side_and_exits_5(
    home: Path,
    es_env: dict[str, str],
    s3_env: dict[str, str],
    es_url: str,
    es_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The drills' three damages that verify answered "match" to, plus one on the remote."""
    settings = load(cli={"system_interval_s": 0})
    ids = _record(settings, 4, outputs=True)
    samples = home / "samples" / ids[0] / "val.parquet"
    _flip_a_data_byte(samples)  # 1. a samples Parquet failing its CRC
    run_file = home / "runs" / f"{ids[1]}.json"
    edited = json.loads(run_file.read_text())
    edited["metrics"]["val"]["acc"] = 0.99  # 2. a hand-edited run document
    run_file.write_text(json.dumps(edited))
    (output,) = (home / "objects" / "verified" / ids[2] / "outputs" / "val").glob("*.png")
    output.write_bytes(b"not the image")  # 3. a modified output object
    with Elasticsearch(es_url) as client:  # 4. Elasticsearch's copy edited by hand
        doc = client.get(index=f"{es_prefix}-runs", id=ids[3]).body["_source"]
        doc["metrics"]["val"]["acc"] = 0.5
        client.index(index=f"{es_prefix}-runs", id=ids[3], document=doc, refresh=True)

    code, _, err = run_main(["sync", "--verify"], monkeypatch, capsys)
    assert code == 5, err
    assert f"run {ids[0]}: samples val: local store: {samples} is damaged" in err
    assert "took the Elasticsearch copy (20 rows)" in err
    assert f"run {ids[1]}: run document {run_file}: changed after it was written" in err
    assert f"run {ids[2]}: object verified/{ids[2]}/outputs/val/" in err
    assert f"{output} was changed after it was written (sha256); took the S3 copy" in err
    assert f"run {ids[3]}: run document in Elasticsearch: changed after it was written" in err
    assert "re-shipped the local copy as a new version" in err
    assert "4 damaged or lost cop(ies)" in err

    with LocalStore(home) as store:  # each repaired from the good side
        rows = list(store.sample_batches(ids[0], "val"))
        assert sum(b.num_rows for b in rows) == 20
        (fixed,) = store.search_runs(RunQuery(filter=f"run_id:{ids[1]}"))
    assert fixed["metrics"]["val"]["acc"] == pytest.approx(0.1)
    assert output.read_bytes() == b"image 2"
    with ElasticStore.from_settings(settings) as remote:
        (shipped,) = remote.search_runs(RunQuery(filter=f"run_id:{ids[3]}"))
    assert shipped["metrics"]["val"]["acc"] == pytest.approx(0.3)
    code, _, err = run_main(["sync", "--verify"], monkeypatch, capsys)
    assert code == 0, err
    assert "the remote copies match" in err


def test_remote_only_runs_are_named_when_recorded_here_and_counted_when_not(
    home: Path,
    es_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from warehouse.models import Run

    ids = _record(es_settings, 1)
    mine = stamp(Run(experiment="verified", host=socket.gethostname()).to_doc())
    theirs = stamp(Run(experiment="verified", host="another-host").to_doc())
    with ElasticStore.from_settings(es_settings) as remote:
        remote.write_runs([mine, theirs])
    code, _, err = run_main(["sync", "--verify"], monkeypatch, capsys)
    assert code == 5, err
    assert f"run {mine['run_id']}: in Elasticsearch only, though recorded on this host" in err
    assert f"'warehouse pull -q run_id:{mine['run_id']}' copies it back" in err
    assert theirs["run_id"] not in err
    assert "1 more only in Elasticsearch and" not in err
    assert "(1 more only in Elasticsearch, recorded elsewhere)" in err
    assert ids[0] not in err.replace("verified", "")


def test_a_remote_copy_newer_than_the_local_one_is_taken_and_said(
    home: Path,
    es_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (run_id,) = _record(es_settings, 1)
    with LocalStore(home) as store:
        (doc,) = store.search_runs(RunQuery(filter=f"run_id:{run_id}"))
    newer = stamp({**doc, "status": "completed", "tags": ["from-elsewhere"]})
    newer["updated_at"] = "2999-01-01T00:00:00Z"
    newer = stamp(newer)
    with ElasticStore.from_settings(es_settings) as remote:
        remote.write_runs([newer])
    code, _, err = run_main(["sync", "--verify"], monkeypatch, capsys)
    assert code == 5, err
    assert f"run {run_id}: Elasticsearch holds a newer version of the run document" in err
    assert "took the Elasticsearch copy" in err
    with LocalStore(home) as store:
        (taken,) = store.search_runs(RunQuery(filter=f"run_id:{run_id}"))
    assert taken["tags"] == ["from-elsewhere"]
    code, _, err = run_main(["sync", "--verify"], monkeypatch, capsys)
    assert code == 0, err


def test_steps_the_local_store_lost_are_taken_back_and_the_loss_is_named(
    home: Path,
    es_settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (run_id,) = _record(es_settings, 1)
    path = home / "steps" / f"{run_id}.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:3]))  # the local steps file lost its last lines by hand
    code, _, err = run_main(["sync", "--verify"], monkeypatch, capsys)
    assert code == 5, err
    assert f"run {run_id}: steps: 3 locally, 10 in Elasticsearch: 7 missing from {path}" in err
    code, out, _ = run_main(["status", "-f", "json"], monkeypatch, capsys)
    assert "1 damaged or lost cop(ies)" in json.loads(out)[0]["last verification"]
    with LocalStore(home) as store:
        assert [s["seq"] for s in store.steps(StepRange(run_id=run_id))] == list(range(10))


def test_with_no_remote_verify_checks_the_local_copies_and_names_a_deleted_samples_file(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import warehouse

    settings = load(cli={"system_interval_s": 0})
    with warehouse.start_run("alone", settings=settings) as run:
        run.log_samples("val", [{"sample_id": str(i), "loss": i} for i in range(200)])
    code, _, err = run_main(["sync", "--verify"], monkeypatch, capsys)
    assert code == 0, err
    assert "1 run(s) compared: the local copies are intact" in err
    path = home / "samples" / run.run_id / "val.parquet"
    path.unlink()
    code, _, err = run_main(["sync", "--verify"], monkeypatch, capsys)
    assert code == 5, err
    assert f"run {run.run_id}: samples val: {path} is missing (the run says 200 rows)" in err
    assert "left both copies as they are" in err


def test_s3_alone_compares_objects(
    home: Path,
    s3_server: S3Server,
    s3_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import warehouse

    settings = load(cli={"system_interval_s": 0})
    with warehouse.start_run("objects", settings=settings) as run:
        run.log_artifact(b"weights", name="model.bin")
    key = f"warehouse/objects/{run.run_id}/artifacts/model.bin"
    bucket = s3_env["WAREHOUSE_S3_URL"].split("/")[2]
    s3_server.admin.delete_object(Bucket=bucket, Key=key)
    code, _, err = run_main(["sync", "--verify"], monkeypatch, capsys)
    assert code == 0, err
    assert f"object objects/{run.run_id}/artifacts/model.bin: not in S3; re-shipped" in err
    assert s3_server.admin.get_object(Bucket=bucket, Key=key)["Body"].read() == b"weights"
