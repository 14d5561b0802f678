"""The embedded store alone: files, concurrency, corruption, the catalog, streaming."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from warehouse.errors import InvalidRecord, StoreUnavailable
from warehouse.models import Run
from warehouse.stores import local_compaction
from warehouse.stores.base import RankQuery, RunQuery, SampleQuery, StepRange
from warehouse.stores.local import LocalStore

WRITERS = 8
RUNS_PER_WRITER = 20
SHARED = 3  # run ids every writer writes too: the same run recorded concurrently


def doc(run_id: str, experiment: str = "exp", value: float = 0.5, **extra: Any) -> dict[str, Any]:
    base = Run(run_id=run_id, experiment=experiment, metrics={"val": {"acc": value}}).to_doc()
    return {**base, **extra}


def _writer(home: str, worker: int, compact_after: int) -> None:
    """One process of the concurrency tests: own runs, shared runs, samples and steps."""
    with LocalStore(Path(home), compact_after=compact_after) as store:
        for i in range(RUNS_PER_WRITER):
            store.write_runs([doc(f"w{worker}-{i}", f"exp{worker % 3}", i / RUNS_PER_WRITER)])
            if i % 5 == 0:
                shared = [
                    doc(f"shared-{k}", "shared", worker / 10, tags=[f"w{worker}"])
                    for k in range(SHARED)
                ]
                store.write_runs(shared)
            steps = [{"seq": worker * 1000 + i, "step": i, "metrics": {"loss": 1.0}}]
            store.write_steps("shared-0", "shared", steps)
        batches = [
            pa.record_batch(
                {"sample_id": [f"{worker}-{b}-{j}" for j in range(100)], "v": np.arange(100.0)}
            )
            for b in range(3)  # ids unique in the split: a repeated id is refused
        ]
        store.write_samples("shared-0", "shared", "val", batches)


def _rewriter(home: str, rounds: int) -> None:
    """Rewrites one big run again and again, alternating two complete versions."""
    with LocalStore(Path(home)) as store:
        for i in range(rounds):
            version = i % 2
            config = {f"key{k}": version for k in range(2000)}
            store.write_runs([doc("hot", "exp", float(version), config=config)])


def _spawn(target: Any, *args: Any) -> multiprocessing.process.BaseProcess:
    process = multiprocessing.get_context("spawn").Process(target=target, args=args)
    process.start()
    return process


def _join(processes: list[multiprocessing.process.BaseProcess]) -> None:
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0, f"writer process failed with exit code {process.exitcode}"


@pytest.fixture
def store(home: Path) -> Iterator[LocalStore]:
    with LocalStore(home) as local:
        yield local


def test_constructing_and_querying_an_empty_store_creates_nothing(home: Path) -> None:
    with LocalStore(home) as store:
        assert store.search_runs(RunQuery()) == []
        assert store.best_per_experiment(RankQuery("metrics.val.acc", "max")) == []
    assert not home.exists()


def test_layout_is_one_json_per_run_one_parquet_per_split_one_jsonl_per_run(
    store: LocalStore, home: Path
) -> None:
    store.write_runs([doc("r1")])
    store.write_samples("r1", "exp", "val", [pa.record_batch({"sample_id": ["a"]})])
    store.write_steps("r1", "exp", [{"seq": 0, "step": 0}])
    assert json.loads((home / "runs" / "r1.json").read_text())["run_id"] == "r1"
    assert (home / "samples" / "r1" / "val.parquet").is_file()
    assert (home / "steps" / "r1.jsonl").read_text().count("\n") == 1
    assert not list(home.rglob("*.tmp"))


@pytest.mark.slow
def test_eight_processes_writing_at_once_lose_and_corrupt_nothing(home: Path) -> None:
    _join([_spawn(_writer, str(home), w, 7) for w in range(WRITERS)])
    local_compaction.wait(home / "catalog")
    with LocalStore(home) as store:
        runs = store.search_runs(RunQuery(limit=None))
        expected = {f"w{w}-{i}" for w in range(WRITERS) for i in range(RUNS_PER_WRITER)}
        assert {r["run_id"] for r in runs} == expected | {f"shared-{k}" for k in range(SHARED)}
        for run in runs:
            on_disk = json.loads((home / "runs" / f"{run['run_id']}.json").read_text())
            assert run == on_disk
        steps = list(store.steps(StepRange(run_id="shared-0")))
        assert len(steps) == WRITERS * RUNS_PER_WRITER
        samples = list(store.search_samples(SampleQuery(run_id="shared-0", limit=None)))
        assert len(samples) == 300
        assert len({s["sample_id"].split("-")[0] for s in samples}) == 1  # one writer's file
    assert not list(home.rglob("*.tmp"))


@pytest.mark.slow
def test_a_reader_during_writes_sees_the_old_or_the_new_run_never_part(home: Path) -> None:
    with LocalStore(home) as store:
        store.write_runs([doc("hot", "exp", 0.0, config={f"key{k}": 0 for k in range(2000)})])
        writer = _spawn(_rewriter, str(home), 150)
        seen = set()
        while writer.is_alive():
            (run,) = store.search_runs(RunQuery(filter="run_id:hot"))
            version = run["metrics"]["val"]["acc"]
            assert set(run["config"].values()) == {int(version)}
            assert len(run["config"]) == 2000
            seen.add(version)
        _join([writer])
    assert seen, "the reader ran while the writer wrote"


@pytest.mark.slow
def test_compaction_while_processes_write_loses_nothing(home: Path) -> None:
    writers = [_spawn(_writer, str(home), w, 1000) for w in range(4)]
    with LocalStore(home) as store:
        while any(w.is_alive() for w in writers):
            store.compact()
        _join(writers)
        store.compact()
        assert len(store.search_runs(RunQuery(limit=None))) == 4 * RUNS_PER_WRITER + SHARED
    assert (home / "catalog" / "journal").stat().st_size == 0


def journaled(home: Path) -> list[str]:
    """The run ids of the journal's lines (each ``<run_id> <crc32>``)."""
    text = (home / "catalog" / "journal").read_text()
    return [line.split()[0] for line in text.splitlines() if line.strip()]


def test_journal_is_compacted_after_the_configured_number_of_entries(home: Path) -> None:
    with LocalStore(home, compact_after=3) as store:
        for i in range(3):
            store.write_runs([doc(f"r{i}")])
        local_compaction.wait(home / "catalog")  # the third started one in the background
        store.write_runs([doc("r3")])
        assert journaled(home) == ["r3"]
        assert (home / "catalog" / "runs.parquet").is_file()
        assert len(store.search_runs(RunQuery(limit=None))) == 4


def test_a_warm_query_reads_no_file(store: LocalStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.write_runs([doc(f"r{i}") for i in range(5)])
    assert len(store.search_runs(RunQuery())) == 5

    def fail(*args: Any) -> None:
        raise AssertionError("a warm query reloaded the catalog")

    monkeypatch.setattr("warehouse.stores.local_catalog.RunCatalog._load", fail)
    assert len(store.search_runs(RunQuery())) == 5
    assert len(store.best_per_experiment(RankQuery("metrics.val.acc", "max"))) == 1


def test_a_write_by_another_store_is_seen_by_a_warm_reader(home: Path) -> None:
    with LocalStore(home) as reader, LocalStore(home) as writer:
        writer.write_runs([doc("r1")])
        assert len(reader.search_runs(RunQuery())) == 1
        writer.write_runs([doc("r2"), doc("r1", status="failed")])
        runs = reader.search_runs(RunQuery(sort=[("run_id", "asc")]))
        assert [(r["run_id"], r["status"]) for r in runs] == [("r1", "failed"), ("r2", "running")]


def test_corrupt_run_file_is_skipped_with_a_warning_naming_it(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LocalStore(home) as store:
        store.write_runs([doc("good"), doc("bad")])
        (home / "runs" / "bad.json").write_text('{"run_id": "bad", "experi')
        (home / "runs" / "stray.json").write_text("not json")
        with caplog.at_level(logging.WARNING):
            runs = store.search_runs(RunQuery())
    assert [r["run_id"] for r in runs] == ["good"]
    warned = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert str(home / "runs" / "bad.json") in warned
    assert str(home / "runs" / "stray.json") in warned


@pytest.mark.parametrize(
    "junk", [b"bad\x00id\n", b"\xff\xfe\n", b"../../etc/passwd\n"], ids=["nul", "utf8", "path"]
)
def test_a_damaged_journal_line_breaks_neither_queries_nor_the_next_writes(
    home: Path, junk: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with LocalStore(home, compact_after=4) as store:
        store.write_runs([doc("r0")])
        store.compact()  # the catalog exists; later runs go through the journal
        store.write_runs([doc("r1")])
        with open(home / "catalog" / "journal", "ab") as journal:
            journal.write(junk)
        with caplog.at_level(logging.WARNING):
            found = {r["run_id"] for r in store.search_runs(RunQuery())}
        assert found == {"r0", "r1"}
        assert str(home / "catalog" / "journal") in caplog.text
        for i in range(2, 7):  # passes the compaction threshold: the writer must not crash
            store.write_runs([doc(f"r{i}")])
        found = {r["run_id"] for r in store.search_runs(RunQuery(limit=None))}
    assert found == {f"r{i}" for i in range(7)}


def test_a_run_file_that_cannot_be_read_leaves_the_others_queryable(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LocalStore(home) as store:
        store.write_runs([doc("good")])
    (home / "runs" / "odd.json").mkdir()  # reading it fails with an OSError (EISDIR)
    with LocalStore(home) as store, caplog.at_level(logging.WARNING):
        store.compact(rebuild=True)
        assert [r["run_id"] for r in store.search_runs(RunQuery())] == ["good"]
    assert str(home / "runs" / "odd.json") in caplog.text


def test_deleted_catalog_is_rebuilt_from_the_run_files(home: Path) -> None:
    with LocalStore(home, compact_after=2) as store:
        store.write_runs([doc(f"r{i}") for i in range(5)])
        store.compact()
    for path in (home / "catalog").iterdir():
        path.unlink()
    (home / "catalog").rmdir()
    with LocalStore(home) as store:
        assert len(store.search_runs(RunQuery(limit=None))) == 5
        assert not (home / "catalog").exists()  # reads never create the folder (issue 14)
        store.write_runs([doc("r5")])  # the next write does
        assert len(store.search_runs(RunQuery(limit=None))) == 6
    with LocalStore(home) as store:
        assert len(store.search_runs(RunQuery(limit=None))) == 6
        assert not (home / "catalog" / "runs.parquet").exists()  # reads never store one
        store.compact()
        assert len(store.search_runs(RunQuery(limit=None))) == 6
    assert (home / "catalog" / "runs.parquet").is_file()


def test_corrupt_catalog_is_rebuilt_with_a_warning(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LocalStore(home) as store:
        store.write_runs([doc(f"r{i}") for i in range(3)])
        store.compact()
    (home / "catalog" / "runs.parquet").write_bytes(b"PAR1 garbage")
    with LocalStore(home) as store, caplog.at_level(logging.WARNING):
        assert len(store.search_runs(RunQuery(limit=None))) == 3  # runs.arrow is vouched for
    (home / "catalog" / "runs.arrow").write_bytes(b"ARROW1 garbage")
    with LocalStore(home) as store, caplog.at_level(logging.WARNING):
        assert len(store.search_runs(RunQuery(limit=None))) == 3  # from the run files
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("runs.parquet is damaged" in m and "compact --rebuild" in m for m in warned)


def test_hand_edited_run_files_are_seen_after_a_rebuild(store: LocalStore, home: Path) -> None:
    store.write_runs([doc("r1")])
    store.compact()
    (home / "runs" / "r2.json").write_text(json.dumps(doc("r2")))
    store.compact(rebuild=True)
    assert {r["run_id"] for r in store.search_runs(RunQuery())} == {"r1", "r2"}


def test_a_corrupt_sample_file_is_reported_by_path_and_other_splits_still_read(
    store: LocalStore, home: Path
) -> None:
    """Skipping it answered a different result with exit 0 (issue 14, item 10)."""
    store.write_runs([doc("r1")])
    batch = pa.record_batch({"sample_id": ["a", "b"], "loss": [0.1, 0.2]})
    store.write_samples("r1", "exp", "val", [batch])
    store.write_samples("r1", "exp", "test", [batch])
    broken = home / "samples" / "r1" / "test.parquet"
    broken.write_bytes(b"not parquet at all")
    for sort in ("loss", None):
        with pytest.raises(StoreUnavailable, match="damaged") as caught:
            list(store.search_samples(SampleQuery(run_id="r1", sort=sort)))
        assert str(broken) in str(caught.value)
    rows = list(store.search_samples(SampleQuery(run_id="r1", split="val", sort="loss")))
    assert [(r["split"], r["sample_id"]) for r in rows] == [("val", "a"), ("val", "b")]


def test_corrupt_step_line_is_skipped_with_a_warning(
    store: LocalStore, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store.write_runs([doc("r1")])
    store.write_steps("r1", "exp", [{"seq": 0, "step": 0}])
    with open(home / "steps" / "r1.jsonl", "a") as steps:
        steps.write('{"seq": 1, "st')
    with caplog.at_level(logging.WARNING):
        assert [s["seq"] for s in store.steps(StepRange(run_id="r1"))] == [0]
    assert any("r1.jsonl" in r.getMessage() for r in caplog.records)


def test_unusable_folder_is_store_unavailable_naming_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the warehouse should be")
    with LocalStore(blocker) as store, pytest.raises(StoreUnavailable, match="not-a-folder"):
        store.write_runs([doc("r1")])


@pytest.mark.parametrize("run_id", ["../escape", "a/b", ".hidden", "", "x" * 201])
def test_run_ids_that_cannot_name_a_file_are_refused(store: LocalStore, run_id: str) -> None:
    with pytest.raises(InvalidRecord, match="run_id"):
        store.write_runs([doc(run_id)])


def test_samples_with_types_widening_across_batches_are_stored(store: LocalStore) -> None:
    store.write_runs([doc("r1")])
    batches = [
        pa.record_batch({"sample_id": [1, 2], "loss": pa.array([None, None], pa.null())}),
        pa.record_batch({"sample_id": [3], "loss": [1], "label": ["x"]}),
        pa.record_batch({"sample_id": [4], "loss": [0.5]}),
    ]
    assert store.write_samples("r1", "exp", "val", batches) == 4
    rows = list(store.search_samples(SampleQuery(run_id="r1", sort="loss", limit=None)))
    assert [(r["sample_id"], r["loss"], r["label"]) for r in rows] == [
        ("4", 0.5, None),
        ("3", 1.0, "x"),
        ("1", None, None),
        ("2", None, None),
    ]


@pytest.mark.slow
def test_a_million_sample_rows_stream_without_python_objects_per_row(
    store: LocalStore,
) -> None:
    store.write_runs([doc("big")])

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, 1_000_000, 100_000):
            ids = pa.array(np.arange(start, start + 100_000)).cast(pa.string())
            yield pa.record_batch({"sample_id": ids, "loss": np.linspace(0, 1, 100_000)})

    tracemalloc.start()
    try:
        written = store.write_samples("big", "exp", "val", batches())
        rows = store.search_samples(SampleQuery(run_id="big", split="val", limit=None))
        first = [next(rows) for _ in range(10)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert written == 1_000_000
    assert [r["sample_id"] for r in first] == [str(i) for i in range(10)]
    assert peak < 20 * 2**20, f"Python objects peaked at {peak / 2**20:.0f} MiB"


def test_top_samples_of_a_large_file_come_from_all_rows(store: LocalStore) -> None:
    store.write_runs([doc("r1")])
    values = np.random.default_rng(7).random(50_000)
    ids = pa.array(np.arange(50_000)).cast(pa.string())
    store.write_samples("r1", "exp", "val", [pa.record_batch({"sample_id": ids, "acc": values})])
    query = SampleQuery(run_id="r1", split="val", sort="acc", order="desc", limit=5)
    got = [r["acc"] for r in store.search_samples(query)]
    assert got == sorted(values.tolist(), reverse=True)[:5]


def test_steps_of_a_run_without_steps_are_empty(store: LocalStore) -> None:
    store.write_runs([doc("r1")])
    assert list(store.steps(StepRange(run_id="r1"))) == []


def test_files_are_written_atomically_with_no_tmp_left_on_failure(
    store: LocalStore, home: Path
) -> None:
    store.write_runs([doc("r1")])

    def broken() -> Iterator[pa.RecordBatch]:
        yield pa.record_batch({"sample_id": ["a"]})
        raise RuntimeError("the producer died")

    with pytest.raises(RuntimeError, match="producer died"):
        store.write_samples("r1", "exp", "val", broken())
    assert not (home / "samples" / "r1" / "val.parquet").exists()
    assert not list(home.rglob("*.tmp"))
    assert os.listdir(home / "samples" / "r1") == []


def test_a_warehouse_whose_catalog_cannot_be_written_is_still_queried(
    home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with LocalStore(home) as store:
        store.write_runs([doc(f"r{i}") for i in range(3)])

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise PermissionError(13, "Permission denied", str(home / "catalog"))

    monkeypatch.setattr("warehouse.stores.local_catalog_files.pq.write_table", refuse)
    with LocalStore(home) as store, caplog.at_level(logging.WARNING):
        assert len(store.search_runs(RunQuery())) == 3
        assert len(store.search_runs(RunQuery(filter="run_id:r1"))) == 1
    assert not caplog.records  # a reader never tries to store the catalog (issue 25, item 5)


def test_projections_read_from_columns_equal_the_documents(store: LocalStore) -> None:
    """over-time and best ask for a few fields of every run: the catalog answers them from its
    columns, and the answer must be what projecting the documents gives, nulls included."""
    runs = [
        doc("r1", "a", 0.25, ended_at="2026-01-02T03:04:05Z", project="p"),
        doc("r2", "b", 0.5, ended_at="2026-01-02T03:04:05.120000Z", status="failed"),
        doc("r3", "a", 0.75),  # not ended: ended_at null
        {**doc("r4", "b"), "metrics": {"train": {"acc": 1.0}}},  # no val.acc
    ]
    store.write_runs(runs)
    fields = ("run_id", "experiment", "status", "project", "ended_at", "metrics.val.acc")
    fast = store.search_runs(RunQuery(sort=(("run_id", "asc"),), fields=fields))
    # a field only the documents hold (a nested config value) makes the store parse them all
    slow = store.search_runs(RunQuery(sort=(("run_id", "asc"),), fields=(*fields, "config")))
    for projected in slow:
        projected.pop("config", None)
    assert fast == slow
    assert fast[0]["ended_at"] == "2026-01-02T03:04:05Z"
    assert fast[2]["ended_at"] is None
    assert "metrics" not in fast[3]
    assert fast[1]["status"] == "failed"


def test_a_time_written_with_an_offset_is_answered_in_utc(store: LocalStore) -> None:
    store.write_runs([doc("r1", ended_at="2026-03-01T14:00:00+02:00")])
    (run,) = store.search_runs(RunQuery(fields=("run_id", "ended_at")))
    assert run == {"run_id": "r1", "ended_at": "2026-03-01T12:00:00Z"}
