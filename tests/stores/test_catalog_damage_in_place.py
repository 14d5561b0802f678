"""A catalog file damaged in place (bit rot: same inode, size and mtime) under a process
that has it mapped: a long-lived reader (an open ``warehouse ui``) neither crashes nor
loses a run, and a writer's next compaction does not fold the damaged documents
into the next catalog (it did, into both files, where the Parquet fallback then served them
unchecked).

The reader's test runs in a child process, so that a regression (a segfault, as a CI run
once had) fails the test instead of killing the suite.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
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


CHILD = """
import json, random, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from tests.stores.test_catalog_damage_in_place import _flip_in_place, answers
from warehouse.stores.base import CountQuery, RankQuery
from warehouse.stores.local import LocalStore
home = Path(sys.argv[1])
rng = random.Random(int(sys.argv[2]))
arrow = home / "catalog" / "runs.arrow"
with LocalStore(home) as reader:
    first = answers(reader)
    for _ in range(60):
        _flip_in_place(arrow, rng.randrange(arrow.stat().st_size))
        reader.best_per_experiment(RankQuery("metrics.val.acc", "max"))
        reader.count_by(CountQuery("experiment"))
        now = answers(reader)
        assert [r[0] for r in now] == [r[0] for r in first]  # every run, in order
print(json.dumps(first))
"""


def test_a_live_reader_survives_its_mapped_catalog_damaged_in_place(tmp_path: Path) -> None:
    """Up to 60 bits flipped anywhere in runs.arrow under an open reader: no crash, every
    run still listed. (A flipped bit in a mapped value can still show a wrong value: the
    bytes are checked when a process opens the file, and a ``_doc`` text when it is read.)"""
    home = tmp_path / "wh"
    _record(home, 60)
    with LocalStore(home) as store:
        truth = answers(store)
    for seed in range(4):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(home), str(seed), str(ROOT)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 0, (seed, out.returncode, out.stderr[-2000:])
        assert [tuple(r) for r in json.loads(out.stdout)] == truth
        _record(home, 60)  # a clean catalog for the next seed


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
