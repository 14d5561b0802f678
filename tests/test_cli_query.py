"""`warehouse query ...` end to end over the real local store: every view in every format,
the exit codes, stdout/stderr separation, settings precedence and streamed CSV.

The data is the hand-checked world of ``tests/query/test_views.py``; expected answers are
written out here, not computed by the code under test.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.query.test_views import rid, write_world
from warehouse.cli import app, main
from warehouse.output import (
    RUN_ID_WIDTH,
    number_format,
    table_cell,
    write_csv,
    write_json,
    write_table,
)
from warehouse.stores.local import LocalStore

runner = CliRunner()

CAPTIONS = ("same in every row:", "no value in any row:", "left out to fit", "≈:")
"""How the lines a table writes under itself begin."""


@pytest.fixture(autouse=True)
def unlimited_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables piped without COLUMNS have no width limit; tests that want one set COLUMNS."""
    monkeypatch.delenv("COLUMNS", raising=False)


def table_body(text: str) -> list[str]:
    """A table's row lines: after the header's rule, before the caption."""
    lines = [line for line in text.splitlines() if line.strip()]
    rule = next(i for i, line in enumerate(lines) if set(line.strip()) == {"─"})
    body = lines[rule + 1 :]
    end = next((i for i, line in enumerate(body) if line.startswith(CAPTIONS)), len(body))
    return body[:end]


@pytest.fixture
def world(home: Path) -> Path:
    with LocalStore(home) as store:
        write_world(store)
    return home


def query(*args: str) -> Any:
    result = runner.invoke(app, ["query", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def run_main(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """Exit code of the real console entry point (``warehouse.cli.main``)."""
    monkeypatch.setattr(sys, "argv", ["warehouse", *argv])
    try:
        main()
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


# --- each view, each format ---------------------------------------------------------------

VIEWS = {
    "runs": (["runs"], 8),
    "best": (["best"], 1),
    "best-per-experiment": (["best", "--per-experiment"], 3),
    "leaderboard": (["leaderboard"], 3),
    "over-time": (["over-time"], 3),  # the runs that set a new best
    "over-time-every-run": (["over-time", "--every-run"], 6),
    "over-time-weekly": (["over-time", "--interval", "week"], 2),
    "decomposition": (["decomposition"], 3),
    "samples": (["samples", "--best", "--split", "val", "--sort", "pixel_acc"], 5),
    "compare": (["compare", rid("a1"), rid("a2")], None),
    "show": (["show", rid("a2")], None),
}


@pytest.mark.parametrize("view", list(VIEWS))
def test_every_view_prints_a_json_array_of_its_rows(world: Path, view: str) -> None:
    args, count = VIEWS[view]
    result = query(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert isinstance(rows, list)
    if count is not None:
        assert len(rows) == count
    assert all(list(r) == list(rows[0]) for r in rows)  # every row has the same keys in order


@pytest.mark.parametrize("view", list(VIEWS))
def test_every_view_prints_csv_with_a_header_and_one_line_per_row(world: Path, view: str) -> None:
    args, count = VIEWS[view]
    result = query(*args, "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    if count is not None:
        assert len(rows) == count


@pytest.mark.parametrize("view", list(VIEWS))
def test_every_view_prints_a_table_for_people(world: Path, view: str) -> None:
    args, count = VIEWS[view]
    result = query(*args)
    assert result.exit_code == 0, result.output
    if count is not None:
        assert len(table_body(result.stdout)) == count


NO_EVIDENCE = dict.fromkeys(
    (
        "ci_low",
        "ci_high",
        "n",
        "best_of_low",
        "best_of_high",
        "vs_next_diff",
        "vs_next_ci_low",
        "vs_next_ci_high",
        "vs_next_p",
        "vs_next_mde",
    )
)  # no per-sample values of the metric: no interval, no comparison (no_evidence says why)


def test_leaderboard_json_has_the_hand_checked_rows(world: Path) -> None:
    rows = json.loads(query("leaderboard", "--format", "json").stdout)
    reasons = [row.pop("no_evidence") for row in rows]
    assert all(reason.startswith("no ") for reason in reasons)
    assert rows == [
        {
            "rank": 1,
            "experiment": "knn",
            "best_score": 0.95,
            "best_run_id": rid("b2"),
            "run_count": 2,
            "ended_at": "2025-01-10T10:00:00Z",
            **NO_EVIDENCE,
        },
        {
            "rank": 2,
            "experiment": "svm",
            "best_score": 0.93,
            "best_run_id": rid("a2"),
            "run_count": 3,
            "ended_at": "2025-01-03T10:00:00Z",
            **NO_EVIDENCE,
        },
        {
            "rank": 3,
            "experiment": "tree",
            "best_score": 0.80,
            "best_run_id": rid("c1"),
            "run_count": 3,
            "ended_at": "2025-01-05T10:00:00Z",
            **NO_EVIDENCE,
        },
    ]


def test_leaderboard_table_aligns_scores_at_four_decimals_and_shortens_ids(world: Path) -> None:
    out = query("leaderboard").stdout
    lines = out.splitlines()
    knn = next(line for line in lines if " knn " in line)
    assert "0.9500" in knn
    assert rid("b2")[:12] in knn
    assert rid("b2") not in knn
    svm = next(line for line in lines if " svm " in line)
    assert knn.index("0.9500") == svm.index("0.9300")  # right-aligned: the points line up


def test_leaderboard_csv_columns_in_a_stable_order(world: Path) -> None:
    header = query("leaderboard", "--format", "csv").stdout.splitlines()[0]
    assert header == (
        "rank,experiment,best_score,best_run_id,run_count,ended_at,"
        "ci_low,ci_high,n,best_of_low,best_of_high,vs_next_diff,vs_next_ci_low,"
        "vs_next_ci_high,vs_next_p,vs_next_mde,no_evidence"
    )


def test_runs_json_prints_whole_run_records(world: Path) -> None:
    rows = json.loads(query("runs", "-q", "experiment:svm", "--format", "json").stdout)
    assert {r["run_id"] for r in rows} == {rid("a1"), rid("a2"), rid("a3")}
    a1 = next(r for r in rows if r["run_id"] == rid("a1"))
    assert a1["config"] == {"model": {"family": "svm", "C": 1.0}, "seed": 0}
    assert a1["params"] == {"model.family": "svm", "model.C": 1.0}
    assert a1["metrics"]["val"] == {"acc": 0.90, "loss": 0.30}
    assert {"status", "git", "schema_version"} <= set(a1)


def test_runs_sort_columns_and_limit(world: Path) -> None:
    result = query(
        "runs",
        "--sort",
        "metrics.val.acc",
        "--columns",
        "run_id,metrics.val.acc,params.model.family",
        "-n",
        "3",
        "--format",
        "csv",
    )
    assert result.stdout.splitlines() == [
        "run_id,metrics.val.acc,params.model.family",
        f"{rid('b2')},0.95,knn",
        f"{rid('a2')},0.93,svm",
        f"{rid('a1')},0.9,svm",
    ]


def test_runs_sort_is_repeatable(world: Path) -> None:
    result = query(
        "runs", "-s", "experiment:desc", "-s", "ended_at:desc", "-c", "run_id", "-f", "csv"
    )
    ids = [line[:2] for line in result.stdout.splitlines()[1:]]
    assert ids == ["c2", "c1", "c3", "a3", "a2", "a1", "b2", "b1"]  # no end time: last


def test_over_time_table_marks_new_bests(world: Path) -> None:
    rows = json.loads(query("over-time", "--every-run", "--format", "json").stdout)
    assert [(r["run_id"][:2], r["is_new_best"]) for r in rows] == [
        ("a1", True),
        ("b1", False),
        ("a2", True),
        ("c1", False),
        ("c2", False),
        ("b2", True),
    ]
    records = json.loads(query("over-time", "--format", "json").stdout)
    assert records == [r for r in rows if r["is_new_best"]]  # by default: the records only


def test_decomposition_uses_the_baseline_error_flag(world: Path) -> None:
    rows = json.loads(query("decomposition", "-b", "0.02", "--format", "json").stdout)
    knn = rows[0]
    assert knn["experiment"] == "knn"
    assert knn["baseline_error"] == 0.02
    assert knn["avoidable_bias"] == pytest.approx(0.01)


def test_samples_best_names_the_run_on_stderr_and_rows_on_stdout(world: Path) -> None:
    result = query(
        "samples",
        "--best",
        "--split",
        "val",
        "--sort",
        "pixel_acc",
        "--asc",
        "--limit",
        "2",
        "--format",
        "json",
    )
    rows = json.loads(result.stdout)
    assert [(r["sample_id"], r["pixel_acc"], r["output_uri"]) for r in rows] == [
        ("s1", 0.1, "file:///o/s1.png"),
        ("s3", 0.3, "file:///o/s3.png"),
    ]
    assert rid("b2")[:RUN_ID_WIDTH] in result.stderr  # named as every table names it
    assert "knn" in result.stderr


def test_samples_desc_within_an_experiment(world: Path) -> None:
    result = query(
        "samples",
        "--best",
        "-x",
        "svm",
        "--split",
        "val",
        "--sort",
        "pixel_acc",
        "--desc",
        "-n",
        "1",
        "-f",
        "csv",
    )
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["run_id"], r["pixel_acc"]) for r in rows] == [(rid("a2"), "0.95")]


def test_samples_of_a_run_with_a_where_filter(world: Path) -> None:
    result = query(
        "samples",
        "--run",
        "b200",
        "--where",
        "pixel_acc:>=0.5",
        "--split",
        "val",
        "--sort",
        "sample_id",
        "-f",
        "csv",
    )
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["sample_id"] for r in rows] == ["s0", "s2", "s4"]


def test_show_prints_the_run_and_its_config_as_yaml(world: Path) -> None:
    out = query("show", "a200").stdout
    assert rid("a2") in out
    assert "model:\n  family: svm\n  C: 10.0\n" in out
    assert "0.9300" in out  # val acc in the metrics table


def test_show_json_is_an_array_holding_the_run(world: Path) -> None:
    (doc,) = json.loads(query("show", rid("a2"), "-f", "json").stdout)
    assert doc["run_id"] == rid("a2")
    assert doc["config"]["model"]["C"] == 10.0


def test_show_csv_lists_field_value_pairs(world: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(query("show", rid("a2"), "-f", "csv").stdout)))
    values = {r["field"]: r["value"] for r in rows}
    assert values["metrics.val.acc"] == "0.93"
    assert values["config.model.C"] == "10.0"


def test_compare_json_rows_are_keyed_by_run_id(world: Path) -> None:
    rows = json.loads(query("compare", rid("a1"), rid("b1"), "-f", "json").stdout)
    by_field = {r["field"]: r for r in rows}
    assert by_field["metrics.val.acc"] == {
        "field": "metrics.val.acc",
        rid("a1"): 0.90,
        rid("b1"): 0.85,
    }
    assert "config.seed" not in by_field  # equal in both runs


def test_metric_flag_accepts_slash_and_infers_min_for_loss(world: Path) -> None:
    rows = json.loads(query("leaderboard", "--metric", "val/loss", "-f", "json").stdout)
    assert [(r["experiment"], r["best_score"]) for r in rows] == [
        ("knn", 0.20),
        ("svm", 0.25),
        ("tree", 0.45),
    ]


def test_direction_flag_flips_the_ranking(world: Path) -> None:
    rows = json.loads(query("leaderboard", "--direction", "min", "-f", "json").stdout)
    assert [(r["experiment"], r["best_score"]) for r in rows] == [
        ("tree", 0.80),
        ("knn", 0.85),
        ("svm", 0.90),
    ]


def test_primary_metric_comes_from_the_environment_when_no_flag(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAREHOUSE_PRIMARY_METRIC", "val.loss")
    monkeypatch.setenv("WAREHOUSE_DIRECTION", "min")
    rows = json.loads(query("best", "-f", "json").stdout)
    assert (rows[0]["metric"], rows[0]["run_id"]) == ("val.loss", rid("b2"))
    # a --metric flag brings its own direction: the env's "min" belongs to val.loss
    rows = json.loads(query("best", "--metric", "val.acc", "-f", "json").stdout)
    assert (rows[0]["metric"], rows[0]["score"]) == ("val.acc", 0.95)


def test_filter_narrows_every_view(world: Path) -> None:
    rows = json.loads(query("best", "-q", "NOT tags:debug", "-f", "json").stdout)
    assert rows[0]["run_id"] == rid("a2")


# --- exit codes and streams -----------------------------------------------------------------


def test_no_match_exits_0_and_says_so_on_stderr(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(["query", "runs", "-q", "experiment:nope", "-f", "json"], monkeypatch) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == []
    assert "no runs match" in err


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["runs", "-q", "experiment:nope"], id="runs"),
        pytest.param(["leaderboard", "-q", "experiment:nope"], id="leaderboard"),
        pytest.param(["over-time", "-q", "status:running"], id="over-time"),
        pytest.param(["samples", "--run", rid("a1")], id="samples-of-a-run-without-any"),
    ],
)
def test_fail_empty_exits_1_when_nothing_matches(
    world: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    assert run_main(["query", *args, "--fail-empty"], monkeypatch) == 1


def test_fail_empty_exits_0_when_something_matches(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_main(["query", "leaderboard", "--fail-empty"], monkeypatch) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["runs", "-q", "experiment:(svm"], "cannot parse filter", id="bad-filter"),
        pytest.param(
            ["runs", "-q", "experimnt:svm"], "closest known fields: experiment", id="unknown-field"
        ),
        pytest.param(["runs", "-q", "metrics.val.acc:>=abc"], "not a number", id="type-mismatch"),
        pytest.param(["runs", "--sort", "ended_at:up"], "neither asc nor desc", id="bad-sort"),
        pytest.param(["leaderboard", "--metric", "acc"], "split.metric", id="bad-metric"),
        pytest.param(["runs", "--format", "xml"], "xml", id="bad-format"),
        pytest.param(["samples"], "--run RUN_ID or --best", id="samples-without-run"),
        pytest.param(["over-time", "--interval", "year"], "year", id="bad-interval"),
        pytest.param(["compare", rid("a1")], "two or more", id="compare-one-run"),
    ],
)
def test_usage_and_filter_errors_exit_2_with_one_line(
    world: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    assert run_main(["query", *args], monkeypatch) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert message in " ".join(err.split())


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["show", "ffff"], id="show"),
        pytest.param(["compare", rid("a1"), "ffff"], id="compare"),
        pytest.param(["samples", "--run", "ffff"], id="samples"),
        pytest.param(["samples", "--run", rid("b2"), "--split", "test"], id="missing-split"),
    ],
)
def test_unknown_runs_exit_4(
    world: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
) -> None:
    assert run_main(["query", *args], monkeypatch) == 4
    assert "error:" in capsys.readouterr().err


def test_empty_warehouse_answers_with_no_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_main(["query", "leaderboard"], monkeypatch) == 0
    assert run_main(["query", "leaderboard", "--fail-empty"], monkeypatch) == 1


def test_help_of_every_command_has_an_example() -> None:
    for command in (
        "runs",
        "best",
        "leaderboard",
        "over-time",
        "decomposition",
        "samples",
        "show",
        "compare",
        "steps",
    ):
        result = runner.invoke(app, ["query", command, "--help"])
        assert result.exit_code == 0
        assert "Example" in result.stdout, command
        assert f"warehouse query {command}" in " ".join(result.stdout.split()), command


# --- output module ------------------------------------------------------------------------


def test_json_output_turns_nan_and_infinity_into_null() -> None:
    out = io.StringIO()
    write_json([{"a": math.nan, "b": [math.inf, 1.5], "c": {"d": -math.inf}}], out)
    assert json.loads(out.getvalue()) == [{"a": None, "b": [None, 1.5], "c": {"d": None}}]
    assert "NaN" not in out.getvalue()
    assert "Infinity" not in out.getvalue()


def test_empty_json_output_is_an_empty_array() -> None:
    out = io.StringIO()
    assert write_json([], out) == 0
    assert json.loads(out.getvalue()) == []


def test_csv_cells_empty_for_missing_and_json_for_nested() -> None:
    out = io.StringIO()
    write_csv([{"a": None, "b": True, "c": [1, 2], "d": math.nan, "e": 0.1}], out)
    assert out.getvalue().splitlines() == ["a,b,c,d,e", ',true,"[1, 2]",,0.1']


def test_table_picks_one_precision_per_column() -> None:
    out = io.StringIO()
    write_table(
        [{"small": 0.5, "big": 12345.678, "tiny": 0.00001234, "count": 1234567, "text": "x"}],
        out,
    )
    body = out.getvalue().splitlines()[-1]
    for shown in ("0.5000", "12,346", "1.234e-05", "1,234,567"):
        assert shown in body


@pytest.mark.parametrize(
    ("values", "shown"),
    [
        pytest.param([0.0042, 12.3], ["0.00420", "12.30000"], id="small-next-to-large"),
        pytest.param([1000.0, 2500.0], ["1,000", "2,500"], id="whole-floats"),
        pytest.param([0.0084, -2.3e-5], ["0.008400", "-0.000023"], id="tiny-beside-small"),
        pytest.param([1.5e-5, 3e-5], ["1.500e-05", "3.000e-05"], id="all-below-1e-4"),
        pytest.param([-0.00002, 0.0], ["-2.000e-05", "0"], id="tiny-negative-and-zero"),
        pytest.param([0.5, -0.0], ["0.5000", "0.0000"], id="negative-zero"),
    ],
)
def test_a_column_precision_shows_its_smallest_value(values: list[float], shown: list[str]) -> None:
    """Every value keeps significant digits: a loss of 0.0042 beside 12.3 is not 0.00."""
    spec = number_format(values)
    assert [table_cell(v, "x", spec) for v in values] == shown


class _Sink(io.StringIO):
    """Counts what is written, keeps nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.lines = 0

    def write(self, text: str) -> int:
        self.lines += text.count("\n")
        return len(text)


def test_csv_is_streamed_row_by_row() -> None:
    sink = _Sink()
    seen_before: list[int] = []

    def rows() -> Iterator[dict[str, Any]]:
        for i in range(20_000):
            if i in (10_000, 19_999):
                sink.flush()
                seen_before.append(sink.lines)
            yield {"sample_id": f"s{i}", "pixel_acc": i / 20_000, "output_uri": None}

    assert write_csv(rows(), sink) == 20_000
    # csv.writer writes each row as it comes: half the rows are out before the rest exist
    assert seen_before[0] >= 10_000
    assert seen_before[1] >= 19_999


def test_csv_memory_does_not_grow_with_the_number_of_rows() -> None:
    n = 100_000  # held in memory, these rows alone would take tens of MB

    def rows() -> Iterator[dict[str, Any]]:
        for i in range(n):
            yield {"run_id": "r", "split": "val", "sample_id": f"s{i}", "pixel_acc": 0.5}

    tracemalloc.start()
    try:
        count = write_csv(rows(), _Sink())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == n
    assert peak < 1_000_000


def test_samples_csv_streams_from_the_store_without_listing_rows(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa

    n = 50_000
    with LocalStore(home) as store:
        store.write_runs(
            [
                {
                    "run_id": rid("ee"),
                    "experiment": "big",
                    "status": "completed",
                    "metrics": {},
                    "started_at": "2025-01-01T00:00:00Z",
                    "sample_counts": {"val": n},
                }
            ]
        )
        store.write_samples(
            rid("ee"),
            "big",
            "val",
            iter(
                [
                    pa.record_batch(
                        {
                            "sample_id": pa.array([f"s{i}" for i in range(n)]),
                            "pixel_acc": pa.array([i / n for i in range(n)], pa.float64()),
                        }
                    )
                ]
            ),
        )
    from warehouse.history import streaming

    seen: list[int] = []
    real_writer = streaming.write_csv_batches

    def spy(batches: Any, out: Any, **options: Any) -> int:
        assert not isinstance(batches, list)  # the CLI hands the stream over, not a list

        def counted() -> Any:
            for batch in batches:
                assert isinstance(batch, pa.RecordBatch)  # Arrow batches, never dict rows
                seen.append(batch.num_rows)
                yield batch

        return real_writer(counted(), out, **options)

    monkeypatch.setattr("warehouse.history.streaming.write_csv_batches", spy)
    result = query("samples", "--run", rid("ee"), "--limit", "0", "-f", "csv")
    assert sum(seen) == n
    assert len(result.stdout.splitlines()) == n + 1


# --- steps ----------------------------------------------------------------------------------


@pytest.fixture
def with_steps(world: Path) -> Path:
    with LocalStore(world) as store:
        store.write_steps(
            rid("a1"),
            "svm",
            [
                {
                    "@timestamp": f"2025-01-01T09:00:0{i}Z",
                    "seq": i,
                    "step": 10 * i,
                    "epoch": 0,
                    "metrics": {"loss": 1.0 / (i + 1), "lr": 1e-4},
                    "system": {"cpu_pct": 50.0 + i},
                }
                for i in range(3)
            ],
        )
    return world


def test_steps_csv_has_position_metrics_then_system_columns(with_steps: Path) -> None:
    result = query("steps", "a100", "-f", "csv")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "timestamp,seq,step,epoch,duration_s,loss,lr,cpu_pct"
    assert lines[1] == "2025-01-01T09:00:00Z,0,0,0,,1.0,0.0001,50.0"
    assert len(lines) == 4


def test_steps_json_and_limit(with_steps: Path) -> None:
    rows = json.loads(query("steps", rid("a1"), "--limit", "2", "-f", "json").stdout)
    assert [(r["seq"], r["loss"]) for r in rows] == [(0, 1.0), (1, 0.5)]


def test_steps_table_shows_small_learning_rates_with_their_digits(with_steps: Path) -> None:
    out = query("steps", rid("a1")).stdout
    assert "0.000100" in out
    assert "2025-01-01 09:00:02" in out


def test_steps_of_a_run_without_steps_fail_empty_with_1(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_main(["query", "steps", rid("a2"), "--fail-empty"], monkeypatch) == 1


def test_steps_of_an_unknown_run_exit_4(world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_main(["query", "steps", "ffff"], monkeypatch) == 4


def test_samples_download_saves_the_listed_outputs(home: Path, tmp_path: Path) -> None:
    import hashlib

    import pyarrow as pa

    from warehouse.objects.local import LocalObjectStore

    objects = LocalObjectStore(home / "objects")
    uris = [
        objects.put(
            f"knn/{rid('d1')}/output/s{i}.png",
            f"png{i}".encode(),
            content_type=None,
            sha256=hashlib.sha256(f"png{i}".encode()).hexdigest(),
        )
        for i in range(3)
    ]
    with LocalStore(home) as store:
        store.write_runs(
            [
                {
                    "run_id": rid("d1"),
                    "experiment": "knn",
                    "status": "completed",
                    "metrics": {"val": {"acc": 0.5}},
                    "started_at": "2025-01-01T00:00:00Z",
                }
            ]
        )
        store.write_samples(
            rid("d1"),
            "knn",
            "val",
            iter(
                [
                    pa.record_batch(
                        {
                            "sample_id": ["s0", "s1", "s2"],
                            "pixel_acc": pa.array([0.3, 0.1, 0.2], pa.float64()),
                            "output_uri": uris,
                        }
                    )
                ]
            ),
        )
    dest = tmp_path / "worst"
    result = query(
        "samples",
        "--run",
        rid("d1"),
        "--sort",
        "pixel_acc",
        "-n",
        "2",
        "--download",
        str(dest),
        "-f",
        "csv",
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in dest.iterdir()) == ["s1.png", "s2.png"]  # the two lowest
    assert (dest / "s1.png").read_bytes() == b"png1"
    assert len(result.stdout.splitlines()) == 3  # the listing still goes to stdout


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True

    def plain(self) -> str:
        return re.sub(r"\x1b\[[0-9;]*m", "", self.getvalue())


def test_a_narrow_terminal_leaves_columns_out_rather_than_cutting_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    rows = [
        {
            "run_id": f"{i:032x}",
            "experiment": f"digits-random-forest-{i}",
            **{f"metrics.val.m{k}": 0.123456 * k + i for k in range(12)},
        }
        for i in range(3)
    ]
    out = _Terminal()
    write_table(rows, out)
    text = out.plain()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text
    body = table_body(text)
    assert [line.split()[:2] for line in body] == [
        [f"{i:032x}"[:12], f"digits-random-forest-{i}"] for i in range(3)
    ]
    at = next(i for i, line in enumerate(lines) if line.startswith("left out to fit 80 columns"))
    note = " ".join(lines[at:])
    assert "metrics.val.m11" in note  # the last columns are the ones named
    assert "--format json" in note
    assert "metrics.val.m11" not in "\n".join(lines[:at])


def test_a_long_text_column_wraps_on_a_narrow_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    uri = "s3://results/warehouse/digits-svm/" + "f" * 32 + "/outputs/val/1234.png"
    out = _Terminal()
    write_table([{"sample_id": "1234", "pixel_acc": 0.5, "output_uri": uri}], out)
    text = out.plain()
    assert max(len(line) for line in text.splitlines()) <= 60
    assert uri in "".join(line.split()[-1] for line in text.splitlines()[2:])  # folded, whole


@pytest.mark.parametrize(
    "view",
    [
        pytest.param(["best"], id="best"),
        pytest.param(["best", "--per-experiment"], id="best-per-experiment"),
        pytest.param(["leaderboard"], id="leaderboard"),
        pytest.param(["over-time"], id="over-time"),
        pytest.param(["over-time", "--interval", "day"], id="over-time-by-day"),
        pytest.param(["decomposition"], id="decomposition"),
    ],
)
def test_csv_without_a_match_still_has_the_views_header(world: Path, view: list[str]) -> None:
    """A script reading the CSV (pandas.read_csv) finds the columns even when nothing matched,
    and they are the columns a match would have had."""
    full = query(*view, "-f", "csv").stdout.splitlines()
    empty = query(*view, "-f", "csv", "-q", "experiment:no-such-experiment")
    assert empty.exit_code == 0
    assert len(full) > 1
    assert empty.stdout.splitlines() == [full[0]]


def test_steps_csv_of_a_run_without_steps_has_the_position_header(world: Path) -> None:
    result = query("steps", rid("a1"), "-f", "csv")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["timestamp,seq,step,epoch,duration_s"]


def test_an_empty_warehouse_says_so_and_where_it_looked(home: Path) -> None:
    """A mistyped WAREHOUSE_HOME must not look like "nothing matched"."""
    result = query("runs")
    assert result.exit_code == 0
    assert f"no runs recorded in local store {home} yet" in result.stderr
    assert "WAREHOUSE_HOME" in result.stderr


def test_no_match_names_the_filter(world: Path) -> None:
    result = query("leaderboard", "-q", "experiment:nope", "--fail-empty")
    assert result.exit_code == 1
    assert "no run has a value of val.acc (filter: experiment:nope)" in result.stderr


def test_an_unknown_sample_column_points_at_the_sample_columns(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(["query", "samples", "--best", "--sort", "pixle_acc"], monkeypatch) == 2
    err = capsys.readouterr().err
    assert "sample columns" in err
    assert "query runs" not in err


def test_a_run_id_too_short_to_look_up_says_so(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(["query", "show", "a1"], monkeypatch) == 2
    assert "at least 4 characters" in capsys.readouterr().err


def test_help_paragraphs_are_reflowed_for_the_terminal() -> None:
    from warehouse.cli import _reflow

    doc = """First line of a sentence
    that goes on.

    Example — the worst samples:
    warehouse query samples --best

        indented code
        stays
    """
    assert _reflow(doc) == (
        "First line of a sentence that goes on.\n\n"
        "Example — the worst samples:\nwarehouse query samples --best\n\n"
        "    indented code\n    stays"
    )


def test_help_on_an_80_column_terminal_has_no_ragged_paragraph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = runner.invoke(app, ["query", "decomposition", "--help"]).stdout
    assert "in the train, val and test splits" in " ".join(out.split())
    assert not any(line.strip() == "train, val and" for line in out.splitlines())


def test_a_chosen_column_no_run_has_is_pointed_out(world: Path) -> None:
    result = query("runs", "-c", "run_id,metrics.val.acuracy", "-f", "csv")
    assert result.exit_code == 0
    assert "no run shown has a value for metrics.val.acuracy" in result.stderr
    assert result.stdout.splitlines()[0] == "run_id,metrics.val.acuracy"


# --- filters that are probably typos ------------------------------------------------------


@pytest.mark.parametrize(
    ("view", "filter", "meant"),
    [
        pytest.param("runs", "metrics.val.acc>0.9", "metrics.val.acc:>0.9", id="no-colon-gt"),
        pytest.param("runs", "metrics.val.acc>=0.9", "metrics.val.acc:>=0.9", id="no-colon-ge"),
        pytest.param("runs", "metrics.val.loss<0.3", "metrics.val.loss:<0.3", id="no-colon-lt"),
        pytest.param("runs", "experiment=svm", "experiment:svm", id="equals"),
        pytest.param(
            "leaderboard",
            "experiment=svm AND NOT tags:debug",
            "experiment:svm AND NOT tags:debug",
            id="equals-in-a-ranked-view",
        ),
        pytest.param("runs", "svn", "experiment:svm", id="bare-word-close-to-a-value"),
        pytest.param("runs", "experiment:tre", "experiment:tree", id="value-close-to-one"),
    ],
)
def test_a_filter_that_looks_mistyped_says_what_was_meant(
    world: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    view: str,
    filter: str,
    meant: str,
) -> None:
    assert run_main(["query", view, "-q", filter, "-f", "json"], monkeypatch) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == []
    assert f"did you mean -q '{meant}'?" in " ".join(err.split())
    # the filter meant does match: the hint is worth following
    assert json.loads(query(view, "-q", meant, "-f", "json").stdout) != []


def test_a_mistyped_filter_still_exits_1_with_fail_empty(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run_main(["query", "runs", "-q", "metrics.val.acc>0.9", "--fail-empty"], monkeypatch)
    assert code == 1
    assert "did you mean" in capsys.readouterr().err


@pytest.mark.parametrize(
    "filter",
    [
        pytest.param("metrics.val.acc:>0.999", id="a-well-formed-range"),
        pytest.param("experiment:svm AND experiment:knn", id="well-formed-terms"),
    ],
)
def test_a_well_formed_filter_that_matches_nothing_gets_no_guess(world: Path, filter: str) -> None:
    result = query("runs", "-q", filter)
    assert result.exit_code == 0
    assert "no runs match" in result.stderr
    assert "did you mean" not in result.stderr


def test_a_bare_word_inside_a_value_points_at_a_wildcard() -> None:
    from warehouse.query.filter_hints import suggest

    values = {"experiment": ["digits-svm", "digits-knn"], "tags": ["demo"]}
    found = suggest("svm", lambda field: values[field])
    assert "digits-svm" in found.lines[0]
    assert found.corrected == "experiment:*svm*"
    assert found.said()[-1] == "did you mean -q 'experiment:*svm*'?"
    nothing = suggest("demo", lambda field: values[field])  # a recorded tag: no guess
    assert nothing.said() == []
