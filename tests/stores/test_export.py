"""An export read back with pyarrow (or as JSON lines) equals what the store holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from warehouse.history.export import export
from warehouse.models import Run, RunStatus
from warehouse.query import views
from warehouse.query.api import Result
from warehouse.stores.base import StepRange, Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def filled(store: Store) -> list[str]:
    ids = []
    for i, experiment in enumerate(("svm", "svm", "knn")):
        run_id = f"run-{i}"
        store.write_runs(
            [
                Run(
                    run_id=run_id,
                    experiment=experiment,
                    status=RunStatus.COMPLETED,
                    started_at=T0 + timedelta(days=i),
                    ended_at=T0 + timedelta(days=i, hours=1),
                    config={"model": {"C": float(i)}, "seed": i},
                    params={"model.C": float(i), "seed": i},
                    metrics={"val": {"acc": 0.8 + i / 100}},
                    sample_counts={"val": 3},
                ).to_doc()
            ]
        )
        batch = pa.record_batch(
            {"sample_id": ["a", "b", "c"], "correct": [True, False, i > 0], "loss": [0.1, 2.0, 0.5]}
        )
        store.write_samples(run_id, experiment, "val", [batch])
        steps = [
            {
                "seq": s,
                "step": s,
                "@timestamp": f"2026-01-01T00:00:0{s}Z",
                "metrics": {"loss": 1.0 / (s + 1)},
            }
            for s in range(4)
        ]
        store.write_steps(run_id, experiment, steps)
        ids.append(run_id)
    return ids


def test_a_parquet_export_reads_back_equal_to_the_store(
    store: Store, filled: list[str], tmp_path: Path
) -> None:
    done = export(store, tmp_path / "out", filter="experiment:svm")
    assert (done.runs, done.sample_files, done.step_files) == (2, 2, 2)
    runs = pq.read_table(tmp_path / "out" / "runs.parquet")
    expected = Result(views.runs(store, "experiment:svm", ("started_at:asc",), None)).to_arrow()
    assert runs.to_pylist() == expected.to_pylist()
    assert runs.column("metrics.val.acc").to_pylist() == [0.8, 0.81]
    for run_id in ("run-0", "run-1"):
        samples = pq.read_table(tmp_path / "out" / "samples" / run_id / "val.parquet")
        stored = pa.Table.from_batches(list(store.sample_batches(run_id, "val")))
        assert samples.to_pylist() == stored.to_pylist()
        steps = pq.read_table(tmp_path / "out" / "steps" / f"{run_id}.parquet")
        assert (
            steps.to_pylist() == Result(list(store.steps(StepRange(run_id)))).to_arrow().to_pylist()
        )
    assert not (tmp_path / "out" / "samples" / "run-2").exists()  # knn was filtered out


def test_a_jsonl_export_holds_the_whole_records(
    store: Store, filled: list[str], tmp_path: Path
) -> None:
    export(store, tmp_path / "out", fmt="jsonl")
    lines = (tmp_path / "out" / "runs.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == views.runs(
        store, None, ("started_at:asc",), None
    )
    sample_lines = (tmp_path / "out" / "samples" / "run-2" / "val.jsonl").read_text().splitlines()
    assert [json.loads(line)["sample_id"] for line in sample_lines] == ["a", "b", "c"]
