"""``run.log_samples`` of 1M rows: from a generator of dicts, from a list of dicts, from an
Arrow table (the peer: the same rows already columnar), into the local store (issue 16).

    python benchmarks/log_samples.py                 # 1,000,000 rows, 3 repeats
    python benchmarks/log_samples.py --rows 200000 --repeats 5

Each repeat records one run in a fresh warehouse and logs the same rows three ways (three
splits). Times are the ``log_samples`` call alone (the run's start and end are not in them),
medians over the repeats, with the load average. Also printed: ``pa.Table.from_pylist`` of the
same rows (what turning dicts into columns costs in Arrow's own C++ code) and writing the
table with pyarrow's ``pq.write_table`` (snappy), the floors of the two halves of the work.
Target: from a generator, ≤ 1.5 s for 1M rows.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def make_rows(n: int) -> list[dict[str, Any]]:
    rng = random.Random(0)
    return [
        {
            "sample_id": f"s{i:07d}",
            "label": i % 10,
            "pred": (i * 7) % 10,
            "correct": (i % 10) == ((i * 7) % 10),
            "loss": rng.random(),
        }
        for i in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ["WAREHOUSE_CONSOLE"] = "0"
    import pyarrow as pa
    import pyarrow.parquet as pq

    from warehouse.recording.recorder import start_run
    from warehouse.settings import load

    rows = make_rows(args.rows)
    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {}

    def timed(name: str, call: Any, *call_args: Any) -> None:
        started = time.perf_counter()
        call(*call_args)
        times.setdefault(name, []).append(time.perf_counter() - started)

    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="log-samples-") as home:
            settings = load(cli={"home": home, "console": False})
            run = start_run(experiment="bench", config={}, settings=settings)
            timed("generator of dicts", run.log_samples, "val", (r for r in rows))
            timed("list of dicts", run.log_samples, "test", rows)
            table = pa.Table.from_pylist(rows)
            timed("Arrow table (peer)", run.log_samples, "train", table)
            run.end()
            timed("pa.Table.from_pylist (floor)", pa.Table.from_pylist, rows)
            timed("pq.write_table (floor)", pq.write_table, table, Path(home) / "floor.parquet")
    print(f"{args.rows:,} rows, {args.repeats} repeats, {os.cpu_count()} CPUs")
    for name, values in times.items():
        print(f"{name:32} {statistics.median(values):6.2f} s")
    print(f"load {load_before:.2f} -> {os.getloadavg()[0]:.2f}; target: generator <= 1.5 s for 1M")


if __name__ == "__main__":
    main()
