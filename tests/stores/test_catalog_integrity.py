"""The run catalog never answers from damaged bytes, never writes on a read, never blocks a
reader (issue 25, items 3, 4 and 5).

The truth is computed from the run files (``runs/*.json``) directly; every answer the store
gives after a file is damaged must equal it, or be an error naming the file and the remedy.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from warehouse.errors import StoreUnavailable
from warehouse.stores import local_catalog_files
from warehouse.stores.base import RankQuery, RunQuery, SampleQuery
from warehouse.stores.local import LocalStore

REPO = Path(__file__).resolve().parents[2]


def doc(run_id: str, experiment: str, acc: float, **extra: Any) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "experiment": experiment,
        "status": "completed",
        "started_at": "2026-01-01T00:00:00Z",
        "ended_at": f"2026-01-01T00:{int(acc * 50):02d}:00Z",
        "updated_at": "2026-01-01T01:00:00Z",
        "metrics": {"val": {"acc": acc}},
        "note": f"run {run_id} — ünïcode so that a flipped byte can break UTF-8",
        **extra,
    }


def truth(home: Path) -> tuple[dict[str, float], dict[str, tuple[str, float]]]:
    """(run id -> val.acc, experiment -> (best run, its acc)) read from the run files."""
    accs: dict[str, float] = {}
    best: dict[str, tuple[str, float]] = {}
    for path in sorted((home / "runs").glob("*.json")):
        d = json.loads(path.read_text())
        acc = d["metrics"]["val"]["acc"]
        accs[d["run_id"]] = acc
        held = best.get(d["experiment"])
        if held is None or acc > held[1]:
            best[d["experiment"]] = (d["run_id"], acc)
    return accs, best


def answers(home: Path) -> tuple[dict[str, float], dict[str, tuple[str, float]]]:
    with LocalStore(home) as store:
        docs = store.search_runs(RunQuery(limit=None))  # whole documents: read from _doc
        accs = {d["run_id"]: d["metrics"]["val"]["acc"] for d in docs}
        ranked = store.best_per_experiment(RankQuery("metrics.val.acc", "max"))
        best = {r.experiment: (r.run["run_id"], r.score) for r in ranked}
    return accs, best


@pytest.fixture
def catalog(home: Path) -> Path:
    """12 runs compacted, 3 of them written again since (journaled)."""
    with LocalStore(home, compact_after=1000) as store:
        store.write_runs([doc(f"r{i:02d}", f"e{i % 3}", 0.3 + i / 40) for i in range(12)])
        store.compact()
        store.write_runs([doc(f"r{i:02d}", f"e{i % 3}", 0.9 - i / 100) for i in (1, 5, 7)])
    return home / "catalog"


@pytest.mark.parametrize("name", ["runs.arrow", "runs.parquet", "manifest.json", "journal"])
def test_a_flipped_bit_in_any_catalog_file_gives_the_true_answer_or_names_the_file(
    home: Path, catalog: Path, name: str
) -> None:
    """Before: one bit of runs.arrow changed the leaderboard, with exit 0 (the drills)."""
    expected = truth(home)
    assert answers(home) == expected
    path = catalog / name
    original = path.read_bytes()
    step = max(1, len(original) // 400)
    reported: list[str] = []
    for offset in range(0, len(original), step):
        for bit in (0, 5):
            damaged = bytearray(original)
            damaged[offset] ^= 1 << bit
            path.write_bytes(bytes(damaged))
            try:
                got = answers(home)
            except StoreUnavailable as exc:
                reported.append(str(exc))
                continue
            assert got == expected, f"{name}: bit {bit} of byte {offset} changed the answer"
    path.write_bytes(original)
    assert answers(home) == expected
    assert reported == []  # readers fall back to another copy, and say so in a warning


@pytest.mark.parametrize("width", [1, 3])
def test_a_document_whose_bytes_changed_is_read_from_its_run_file_and_the_file_named(
    home: Path, catalog: Path, width: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: a multi-byte flip raised a UnicodeDecodeError naming no file (exit 70). The
    file checksum leaves the documents' bytes to each document's own CRC: a changed one is
    read from its run file, with a warning naming runs.arrow and the remedy."""
    import logging

    arrow = catalog / "runs.arrow"
    data = bytearray(arrow.read_bytes())
    at = data.find("ünïcode".encode())
    assert at > 0
    data[at : at + width] = bytes(b ^ 0xFF for b in data[at : at + width])
    arrow.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        assert answers(home) == truth(home)
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert f"{arrow} is damaged" in warned
    assert "warehouse compact --rebuild" in warned
    (catalog.parent / "runs" / "r00.json").unlink()  # and no run file to read instead
    with LocalStore(home) as store:
        table = store._catalog.table()
        assert table is not None
        rows = __import__("numpy").arange(table.num_rows)
        if "r00" in table.column("run_id").to_pylist():  # still in the catalog's base
            with pytest.raises(StoreUnavailable, match=r"runs\.arrow is damaged"):
                store._catalog.texts(table, rows)


def test_a_journal_line_whose_id_flipped_to_another_run_is_not_believed(
    home: Path, catalog: Path
) -> None:
    """``r05`` -> ``r04``: the old code read r04 again and kept r05's older row."""
    journal = catalog / "journal"
    text = journal.read_text()
    assert "r05 " in text
    journal.write_text(text.replace("r05 ", "r04 "))
    assert answers(home) == truth(home)


def test_two_readers_at_once_on_a_read_only_home_neither_block_nor_write(
    home: Path, catalog: Path
) -> None:
    """Readers used to take the catalog's lock exclusively: one query waited for another.
    Here the lock is held shared (as by a reader loading) while two CLI queries run at once;
    both must finish, and nothing in the folder may change."""
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in home.rglob("*") if p.is_file()}
    for path in [home, *home.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(REPO),
        "WAREHOUSE_HOME": str(home),
        "WAREHOUSE_CONSOLE": "0",
        "HOME": str(home.parent),
    }
    fd = os.open(catalog / "lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # a reader in the middle of loading
        readers = [
            subprocess.Popen(
                [sys.executable, "-m", "warehouse", "query", "runs", "-n", "100", "-f", "json"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outputs = [r.communicate(timeout=300) for r in readers]  # a deadlock guard only
    finally:
        os.close(fd)
        for path in [home, *home.rglob("*")]:
            with contextlib.suppress(OSError):
                path.chmod(0o755 if path.is_dir() else 0o644)
    for reader, (out, err) in zip(readers, outputs, strict=True):
        assert reader.returncode == 0, err
        assert {r["run_id"] for r in json.loads(out)} == set(truth(home)[0])
    after = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in home.rglob("*") if p.is_file()}
    assert after == before


def test_a_failing_background_compaction_is_not_restarted_by_every_write(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each failure doubles the wait before the next compaction starts (counted spawns)."""
    spawned: list[list[str]] = []

    class Spy:
        def __init__(self, args: list[str], **kwargs: Any) -> None:
            spawned.append(args)

    monkeypatch.setattr(local_catalog_files.subprocess, "Popen", Spy)
    clock = [1_000_000.0]
    monkeypatch.setattr(local_catalog_files.time, "time", lambda: clock[0])
    catalog = home / "catalog"
    with LocalStore(home, compact_after=100) as store:
        store.write_runs([doc(f"r{i}", "e", i / 100) for i in range(100)])
        assert len(spawned) == 1
        assert spawned[0][1] == "-P"  # the user's folder is not on the child's path
        for failures in (1, 2, 3):
            local_catalog_files.note_compaction(catalog, None, ok=False)
            store.write_runs([doc("r2", "e", 0.3)])
            assert len(spawned) == failures  # within the back-off: none started
            clock[0] += 2.0**failures + 1
            store.write_runs([doc("r2", "e", 0.3)])
            assert len(spawned) == failures + 1  # the wait is over: one more try
        local_catalog_files.note_compaction(catalog, None, ok=True)
        store.write_runs([doc("r3", "e", 0.3)])
        assert len(spawned) == 5  # success forgets the failures


def test_a_deleted_samples_file_is_an_error_naming_it(home: Path) -> None:
    """Before: exit 0 and no row, while the run said it had 200."""
    import pyarrow as pa

    with LocalStore(home) as store:
        store.write_runs([{**doc("r0", "e", 0.5), "sample_counts": {"val": 200}}])
        rows = [{"sample_id": str(i), "loss": i / 7} for i in range(200)]
        store.write_samples("r0", "e", "val", [pa.RecordBatch.from_pylist(rows)])
    path = home / "samples" / "r0" / "val.parquet"
    path.unlink()
    for split in ("val", None):
        for sort in (None, "loss"):
            with LocalStore(home) as store, pytest.raises(StoreUnavailable) as raised:
                list(store.search_samples(SampleQuery(run_id="r0", split=split, sort=sort)))
            assert f"{path} is missing" in str(raised.value)
            assert "200 val rows" in str(raised.value)
    with LocalStore(home) as store, pytest.raises(StoreUnavailable, match="is missing"):
        list(store.sample_batches("r0", "val"))


def test_one_run_with_huge_params_adds_at_most_the_typed_limit_of_columns(home: Path) -> None:
    """Before: 100,000 config keys made 100,000 catalog columns, and every query paid."""
    from warehouse.stores.elastic_templates import MAX_TYPED_PARAMS

    params = {f"k{i:05d}": i for i in range(3 * MAX_TYPED_PARAMS)}
    with LocalStore(home) as store:
        store.write_runs([doc("huge", "e", 0.5, params=params), doc("small", "e", 0.4)])
        store.compact()
        table = store._catalog.table()
        assert table is not None
        typed = [c for c in table.schema.names if c.startswith("params.")]
        assert len(typed) == MAX_TYPED_PARAMS
        late = f"params.k{3 * MAX_TYPED_PARAMS - 1:05d}"  # kept out of the columns
        found = store.search_runs(RunQuery(filter=f"{late}:{3 * MAX_TYPED_PARAMS - 1}"))
        assert [r["run_id"] for r in found] == ["huge"]
        (whole,) = store.search_runs(RunQuery(filter="run_id:huge"))
        assert whole["params"] == params
