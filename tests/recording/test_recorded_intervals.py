"""Every metric with per-sample results gets its 95 % interval on the run, reproducibly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import warehouse
from warehouse.query import stats
from warehouse.stores.local import LocalStore


def stored(home: Path, run_id: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((home / "runs" / f"{run_id}.json").read_text())
    return data


def stored_column(home: Path, run_id: str, split: str, column: str) -> np.ndarray:
    """The column as the store holds it, read back independently of the recorder."""
    with LocalStore(home) as store:
        table = pa.Table.from_batches(list(store.sample_batches(run_id, split, [column])))
    values: np.ndarray = table.column(column).to_numpy(zero_copy_only=False).astype(float)
    return values


def test_accuracy_gets_the_exact_interval_of_its_correct_column(home: Path) -> None:
    rng = np.random.default_rng(0)
    correct = rng.random(2000) < 0.93
    with warehouse.start_run("ci") as run:
        run.log_samples("val", pa.table({"sample_id": range(2000), "correct": correct}))
        run.log_metrics("val", {"acc": float(correct.mean())})
    values = stored_column(home, run.run_id, "val", "correct")
    low, high = stats.clopper_pearson(int(values.sum()), values.size)
    ci = stored(home, run.run_id)["metrics_ci"]["val"]["acc"]  # type: ignore[index]
    assert ci == {
        "low": low,
        "high": high,
        "n": 2000,
        "method": "clopper-pearson",
        "column": "correct",
    }
    assert ci["low"] < correct.mean() < ci["high"]


def test_a_continuous_metric_uses_its_own_column_and_a_seeded_bootstrap(home: Path) -> None:
    rng = np.random.default_rng(1)
    iou = rng.normal(0.6, 0.1, 800)
    rows = [{"sample_id": i, "iou": float(v)} for i, v in enumerate(iou)]
    intervals = []
    for _ in range(2):  # recorded twice under the same run id: the same interval
        with warehouse.start_run("ci", run_id="fixed-run-id") as run:
            run.log_metrics("val", {"iou": float(iou.mean())})
            run.log_samples("val", rows)
        intervals.append(stored(home, run.run_id)["metrics_ci"]["val"]["iou"])  # type: ignore[index]
    assert intervals[0] == intervals[1]
    ci = intervals[0]
    expected = stats.interval(
        stored_column(home, "fixed-run-id", "val", "iou"), "fixed-run-id", "val", "iou"
    )
    assert expected is not None
    assert (ci["low"], ci["high"], ci["method"]) == (expected.low, expected.high, "bootstrap")


def test_metric_columns_say_which_column_a_metric_is_the_mean_of(home: Path) -> None:
    with warehouse.start_run("ci") as run:
        run.log_samples(
            "val",
            [{"sample_id": i, "hit": i % 4 != 0, "correct": True} for i in range(100)],
            metric_columns={"recall": "hit"},
        )
        run.log_metrics("val", {"recall": 0.75, "acc": 1.0, "loss": 0.3})
    cis = stored(home, run.run_id)["metrics_ci"]["val"]  # type: ignore[index]
    assert cis["recall"]["column"] == "hit"
    assert (cis["recall"]["low"], cis["recall"]["high"]) == pytest.approx(
        stats.clopper_pearson(75, 100)
    )
    assert cis["acc"]["column"] == "correct"  # accuracy-like names default to `correct`
    assert "loss" not in cis  # no column the rule can find: no interval rather than a guess
