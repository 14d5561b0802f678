"""Per-run recording time into a big warehouse, compaction included (issue 16).

Pre-fills a warehouse with ``--prefill`` synthetic runs (compacted), then records ``--runs``
more, one ``write_runs`` call each, with ``compact_after`` at its default (500), and prints
p50 / p99 / max of the per-run time and the load average. Run it against the code to compare
(``PYTHONPATH=/path/to/checkout``): before issue 16 the writer crossing the threshold rebuilt
the catalog inline; after, a background process does.

    python benchmarks/record_compaction.py --home /tmp/wh-rec --prefill 20000 --runs 2000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import Shape, run_docs

from warehouse.stores.local import LocalStore


def prefill(home: Path, n: int) -> None:
    if (home / "catalog" / "runs.parquet").is_file():
        return
    docs = run_docs(Shape(runs=n, experiments=50, sample_runs=0, samples=0))
    with LocalStore(home, compact_after=10**9) as store:
        for i in range(0, n, 1000):
            store.write_runs(docs[i : i + 1000])
        store.compact()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--prefill", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=2_000)
    args = parser.parse_args()
    base = args.home / "prefilled"
    prefill(base, args.prefill)
    work = args.home / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base, work)
    docs = run_docs(Shape(runs=args.runs, experiments=5, sample_runs=0, samples=0))
    times = []
    with LocalStore(work) as store:
        for doc in docs:
            doc = {**doc, "run_id": f"new-{doc['run_id']}"}
            start = time.perf_counter()
            store.write_runs([doc])
            times.append((time.perf_counter() - start) * 1000)
    lock = work / "catalog" / "compact.lock"
    if lock.exists():  # wait for a background compaction before counting
        from warehouse.stores.local_compaction import wait

        wait(work / "catalog")
    with LocalStore(work) as store:
        from warehouse.stores.base import RunQuery

        found = len(store.search_runs(RunQuery(limit=None, fields=["run_id"])))
    times.sort()
    p99 = times[int(len(times) * 0.99) - 1]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"prefill {args.prefill} + {args.runs} runs: p50 {statistics.median(times):.1f} ms, "
        f"p99 {p99:.1f} ms, max {times[-1]:.1f} ms, runs over 200 ms: "
        f"{sum(t > 200 for t in times)}; {found} runs found; load {load}"
    )


if __name__ == "__main__":
    main()
