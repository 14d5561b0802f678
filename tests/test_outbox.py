"""The durable outbox: records wait while Elasticsearch/S3 are down and ship exactly once after.

Real servers only: a private noida-db the tests stop and start, the session's noida-db (or
WAREHOUSE_TEST_ES_URL) for the rest, and the session's S3 server for objects.
"""

from __future__ import annotations

import json
import logging
import math
import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from tests.servers import NoidaServer, S3Server
from warehouse.errors import StoreUnavailable
from warehouse.models import Run
from warehouse.replication import Recording, open_recording
from warehouse.replication.outbox import Outbox
from warehouse.settings import Settings, load
from warehouse.stores.elastic import ElasticStore, init_elasticsearch


def settings_for(url: str, prefix: str, **extra: Any) -> Settings:
    return load(cli={"es_url": url, "index_prefix": prefix, "system_interval_s": 0, **extra})


@pytest.fixture
def es_settings(es_url: str, es_prefix: str, home: Path) -> Settings:
    settings = settings_for(es_url, es_prefix)
    init_elasticsearch(settings)
    return settings


@pytest.fixture
def recording(es_settings: Settings) -> Iterator[Recording]:
    """Where a recorder writes: the local store, replicated to the test's Elasticsearch."""
    rec = open_recording(es_settings)
    yield rec
    rec.close()


def versioned(doc: dict[str, Any], seconds: int) -> dict[str, Any]:
    """``doc`` as saved at ``seconds`` past a fixed moment (its version)."""
    return {**doc, "updated_at": f"2026-01-01T00:00:{seconds:02d}Z"}


class RemoteWrites:
    """Counts the writes a test's code attempts on Elasticsearch (run, sample or step)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.returned = 0  # calls that came back (with an answer or an error)

    def __len__(self) -> int:
        return len(self.calls)


@pytest.fixture
def remote_writes(monkeypatch: pytest.MonkeyPatch) -> RemoteWrites:
    """Every call of ``ElasticStore.write_runs/write_samples/write_steps``, in order."""
    counter = RemoteWrites()
    for name in ("write_runs", "write_samples", "write_steps"):
        real = getattr(ElasticStore, name)

        def counting(
            self: ElasticStore, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any
        ) -> Any:
            counter.calls.append(_name)
            try:
                return _real(self, *args, **kwargs)
            finally:
                counter.returned += 1

        monkeypatch.setattr(ElasticStore, name, counting)
    return counter


def count(url: str, index: str, **term: str) -> int:
    with Elasticsearch(url) as client:
        client.indices.refresh(index=index)
        query = {"term": term} if term else {"match_all": {}}
        return int(client.count(index=index, query=query).body["count"])


def ids(url: str, index: str, run_id: str) -> list[str]:
    with Elasticsearch(url) as client:
        hits = client.search(
            index=index, query={"term": {"run_id": run_id}}, size=1000, source=False
        ).body["hits"]["hits"]
    return sorted(h["_id"] for h in hits)


def test_a_run_recorded_while_es_is_down_ships_exactly_once_after_sync(
    private_es: NoidaServer, home: Path, remote_writes: RemoteWrites
) -> None:
    import warehouse

    settings = settings_for(private_es.url, "wh")  # nothing listens there yet
    with warehouse.start_run("resnet", {"lr": 0.1, "depth": 18}, settings=settings) as run:
        run.log_metrics("train", {"acc": 0.99})
        run.log_metrics("val", {"acc": 0.91})
        run.log_samples("val", [{"sample_id": str(i), "loss": i / 10} for i in range(40)])
        for step in range(6):
            run.log_step(step, loss=1.0 / (step + 1))
    # the first write found the server unreachable; every later record only queued
    assert len(remote_writes) == 1, remote_writes.calls
    kinds = {e.kind for e in Outbox(home / "outbox").pending()}
    assert {"run", "samples", "steps"} <= kinds
    assert all(
        "connection refused" in (e.last_error or "connection refused")
        for e in Outbox(home / "outbox").pending()
    )

    private_es.start()
    init_elasticsearch(settings)
    for _ in range(2):  # a second sync finds nothing and changes nothing
        rec = open_recording(settings)
        report = rec.shipper.drain()
        rec.close()
        assert report is not None
        assert report.complete, [(e.describe(), r) for e, r in report.failed]
        assert Outbox(home / "outbox").count() == 0
        assert ids(private_es.url, "wh-runs", run.run_id) == [run.run_id]
        assert count(private_es.url, "wh-samples", run_id=run.run_id) == 40
        assert ids(private_es.url, "wh-samples", run.run_id) == sorted(
            f"{run.run_id}:val:{i}" for i in range(40)
        )
        assert ids(private_es.url, "wh-steps", run.run_id) == sorted(
            f"{run.run_id}:{seq}" for seq in range(6)
        )
    with ElasticStore(private_es.url, prefix="wh") as store:
        from warehouse.stores.base import RunQuery

        (doc,) = store.search_runs(RunQuery())
    assert doc["status"] == "completed"
    assert doc["metrics"]["val"]["acc"] == 0.91


def test_a_document_es_rejects_is_kept_with_the_reason(
    recording: Recording, caplog: pytest.LogCaptureFixture
) -> None:
    doc = Run(experiment="x").to_doc()
    doc["duration_s"] = "slow"  # a double field: Elasticsearch refuses the document
    with caplog.at_level(logging.WARNING, logger="warehouse.replication"):
        recording.store.write_runs([doc])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "warehouse sync" in warnings[0].getMessage()
    (entry,) = recording.shipper.outbox.pending()
    assert "duration_s" in (entry.last_error or "")
    assert entry.last_error_type == "InvalidRecord"
    report = recording.shipper.drain()
    assert report is not None
    assert report.shipped == 0
    assert "duration_s" in report.failed[0][1]
    assert recording.shipper.outbox.count() == 1  # still there, not dropped


def test_publishing_the_same_run_twice_stores_it_once(
    recording: Recording, es_url: str, es_settings: Settings
) -> None:
    doc = Run(experiment="x", metrics={"val": {"acc": 0.5}}).to_doc()
    recording.store.write_runs([doc])
    recording.store.write_runs([doc])
    index = f"{es_settings.index_prefix}-runs"
    assert ids(es_url, index, doc["run_id"]) == [doc["run_id"]]


def test_a_stale_copy_shipped_late_never_replaces_the_newer_run(
    recording: Recording, es_url: str, es_settings: Settings
) -> None:
    doc = Run(experiment="x").to_doc()
    recording.shipper.outbox.add("run", {"doc": versioned(doc, 1)})  # queued while "running"
    with ElasticStore.from_settings(es_settings) as store:  # ... then the finished run lands
        store.write_runs([versioned({**doc, "status": "completed"}, 2)])
    report = recording.shipper.drain()
    assert report is not None
    assert report.complete
    assert recording.shipper.outbox.count() == 0
    with Elasticsearch(es_url) as client:
        stored = client.get(index=f"{es_settings.index_prefix}-runs", id=doc["run_id"]).body
    assert stored["_source"]["status"] == "completed"


def test_older_entries_ship_first_on_the_next_publish(
    recording: Recording, es_url: str, es_settings: Settings
) -> None:
    old = [Run(experiment="x").to_doc() for _ in range(3)]
    for doc in old:
        recording.shipper.outbox.add("run", {"doc": doc})
    new = Run(experiment="x").to_doc()
    recording.store.write_runs([new])
    assert recording.shipper.outbox.count() == 0
    assert count(es_url, f"{es_settings.index_prefix}-runs") == 4


def test_while_es_stays_down_publish_only_queues_and_warns_once(
    home: Path, caplog: pytest.LogCaptureFixture, remote_writes: RemoteWrites
) -> None:
    from tests.servers import free_port

    rec = open_recording(settings_for(f"http://127.0.0.1:{free_port()}", "wh"))
    with caplog.at_level(logging.WARNING):
        rec.store.write_runs([Run(experiment="x").to_doc()])
        for seq in range(5):
            rec.store.write_steps("r", "x", [{"seq": seq, "step": seq, "@timestamp": "2026-01-01"}])
    assert remote_writes.calls == ["write_runs"]  # the steps were queued without a try
    rec.close()
    assert rec.shipper.outbox.count() == 6
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_strict_mode_raises_but_keeps_the_record(home: Path) -> None:
    from tests.servers import free_port

    rec = open_recording(settings_for(f"http://127.0.0.1:{free_port()}", "wh", strict=True))
    with pytest.raises(StoreUnavailable, match="outbox"):
        rec.store.write_runs([Run(experiment="x").to_doc()])
    rec.close()
    assert rec.shipper.outbox.count() == 1


def test_entries_are_json_lines_without_nan(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox")
    entry = outbox.add("steps", {"run_id": "r", "steps": [{"seq": 0, "loss": math.nan}]})
    text = entry.path.read_text()
    assert text.count("\n") == 1
    assert "NaN" not in text
    assert json.loads(text)["payload"]["steps"][0]["loss"] is None


def _add_many(folder: str, worker: int) -> None:
    outbox = Outbox(Path(folder))
    for n in range(40):
        outbox.add("run", {"doc": {"run_id": f"{worker}-{n}", "experiment": "x"}})


def test_eight_processes_adding_at_once_lose_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "outbox"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_add_many, args=(str(folder), w)) for w in range(8)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(60)
        assert process.exitcode == 0
    entries = Outbox(folder).pending()
    assert sorted(e.payload["doc"]["run_id"] for e in entries) == sorted(
        f"{w}-{n}" for w in range(8) for n in range(40)
    )
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_a_corrupt_entry_is_set_aside_whole_reported_and_the_rest_ship(
    recording: Recording, es_url: str, es_settings: Settings
) -> None:
    shipper = recording.shipper
    folder = shipper.outbox.folder
    folder.mkdir(parents=True, exist_ok=True)
    torn = Run(experiment="x").to_doc()
    text = json.dumps({"version": 1, "kind": "run", "created_ns": 1, "payload": {"doc": torn}})
    (folder / "00000000000000000001-1-deadbeef.json").write_text(text[: len(text) // 2])
    shipper.outbox.add("run", {"doc": Run(experiment="x").to_doc()})
    report = shipper.drain()
    assert report is not None
    assert report.shipped == 1
    assert len(report.failed) == 1
    assert "corrupt outbox entry" in report.failed[0][1]
    # its bytes are kept, never overwritten by a rewrite of the failed attempt
    kept = folder / "corrupt" / "00000000000000000001-1-deadbeef.json"
    assert kept.read_text() == text[: len(text) // 2]
    assert shipper.outbox.count() == 0
    # every later sync still says it is there, until a person deletes it
    again = shipper.drain()
    assert again is not None
    assert [str(kept) in reason for _, reason in again.failed] == [True]
    kept.unlink()
    last = shipper.drain()
    assert last is not None
    assert last.complete


def test_an_entry_that_cannot_be_read_now_is_left_exactly_as_it_is(
    recording: Recording, es_settings: Settings
) -> None:
    """A passing read error (EACCES, EIO) must not turn a good entry into an empty one."""
    shipper = recording.shipper
    entry = shipper.outbox.add("run", {"doc": Run(experiment="x").to_doc()})
    before = entry.path.read_bytes()
    entry.path.unlink()
    entry.path.mkdir()  # reading it now fails with an OSError (IsADirectoryError)
    report = shipper.drain()
    assert report is not None
    assert len(report.failed) == 1
    assert "left untouched" in report.failed[0][1]
    assert entry.path.is_dir()  # not replaced by a rewritten file
    entry.path.rmdir()
    entry.path.write_bytes(before)
    again = shipper.drain()
    assert again is not None
    assert again.shipped == 1


def test_a_local_only_run_writes_no_outbox_entry_and_has_no_shipper(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26: with no Elasticsearch and no S3, every run write used to write, fsync and
    remove an outbox entry. Counted, not timed: no entry file is written at all."""
    import warehouse

    written: list[str] = []
    real_write = Outbox._write

    def counting(self: Outbox, entry: Any, **kwargs: Any) -> None:
        written.append(entry.kind)
        real_write(self, entry, **kwargs)

    monkeypatch.setattr(Outbox, "_write", counting)
    rec = open_recording(load())
    assert rec.shipper is None
    rec.close()
    with warehouse.start_run(
        "local", {"lr": 0.1}, settings=load(cli={"system_interval_s": 0})
    ) as run:
        run.log_metrics("val", {"acc": 0.5})
        run.log_samples("val", [{"sample_id": str(i), "loss": i / 3} for i in range(5)])
        for step in range(3):
            run.log_step(step, loss=1.0 / (step + 1))
        run.log_artifact(b"weights", name="model.bin")
        run.save()
    assert written == []
    assert not (home / "outbox").exists()
    assert (home / "runs" / f"{run.run_id}.json").is_file()


def test_a_local_step_append_that_fails_waits_in_the_outbox_for_sync(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warehouse.replication import open_shipper
    from warehouse.stores.local import LocalStore

    real = LocalStore.write_steps

    def full_disk(self: LocalStore, *args: Any) -> None:
        raise StoreUnavailable("append steps: No space left on device")

    monkeypatch.setattr(LocalStore, "write_steps", full_disk)
    rec = open_recording(load())
    doc = Run(experiment="x").to_doc()
    rec.store.write_runs([doc])
    run_id = str(doc["run_id"])
    rec.store.write_steps(run_id, "x", [{"seq": 0, "step": 0, "@timestamp": "2026-01-01"}])
    rec.close()
    assert rec.outbox.count() == 1  # the only copy of the batch
    monkeypatch.setattr(LocalStore, "write_steps", real)
    shipper = open_shipper(load())
    report = shipper.drain()
    shipper.close()
    assert report is not None
    assert report.complete
    assert rec.outbox.count() == 0
    assert LocalStore(home).last_seq(run_id) == 0


def _s3_without_endpoint(env: dict[str, str]) -> dict[str, str]:
    """The S3 settings of the test server's ``env``, less the endpoint (each test sets it:
    a closed port while S3 is down, then the server's)."""
    keys = ("s3_url", "s3_region", "s3_access_key_id", "s3_secret_access_key")
    return {key: env[f"WAREHOUSE_{key.upper()}"] for key in keys}


def test_objects_wait_for_s3_and_upload_after(
    home: Path, s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    import hashlib

    from tests.servers import free_port

    payload = b"model weights"
    source = tmp_path / "model.bin"
    source.write_bytes(payload)
    digest = hashlib.sha256(payload).hexdigest()
    env = s3_server.settings_env(s3_bucket)
    down = _s3_without_endpoint(env)
    rec = open_recording(load(cli={**down, "s3_endpoint": f"http://127.0.0.1:{free_port()}"}))
    uri = rec.objects.put(
        "exp/r1/artifacts/model.bin",
        source,
        content_type="application/octet-stream",
        sha256=digest,
    )
    rec.close()
    assert uri == f"{env['WAREHOUSE_S3_URL']}/exp/r1/artifacts/model.bin"
    assert rec.shipper.outbox.count() == 1
    rec = open_recording(load(cli={**down, "s3_endpoint": env["WAREHOUSE_S3_ENDPOINT"]}))
    report = rec.shipper.drain()
    assert report is not None
    assert report.complete
    rec.close()
    key = "warehouse/exp/r1/artifacts/model.bin"
    assert s3_server.admin.get_object(Bucket=s3_bucket, Key=key)["Body"].read() == payload


def test_many_waiting_objects_ship_in_one_drain_and_leave_no_entry(
    home: Path, s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    """More entries than the removal threads handle one by one: all shipped, all removed."""
    import hashlib

    from tests.servers import free_port
    from warehouse.replication.outbox import REMOVE_THREADS

    count = REMOVE_THREADS * 4 + 3
    env = s3_server.settings_env(s3_bucket)
    down = _s3_without_endpoint(env)
    rec = open_recording(load(cli={**down, "s3_endpoint": f"http://127.0.0.1:{free_port()}"}))
    for n in range(count):
        source = tmp_path / f"{n}.bin"
        source.write_bytes(f"output {n}".encode())
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        rec.objects.put(
            f"exp/r2/outputs/val/{n}.bin", source, content_type="image/png", sha256=digest
        )
    rec.close()
    assert rec.shipper.outbox.count() == count
    rec = open_recording(load(cli={**down, "s3_endpoint": env["WAREHOUSE_S3_ENDPOINT"]}))
    report = rec.shipper.drain()
    assert report is not None
    assert report.complete
    assert rec.shipper.outbox.count() == 0
    rec.close()
    listed = s3_server.admin.list_objects_v2(Bucket=s3_bucket, Prefix="warehouse/exp/r2/")
    assert listed["KeyCount"] == count
    body = s3_server.admin.get_object(Bucket=s3_bucket, Key="warehouse/exp/r2/outputs/val/7.bin")
    assert body["Body"].read() == b"output 7"


def test_with_s3_alone_records_stay_local_and_only_objects_ship(
    home: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    import warehouse

    env = s3_server.settings_env(s3_bucket)
    settings = load(cli={k.removeprefix("WAREHOUSE_").lower(): v for k, v in env.items()})
    assert settings.store_engine == "local"
    with warehouse.start_run(experiment="s3only", settings=settings) as run:
        run.log_metrics("val", {"acc": 0.5})
        uri = run.log_output("val", 1, b"png-bytes", content_type="image/png")
        run.log_samples("val", [{"sample_id": 1}])
    assert uri.startswith(env["WAREHOUSE_S3_URL"])
    rec = open_recording(settings)
    assert rec.shipper is not None
    assert "store" not in rec.shipper.remotes
    assert rec.outbox.count() == 0  # nothing waits for an Elasticsearch not configured
    rec.close()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server that accepts connections and never answers: a hung Elasticsearch."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    server.close()
    for conn in held:
        conn.close()


@pytest.mark.slow
def test_an_elasticsearch_that_never_answers_holds_training_seconds_not_minutes(
    home: Path,
    silent_server: str,
    es_url: str,
    es_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    remote_writes: RemoteWrites,
) -> None:
    import warehouse

    for name, value in {
        "WAREHOUSE_ES_URL": silent_server,
        "WAREHOUSE_INDEX_PREFIX": es_prefix,
        "WAREHOUSE_SYSTEM_INTERVAL_S": "0",
        # longer than PUBLISH_WAIT_S: the shipper's own wait is what bounds training here
        "WAREHOUSE_ES_TIMEOUT_S": "60",
    }.items():
        monkeypatch.setenv(name, value)
    with warehouse.start_run(experiment="hung") as run:
        run.log_metrics("val", {"acc": 0.5})
        run.log_samples("val", [{"sample_id": i, "loss": i / 10} for i in range(10)])
    # one write was tried and is still hanging (the client waits 60 s here): the run
    # went on without it, and every later record only queued
    assert len(remote_writes) == 1, remote_writes.calls
    assert remote_writes.returned == 0
    with warehouse.start_run(experiment="hung") as second:  # a new recorder, same process
        second.log_metrics("val", {"acc": 0.6})
    assert len(remote_writes) == 1, "the next run tried the hung server again"
    assert (home / "runs" / f"{run.run_id}.json").is_file()
    assert Outbox(home / "outbox").count() >= 2
    # once a real Elasticsearch answers, sync ships what waited, once
    real = settings_for(es_url, es_prefix)
    init_elasticsearch(real)
    rec = open_recording(real)
    try:
        report = rec.shipper.drain()
    finally:
        rec.close()
    assert report is not None
    assert report.complete, report.failed
    assert count(es_url, f"{es_prefix}-runs", run_id=run.run_id) == 1
    assert count(es_url, f"{es_prefix}-runs", run_id=second.run_id) == 1
    assert count(es_url, f"{es_prefix}-samples", run_id=run.run_id) == 10
