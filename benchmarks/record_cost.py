"""What the intervals add to recording a run (issue 27, item 12: target <= 10 ms a run).

    python benchmarks/record_cost.py                 # 1,000 samples a run, 40 runs a case
    python benchmarks/record_cost.py --samples 5000 --runs 60

Printed, as medians with the machine's load average, each case recorded into a fresh local
warehouse in this process, alternating so that load changes hit every case alike:

- a run with two metrics and no samples (the peer: what recording costs anyway);
- a run with the same metrics and ``--samples`` per-sample rows (``correct`` 0/1, ``loss``):
  the samples written and both metrics' intervals stored;
- the intervals' own share: the same batches folded into a ``SplitSummary`` and
  ``metrics_ci`` computed (what ``log_samples`` and the run's saves add for ``metrics_ci``).

Each recorded interval is checked against Clopper-Pearson and Student's t over the same
values, so a fast wrong answer fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()

    import numpy as np
    import pyarrow as pa

    import warehouse
    from warehouse.query.distributions import clopper_pearson, t_quantile
    from warehouse.query.summary import SplitSummary

    rng = np.random.default_rng(12)
    n = args.samples
    correct = rng.random(n) < 0.9
    loss = rng.gamma(2.0, 0.2, n)
    metrics = {"acc": float(correct.mean()), "loss": float(loss.mean())}
    table = pa.table({"sample_id": np.arange(n), "correct": correct, "loss": loss})
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update(
            WAREHOUSE_HOME=str(Path(tmp) / "wh"),
            WAREHOUSE_CONSOLE="0",
            WAREHOUSE_CAPTURE_GIT_DIFF="0",
            WAREHOUSE_SYSTEM_INTERVAL_S="0",
        )
        last: dict[str, object] = {}

        def bare() -> None:
            with warehouse.start_run("bench", cwd=tmp) as run:
                run.log_metrics("val", metrics)

        def with_samples() -> None:
            with warehouse.start_run("bench", cwd=tmp) as run:
                run.log_metrics("val", metrics)
                run.log_samples("val", table)
            last["ci"] = run.record.metrics_ci["val"]

        def intervals_only() -> None:
            summary = SplitSummary()
            for batch in table.to_batches():
                summary.add(batch)
            summary.metrics_ci(metrics)

        cases: dict[str, Callable[[], None]] = {
            "run, metrics only": bare,
            f"run, {n:,} samples + intervals": with_samples,
            "  the intervals alone": intervals_only,
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for fn in cases.values():
            fn()  # warm: imports, the store's files
        for _ in range(args.runs):
            for name, fn in cases.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)

    ci = last["ci"]
    assert isinstance(ci, dict)
    low, high = clopper_pearson(int(correct.sum()), n)
    assert abs(ci["acc"]["low"] - low) < 1e-12
    assert abs(ci["acc"]["high"] - high) < 1e-12
    half = t_quantile(0.975, n - 1) * loss.std(ddof=1) / np.sqrt(n)
    assert abs((ci["loss"]["high"] - ci["loss"]["low"]) / 2 - half) < 1e-9
    load_after = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    for name, values in times.items():
        print(f"{name:36s} {statistics.median(values) * 1000:8.2f} ms median of {len(values)}")
    print("target: a recorded run <= 10 ms (median); issue 27: 21.3 ms with intervals, 8.4 without")


if __name__ == "__main__":
    main()
