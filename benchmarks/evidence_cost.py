"""What the evidence costs: intervals at recording time, and ``diff``/``check`` at 100k samples.

    python benchmarks/evidence_cost.py            # 1M sample rows, 2 runs x 100k samples
    python benchmarks/evidence_cost.py --rows 200000 --rounds 3

Printed, as medians with the machine's load average:

- ``log_samples`` of 1M rows (sample_id, a 0/1 ``correct``, a float ``loss``, a ``label``) into
  a fresh local warehouse, and the part of it that is the intervals: the same batches folded
  into the per-column summaries and each metric's interval computed (what ``log_samples``
  adds for ``metrics_ci``). Target (issue 17): the intervals <= 5 % of ``log_samples``.
- ``warehouse query diff`` and ``warehouse check`` between two runs of 100k samples each
  (warm, in process, local store). Target: <= 100 ms warm.

Each figure is checked against numpy over the same values, so a fast wrong answer fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def median_time(fn: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--diff-rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import numpy as np
    import pyarrow as pa

    import warehouse
    from warehouse.models import resolve_metric
    from warehouse.query import evidence, gate
    from warehouse.query.distributions import clopper_pearson
    from warehouse.query.summary import SplitSummary
    from warehouse.stores.local import LocalStore

    load_before = os.getloadavg()
    rng = np.random.default_rng(17)
    n = args.rows
    correct = rng.random(n) < 0.9
    loss = rng.random(n)
    table = pa.table(
        {
            "sample_id": pa.array([f"s{i}" for i in range(n)]),
            "correct": pa.array(correct),
            "loss": pa.array(loss),
            "label": pa.array([str(i % 10) for i in range(n)]),
        }
    )
    batches = table.to_batches(max_chunksize=65_536)

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["WAREHOUSE_HOME"] = str(Path(tmp) / "wh")
        os.environ["WAREHOUSE_CONSOLE"] = "0"
        os.environ["WAREHOUSE_CAPTURE_GIT_DIFF"] = "0"
        os.environ["WAREHOUSE_SYSTEM_INTERVAL_S"] = "0"
        recorded = {}

        def log_once() -> None:
            with warehouse.start_run("bench", cwd=tmp) as run:
                run.log_metrics("val", {"acc": float(correct.mean()), "loss": float(loss.mean())})
                run.log_samples("val", table)
            recorded["run"] = run

        t_log = median_time(log_once, args.rounds)
        ci = recorded["run"].record.metrics_ci["val"]

        def intervals_only() -> None:
            summary = SplitSummary()
            for batch in batches:
                summary.add(batch)
            summary.metrics_ci({"acc": float(correct.mean()), "loss": float(loss.mean())})

        t_ci = median_time(intervals_only, args.rounds)
        low, high = clopper_pearson(int(correct.sum()), n)
        assert abs(ci["acc"]["low"] - low) < 1e-12
        assert abs(ci["acc"]["high"] - high) < 1e-12

        # diff / check: two runs x diff_rows samples, 3 % of answers flipped
        m = args.diff_rows
        base = rng.random(m) < 0.9
        other = base.copy()
        flip = rng.choice(m, size=m * 3 // 100, replace=False)
        other[flip] = ~other[flip]
        store = LocalStore(Path(tmp) / "wh")
        ids = {}
        for name, values in (("a", base), ("b", other)):
            with warehouse.start_run(f"diff-{name}", cwd=tmp) as run:
                run.log_metrics("val", {"acc": float(values.mean())})
                run.log_samples(
                    "val",
                    pa.table({"sample_id": [f"s{i}" for i in range(m)], "correct": values}),
                )
            ids[name] = run.run_id
        metric = resolve_metric("val.acc")
        a = evidence.resolve_run(store, ids["a"], metric)
        b = evidence.resolve_run(store, ids["b"], metric)
        found = evidence.diff(store, a, b, metric=metric)  # warm the caches once
        assert len(found.rows) == len(flip)
        t_diff = median_time(lambda: evidence.diff(store, a, b, metric=metric), 5)
        t_check = median_time(lambda: gate.check(store, b, a, metric=metric), 5)
        store.close()

    load_after = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print(f"log_samples, {n:,} rows:                 {t_log * 1000:8.1f} ms")
    print(
        f"  of which intervals (summaries + CI):  {t_ci * 1000:8.1f} ms "
        f"({100 * t_ci / t_log:.1f} % of log_samples; target <= 5 %)"
    )
    print(f"diff, 2 runs x {m:,} samples, warm:   {t_diff * 1000:8.1f} ms (target <= 100 ms)")
    print(f"check, 2 runs x {m:,} samples, warm:  {t_check * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
