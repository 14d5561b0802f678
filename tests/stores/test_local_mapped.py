"""The run catalog mapped, not loaded (issue 16): a view reads only the columns it needs.

Compaction writes ``catalog/runs.arrow`` (uncompressed Arrow IPC) beside ``runs.parquet``;
readers memory-map it, so a column costs memory and time only when a view touches it. The
work is counted, never timed: bytes of the file the process has mapped in (the kernel's
``/proc/self/smaps``), bytes Arrow allocated, directory listings made.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from warehouse.models import Run
from warehouse.stores import local_catalog, local_catalog_files
from warehouse.stores.base import RankQuery, RunQuery
from warehouse.stores.local import LocalStore

ROOT = Path(__file__).resolve().parents[2]


def wide_doc(i: int, experiment: str) -> dict[str, Any]:
    """A run with a wide config: ~8 KB of document, 20 params columns."""
    config = {f"layer{k}": {"width": i % 7 + k, "note": "x" * 100} for k in range(60)}
    params = {f"layer{k}.width": i % 7 + k for k in range(20)}
    run = Run(
        run_id=f"run{i:05d}",
        experiment=experiment,
        config=config,
        params=params,
        metrics={"val": {"acc": (i * 7919 % 1000) / 1000}},
    )
    return run.to_doc()


_PROBE = """
import json, sys
import pyarrow as pa
from warehouse.query import views
from warehouse.stores.local import LocalStore

def mapped_rss(name):
    kib, inside = 0, False
    for line in open('/proc/self/smaps'):
        head = line.split()
        if head and '-' in head[0] and len(head) >= 5:
            inside = len(head) > 5 and head[5].endswith(name)
        elif inside and head[0] == 'Rss:':
            kib += int(head[1])
    return kib * 1024

with LocalStore(sys.argv[1]) as store:
    rows = views.leaderboard(store, 'val.acc', 'max')
    table = store._catalog.table()
    print(json.dumps({
        'rows': len(rows),
        'mapped': mapped_rss('runs.arrow'),
        'allocated': pa.default_memory_pool().max_memory(),
        'table_bytes': table.nbytes,
    }))
"""


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="counts with Linux's smaps")
def test_a_leaderboard_maps_in_only_the_columns_it_reads(home: Path) -> None:
    with LocalStore(home) as store:
        docs = [wide_doc(i, f"exp{i % 4}") for i in range(3000)]
        for start in range(0, len(docs), 500):
            store.write_runs(docs[start : start + 500])
        store.compact()
    size = (home / "catalog" / "runs.arrow").stat().st_size
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(home)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    got = json.loads(proc.stdout)
    assert got["rows"] == 4
    assert got["table_bytes"] > 20_000_000  # the whole catalog, as a table
    assert size > got["table_bytes"]
    # experiment, the metric, ended_at, run_id, 4 documents and the ends of each column's
    # offsets (opening checks them), the kernel mapping up to 64 KiB around each page read
    assert got["mapped"] < size // 20, got
    assert got["allocated"] < got["table_bytes"] // 20, got  # no column copied whole


def test_compaction_writes_both_files_of_one_generation(home: Path) -> None:
    with LocalStore(home) as store:
        store.write_runs([wide_doc(i, "e") for i in range(5)])
        store.compact()
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = pq.read_schema(home / "catalog" / "runs.parquet").metadata
    with pa.ipc.open_file(pa.memory_map(str(home / "catalog" / "runs.arrow"))) as reader:
        arrow = reader.schema.metadata
    assert parquet[local_catalog_files.GENERATION] == arrow[local_catalog_files.GENERATION]


@pytest.mark.parametrize("damage", ["older", "truncated", "garbage", "missing"])
def test_a_stale_or_damaged_arrow_file_falls_back_to_parquet(home: Path, damage: str) -> None:
    arrow = home / "catalog" / "runs.arrow"
    with LocalStore(home) as store:
        store.write_runs([wide_doc(i, "e") for i in range(5)])
        store.compact()
        shutil.copy(arrow, home / "old.arrow")
        store.write_runs([wide_doc(i, "f") for i in range(5, 8)])
        store.compact()
        expected = store.search_runs(RunQuery(limit=None))
        bests = store.best_per_experiment(RankQuery("metrics.val.acc", "max"))
    if damage == "older":  # e.g. a reader between the two renames of a compaction
        shutil.copy(home / "old.arrow", arrow)
    elif damage == "truncated":
        arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])
    elif damage == "garbage":
        arrow.write_bytes(b"ARROW1" + b"\0" * 100)
    else:
        arrow.unlink()
    with LocalStore(home) as store:
        assert store.search_runs(RunQuery(limit=None)) == expected
        assert store.best_per_experiment(RankQuery("metrics.val.acc", "max")) == bests
    assert len(expected) == 8
    assert {b.experiment for b in bests} == {"e", "f"}


def test_journaled_runs_replace_rows_of_the_mapped_catalog(home: Path) -> None:
    with LocalStore(home, compact_after=1000) as store:
        store.write_runs([wide_doc(i, "e") for i in range(10)])
        store.compact()
        better = {**wide_doc(3, "e"), "metrics": {"val": {"acc": 2.0}}}
        store.write_runs([better, wide_doc(10, "g")])  # journaled, not compacted
    with LocalStore(home) as store:
        best = store.best_per_experiment(RankQuery("metrics.val.acc", "max"))
        table = store._catalog.table()
        assert table is not None
        assert table.num_rows == 11
    assert [(b.experiment, b.run["run_id"], b.run_count) for b in best] == [
        ("e", "run00003", 10),
        ("g", "run00010", 1),
    ]


def test_runs_listing_is_skipped_while_runs_is_as_compaction_left_it(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checking the catalog against ``runs/`` lists the folder (100k runs: ~150 ms); while
    ``runs/`` is as the last compaction listed it, the listing would say nothing new."""
    with LocalStore(home) as store:
        store.write_runs([wide_doc(i, "e") for i in range(4)])
        store.compact()
    listings: list[Path] = []
    real = local_catalog._run_ids

    def counting(folder: Path) -> set[str]:
        listings.append(folder)
        return real(folder)

    monkeypatch.setattr(local_catalog, "_run_ids", counting)
    with LocalStore(home) as store:
        assert len(store.search_runs(RunQuery(limit=None))) == 4
    assert listings == []
    # a run file whose journal line was lost: runs/ changed, so it is listed and found
    (home / "runs" / "lost.json").write_text(
        json.dumps(Run(run_id="lost", experiment="e").to_doc())
    )
    with LocalStore(home) as store:
        assert len(store.search_runs(RunQuery(limit=None))) == 5
    assert listings == [home / "runs"]


def test_documents_read_from_the_file_equal_the_column(home: Path) -> None:
    """Documents are read with pread at their offsets in runs.arrow (not through the
    mapping); slices of the mapped table and journaled rows in memory read the same."""
    import numpy as np

    with LocalStore(home, compact_after=1000) as store:
        store.write_runs([wide_doc(i, "e") for i in range(40)])
        store.compact()
        store.write_runs([{**wide_doc(i, "e"), "note": "again"} for i in (3, 17, 30)])
    with LocalStore(home) as store:
        table = store._catalog.table()
        assert table is not None
        column = table.column("_doc")
        assert column.num_chunks > 2  # slices of the mapped table, then the journaled rows
        rows = np.random.default_rng(7).permutation(table.num_rows)
        assert store._catalog.texts(table, rows) == column.take(rows).to_pylist()
        base = store._catalog._base
        assert base is not None
        assert base.mapped is not None
        held = [base.mapped.holds(c.buffers()[2]) for c in column.chunks]
        assert any(held)
        assert not all(held)
