"""Tables that fit a terminal: every table view at 80, 120 and 200 columns.

What a person must see survives a narrow terminal: the identity of each row and the metrics.
Status, times and durations go first, named in the caption with the way to see them. A column
holding one value in every row moves into the caption. No value is ever cut short.

The runs are written here with round values, so the expected cells are plain arithmetic
(``f"{0.9125:.4f}"``), not the code under test.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from warehouse.cli import app
from warehouse.models import Run
from warehouse.stores.local import LocalStore

runner = CliRunner()

EXPERIMENTS = ("digits-random_forest", "digits-logistic_regression", "digits-svm")
WIDTHS = (80, 120, 200)


def _acc(e: int, r: int) -> float:
    """Round values (quarters of a hundredth): exactly four decimals in a table."""
    return 0.9 - 0.0125 * e - 0.0250 * r


def _train(e: int, r: int) -> float:
    return _acc(e, r) + 0.05 + 0.025 * e


def _test(e: int, r: int) -> float:
    return _acc(e, r) - 0.0125 * (e + 1)


def _run(e: int, r: int) -> Run:
    ended = datetime(2025, 3, 1 + e, 10 + r, tzinfo=UTC)
    val = _acc(e, r)
    return Run(
        run_id=f"{e}{r}" + "ab" * 15,
        experiment=EXPERIMENTS[e],
        status="completed",
        started_at=ended - timedelta(seconds=125),
        ended_at=ended,
        duration_s=125.0,
        tags=["wide"],
        hydra={
            "mode": "MULTIRUN",
            "job_name": "train",
            "job_num": 3 * e + r,
            "sweep_id": "5eed5eed5eed",
            "sweep_dir": "/work/multirun/2025-03-01",
            "run_dir": f"/work/multirun/2025-03-01/{3 * e + r}",
        },
        metrics={
            "train": {"acc": _train(e, r), "log_loss": 0.125 * (r + 1)},
            "val": {"acc": val, "log_loss": 0.25 * (r + 1)},
            "test": {"acc": _test(e, r), "log_loss": 0.375 * (r + 1)},
        },
    )


WIDE = [_run(e, r) for e in range(3) for r in range(3)]


@pytest.fixture(autouse=True)
def wide(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    with LocalStore(home) as store:
        store.write_runs([run.to_doc() for run in WIDE])


def table(args: list[str], width: int | None, monkeypatch: pytest.MonkeyPatch) -> str:
    if width is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", str(width))
    result = runner.invoke(app, ["query", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def rows_of(args: list[str]) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["query", *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def left_out(text: str) -> list[str]:
    """The columns the caption says were left out (none when it says nothing)."""
    flat = " ".join(text.split())
    found = re.search(r"left out to fit \d+ columns: (.*?) — ", flat)
    return found.group(1).split(", ") if found else []


def body(text: str) -> list[str]:
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.strip() and set(line.strip()) == {"─"})
    rows = []
    for line in lines[rule + 1 :]:
        if not line.strip() or line.startswith(("same in", "no value", "left out", "≈")):
            break
        rows.append(line)
    return rows


TABLE_VIEWS = {
    "runs": ["runs"],
    "best": ["best"],
    "best-per-experiment": ["best", "--per-experiment"],
    "leaderboard": ["leaderboard"],
    "over-time": ["over-time"],
    "over-time-by-day": ["over-time", "--interval", "day"],
    "decomposition": ["decomposition"],
    "show": ["show", WIDE[0].run_id],
    "compare": ["compare", WIDE[0].run_id, WIDE[4].run_id],
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("view", list(TABLE_VIEWS))
def test_every_table_view_fits_the_width_and_never_cuts_a_value(
    view: str, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = table(TABLE_VIEWS[view], width, monkeypatch)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    assert "…" not in text
    gone = left_out(text)
    for run in WIDE:  # a run id is shown whole (its 12 characters) or not at all
        for shown in re.findall(rf"{run.run_id[:2]}(?:ab)+a?", text):
            assert shown in (run.run_id[:12], run.run_id), shown
    if view in ("show", "compare"):
        return
    for row in rows_of(TABLE_VIEWS[view]):
        experiment = row.get("experiment")
        if experiment is not None and "experiment" not in gone:
            # whole, or broken after - or _ onto more lines: never cut
            pieces = re.split(r"(?<=[-_])", experiment)
            assert experiment in text or all(p in text for p in pieces)


def test_runs_keeps_the_metrics_at_80_columns_and_leaves_out_the_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = table(["runs", "-q", "experiment:digits-svm"], 80, monkeypatch)
    gone = left_out(text)
    assert {"ended_at", "started_at"} <= set(gone)
    assert not {"metrics.train.acc", "metrics.val.acc", "metrics.test.acc"} & set(gone)
    assert "--columns" in " ".join(text.split())  # how to see them
    rows = {line.split()[0]: line for line in body(text)}
    for run in WIDE[6:]:
        line = rows[run.run_id[:12]]
        for split in ("train", "val", "test"):
            assert f"{run.metrics[split]['acc']:.4f}" in line
    wide = table(["runs", "-q", "experiment:digits-svm"], 200, monkeypatch)
    assert left_out(wide) == []
    assert "2025-03-03 12:00:00" in wide  # run 22 ended_at


def test_a_constant_column_moves_into_the_caption(monkeypatch: pytest.MonkeyPatch) -> None:
    text = table(["runs", "-q", "experiment:digits-svm"], 200, monkeypatch)
    flat = " ".join(text.split())
    assert "same in every row:" in flat
    for constant in ("experiment=digits-svm", "status=completed", "duration_s=125"):
        assert constant in flat
    header = text.splitlines()[0]
    assert "status" not in header
    assert "duration_s" not in header
    decomposition = table(["decomposition"], 200, monkeypatch)
    assert "baseline_error=0.0000" in decomposition
    assert "baseline_error" not in decomposition.splitlines()[0]


def test_decomposition_keeps_the_run_its_score_and_the_decomposition_at_80_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 80 columns the six errors and the run id and score do not all fit: every table keeps
    its run id and primary score (issue 32, item 5), then the decomposition itself; the
    train/val/test errors it is made of go first (the caption names them)."""
    text = table(["decomposition"], 80, monkeypatch)
    gone = left_out(text)
    kept = ("run_id", "score", "avoidable_bias", "variance", "dev_overfit")
    assert not set(kept) & set(gone)
    rows = body(text)
    for e, name in enumerate(EXPERIMENTS):
        val = _acc(e, 0)  # each experiment's best run is its first: acc falls with r
        train, test = _train(e, 0), _test(e, 0)
        line = next(line for line in rows if line.startswith(name[:10]))  # may wrap after -_
        cells = line.split()[-5:]  # run id, score, then the decomposition
        assert cells[0] == _run(e, 0).run_id[:12]
        expected = [val, 1 - train, (1 - val) - (1 - train), (1 - test) - (1 - val)]
        assert [float(c) for c in cells[1:]] == pytest.approx(expected, abs=1e-4)


def test_over_time_shows_whole_run_ids_and_the_running_best_at_80_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = table(["over-time"], 80, monkeypatch)
    gone = left_out(text)
    assert "best_so_far" not in gone
    assert "run_id" not in gone
    ids = [line.split()[2] for line in body(text)]  # after the date and the time
    assert ids == [r["run_id"][:12] for r in rows_of(["over-time"])]


def test_leaderboard_keeps_the_scores_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    text = table(["leaderboard"], 80, monkeypatch)
    assert "best_score" not in left_out(text)
    for row, line in zip(rows_of(["leaderboard"]), body(text), strict=True):
        assert row["experiment"] in line
        assert f"{row['best_score']:.4f}" in line


def test_show_as_a_table_has_the_hydra_job_and_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    run = WIDE[4]
    text = table(["show", run.run_id[:8]], None, monkeypatch)
    lines = text.splitlines()
    at = lines.index(next(line for line in lines if line.strip() == "hydra"))
    section = {}
    for line in lines[at + 1 :]:
        if not line.strip() or len(line.split()) < 2:
            break
        key, value = line.split(None, 1)
        section[key] = value.strip()
    assert section == {
        "mode": "MULTIRUN",
        "job_name": "train",
        "job_num": "4",
        "sweep_id": "5eed5eed5eed",
        "sweep_dir": "/work/multirun/2025-03-01",
        "run_dir": "/work/multirun/2025-03-01/4",
    }


def test_a_long_text_never_breaks_inside_a_number() -> None:
    """Long cells break after ``_ . - /`` to fit, but not in ``0.5`` or ``1e-3``: a reason
    such as "did not answer within 0.5 s" must still read as a number."""
    from warehouse.output import _broken

    text = "Elasticsearch did not answer within 0.5 s, a loss of 1e-3 (WAREHOUSE_ES_TIMEOUT_S)"
    for width in range(6, 40):
        broken = _broken(text, width)
        assert broken.replace("\n", "") == text  # nothing added or lost
        for line_end, next_start in zip(broken.split("\n"), broken.split("\n")[1:], strict=False):
            assert not (line_end[-1:] in ".-" and next_start[:1].isdigit()), (width, broken)
