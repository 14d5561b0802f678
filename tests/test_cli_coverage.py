"""Ranked views rank by the metric the runs were recorded with, and say whom they leave out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import warehouse
from tests.helpers import run_main


@pytest.fixture
def keras_runs(home: Path) -> list[str]:
    """Runs recorded as `warehouse watch --primary-metric val.accuracy` records Keras runs."""
    ids = []
    for i in range(3):
        with warehouse.start_run("keras", primary_metric="val.accuracy") as run:
            run.log_metrics("val", {"accuracy": 0.8 + i / 100})
        ids.append(run.run_id)
    return ids


def test_without_metric_the_runs_own_primary_metric_ranks_them(
    keras_runs: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(["query", "leaderboard", "-f", "json"], monkeypatch, capsys)
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["best_run_id"] == keras_runs[-1]
    assert row["best_score"] == pytest.approx(0.82)
    assert "have no" not in err


def test_a_metric_no_run_has_is_an_error_naming_the_one_to_try(
    keras_runs: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(["query", "leaderboard", "--metric", "val.acc"], monkeypatch, capsys)
    assert code == 2
    assert out == ""
    assert "3 runs have no val.acc; they have val.accuracy (3) -- try --metric val.accuracy" in err


def test_runs_left_out_of_a_ranking_are_counted_on_stderr(
    keras_runs: list[str],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with warehouse.start_run("sklearn") as run:
        run.log_metrics("val", {"acc": 0.9})
    code, out, err = run_main(
        ["query", "leaderboard", "--metric", "val.acc", "-f", "json"], monkeypatch, capsys
    )
    assert code == 0
    assert [row["experiment"] for row in json.loads(out)] == ["sklearn"]
    assert "3 runs have no val.acc; they have val.accuracy (3) -- try --metric val.accuracy" in err
