"""A catalog file damaged in place (bit rot: same inode, size and mtime) under a writer
that has it mapped: its next compaction must not fold the damaged documents into the next
catalog (it did, into both files, where the Parquet fallback then served them unchecked).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from warehouse.stores.base import RunQuery
from warehouse.stores.local import LocalStore
from warehouse.stores.local_catalog_files import _doc_bytes
from warehouse.stores.local_docs import mismatched

ROOT = Path(__file__).resolve().parents[2]


def _record(home: Path, n: int) -> None:
    with LocalStore(home, compact_after=10**9) as store:
        store.write_runs(
            [
                {
                    "run_id": f"r{i:03d}",
                    "experiment": f"e{i % 5}",
                    "status": "completed",
                    "updated_at": "2026-01-01T00:00:00Z",
                    "ended_at": "2026-01-01T00:00:00Z",
                    "metrics": {"val": {"acc": i / n}},
                }
                for i in range(n)
            ]
        )
        store.compact()


def _flip_in_place(path: Path, at: int) -> None:
    """One bit flipped, the file's inode, size and times kept (as bit rot leaves them)."""
    st = path.stat()
    with path.open("r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ (1 << (at % 8))]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def answers(store: LocalStore) -> list[tuple[str, str, float]]:
    docs = store.search_runs(RunQuery(limit=None, sort=(("run_id", "asc"),)))
    return [(d["run_id"], d["experiment"], d["metrics"]["val"]["acc"]) for d in docs]


def test_a_compaction_reads_a_damaged_document_from_its_run_file(tmp_path: Path) -> None:
    home = tmp_path / "wh"
    _record(home, 30)
    arrow = home / "catalog" / "runs.arrow"
    begin, end = _doc_bytes(arrow) or (0, 0)
    assert end > begin
    rng = random.Random(5)
    with LocalStore(home, compact_after=10**9) as writer:
        truth = answers(writer)  # the writer's base is read (and mapped) now
        for _ in range(3):
            _flip_in_place(arrow, rng.randrange(begin, end))
        writer.compact()  # folds its base: the damaged texts must not be carried on
    for name in ("runs.arrow", "runs.parquet"):
        import pyarrow.parquet as pq
        from pyarrow import ipc, memory_map

        path = home / "catalog" / name
        table = (
            ipc.open_file(memory_map(str(path))).read_all()
            if name.endswith(".arrow")
            else pq.read_table(path)
        )
        assert mismatched(table) == [], name
    with LocalStore(home) as fresh:
        assert answers(fresh) == truth
