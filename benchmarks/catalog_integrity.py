"""What the run catalog's checks cost, and what a bounded journal saves (issue 25 items 3, 5).

On a synthetic warehouse (``synthetic.py``; 100,000 runs by default):

- **checksums**: opening the stored catalog (``runs.arrow`` mapped, its CRC-32 checked, the
  ``_doc`` bytes left to each document's own CRC) beside the same open with the check
  skipped, and a cold in-process leaderboard (a new store, so a first open) both ways;
- **documents**: 1,000 documents read back through the catalog (each checked against its
  CRC-32) beside reading the same texts unchecked;
- **journal**: a cold leaderboard with 0, 1,000 (the most a journal holds now: writers keep
  it under twice ``compact_after``) and 19,000 journaled runs (what the drills saw when it
  was unbounded), each journaled run read from its run file;
- **whole process**: ``warehouse query leaderboard`` as a user runs it.

Medians of ``--repeat`` runs, with the load average beside them (the machine is shared).

    python benchmarks/catalog_integrity.py                    # 100k runs (built once)
    python benchmarks/catalog_integrity.py --runs 10000 --repeat 7
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def median_s(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return round(statistics.median(times), 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=REPO / "benchmarks" / ".cache")
    args = parser.parse_args()

    import numpy as np

    from warehouse.stores.base import RankQuery
    from warehouse.stores.local import LocalStore
    from warehouse.stores.local_catalog_files import CatalogFiles

    home = args.cache / f"integrity-{args.runs}"
    if not (home / "runs").is_dir():
        synthetic = [sys.executable, str(REPO / "benchmarks" / "synthetic.py")]
        shape = ["--runs", str(args.runs), "--sample-runs", "0", "--samples", "0"]
        subprocess.run([*synthetic, "--home", str(home), *shape], check=True)
    with LocalStore(home) as store:
        store.compact(rebuild=True)  # a catalog of this version, with its manifest
    arrow = home / "catalog" / "runs.arrow"
    rank = RankQuery("metrics.val.acc", "max")

    def leaderboard() -> None:
        with LocalStore(home) as store:
            store.best_per_experiment(rank)

    def open_base() -> None:
        CatalogFiles(home).read_base()

    real_check = CatalogFiles._check
    report: dict[str, Any] = {"runs": args.runs, "runs.arrow_bytes": arrow.stat().st_size}
    report["open_checked_s"] = median_s(open_base, args.repeat)
    report["leaderboard_cold_checked_s"] = median_s(leaderboard, args.repeat)
    CatalogFiles._check = lambda *a, **k: None  # type: ignore[method-assign]
    try:
        report["open_unchecked_s"] = median_s(open_base, args.repeat)
        report["leaderboard_cold_unchecked_s"] = median_s(leaderboard, args.repeat)
    finally:
        CatalogFiles._check = real_check  # type: ignore[method-assign]

    with LocalStore(home) as store:
        table = store._catalog.table()
        assert table is not None
        rows = np.random.default_rng(7).choice(table.num_rows, 1000, replace=False)
        report["docs_1000_checked_s"] = median_s(
            lambda: store._catalog.texts(table, rows), args.repeat
        )
        column = table.column("_doc")
        report["docs_1000_unchecked_s"] = median_s(
            lambda: column.take(rows).to_pylist(), args.repeat
        )

    journal = home / "catalog" / "journal"
    ids = sorted(p.name[: -len(".json")] for p in (home / "runs").glob("*.json"))
    for lines in (0, 1_000, 19_000):
        journal.unlink(missing_ok=True)
        CatalogFiles(home).append(ids[:lines])  # as if those runs had just been written
        report[f"leaderboard_cold_journal_{lines}_s"] = median_s(leaderboard, args.repeat)
    journal.unlink(missing_ok=True)

    env = {**os.environ, "WAREHOUSE_HOME": str(home), "WAREHOUSE_CONSOLE": "0"}
    command = [sys.executable, "-m", "warehouse", "query", "leaderboard", "-f", "json"]
    report["cli_leaderboard_s"] = median_s(
        lambda: subprocess.run(command, env=env, capture_output=True, check=True, cwd=home),
        args.repeat,
    )
    report["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=1))
    if os.environ.get("WAREHOUSE_BENCH_KEEP") != "1" and args.runs < 100_000:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
