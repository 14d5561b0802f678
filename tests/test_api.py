"""The Python API answers exactly what `warehouse query ... --format json` prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import warehouse
from warehouse.cli import main


def cli_json(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: Any) -> Any:
    monkeypatch.setattr(sys, "argv", ["warehouse", "query", *argv, "--format", "json"])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def recorded(home: Path) -> list[str]:
    ids = []
    for experiment, accuracy in (("svm", 0.9), ("svm", 0.8), ("knn", 0.85)):
        with warehouse.start_run(experiment, {"model": experiment, "seed": len(ids)}) as run:
            right = {i for i in range(100) if i < accuracy * 100}
            run.log_samples(
                "val", [{"sample_id": i, "label": i % 3, "correct": i in right} for i in range(100)]
            )
            run.log_metrics("val", {"acc": accuracy})
            run.log_metrics("train", {"acc": 1.0})
            run.log_step(0, loss=1.0)
        ids.append(run.run_id)
    return ids


@pytest.mark.parametrize(
    ("argv", "call"),
    [
        pytest.param(["runs"], lambda: warehouse.runs(), id="runs"),
        pytest.param(["best", "-e"], lambda: warehouse.best(per_experiment=True), id="best"),
        pytest.param(["leaderboard"], lambda: warehouse.leaderboard(), id="leaderboard"),
        pytest.param(["over-time"], lambda: warehouse.over_time(), id="over-time"),
        pytest.param(["decomposition"], lambda: warehouse.decomposition(), id="decomposition"),
        pytest.param(
            ["samples", "--best", "--split", "val", "--sort", "correct"],
            lambda: warehouse.samples(split="val", sort="correct"),
            id="samples",
        ),
        pytest.param(["slices", "--by", "label"], lambda: warehouse.slices("label"), id="slices"),
        pytest.param(["replicates"], lambda: warehouse.replicates(), id="replicates"),
    ],
)
def test_the_api_equals_the_cli_json(
    recorded: list[str],
    argv: list[str],
    call: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert call().to_dicts() == cli_json(argv, monkeypatch, capsys)


def test_run_level_views_by_id_equal_the_cli_too(
    recorded: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b, _ = recorded
    assert warehouse.diff(a, b).to_dicts() == cli_json(["diff", a, b], monkeypatch, capsys)
    assert warehouse.steps(a).to_dicts() == cli_json(["steps", a], monkeypatch, capsys)
    assert warehouse.compare(a, b).to_dicts() == cli_json(["compare", a, b], monkeypatch, capsys)


def test_results_become_arrow_and_pandas_with_dotted_columns(recorded: list[str]) -> None:
    table = warehouse.runs(columns=["run_id", "experiment", "metrics"]).to_arrow()
    assert isinstance(table, pa.Table)
    assert {"run_id", "experiment", "metrics.val.acc", "metrics.train.acc"} <= set(
        table.column_names
    )
    assert sorted(table.column("metrics.val.acc").to_pylist()) == [0.8, 0.85, 0.9]
    frame = warehouse.leaderboard().to_pandas()
    assert list(frame["experiment"]) == ["svm", "knn"]
    assert list(frame.columns[:6]) == [
        "rank", "experiment", "best_score", "best_run_id", "run_count", "ended_at",
    ]  # fmt: skip


def test_pandas_is_optional_only_to_pandas_needs_it(recorded: list[str], home: Path) -> None:
    code = (
        "import sys\n"
        "class NoPandas:  # as if pandas were not installed\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'pandas':\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, NoPandas())\n"
        "import warehouse\n"
        "print(warehouse.leaderboard().to_arrow().num_rows)\n"
        "try:\n"
        "    warehouse.leaderboard().to_pandas()\n"
        "except ImportError:\n"
        "    print('to_pandas needs pandas')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["2", "to_pandas needs pandas"]
