"""The query views over the real local store, against answers worked out by hand.

The data set (``WORLD``) is small enough to check on paper: three experiments, nine runs,
two of them without metrics. Every expected value below is written out literally (or
derived in the test from ``WORLD`` with plain arithmetic), never by calling the views.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from warehouse.errors import ConfigurationError, NotFound, QuerySyntaxError
from warehouse.filters.docpath import get_path
from warehouse.models import Run, resolve_metric
from warehouse.query import views
from warehouse.stores.local import LocalStore


def rid(tag: str) -> str:
    """A 32-hex run id starting with the readable ``tag`` (a1 → a1000000...)."""
    return tag + "0" * (32 - len(tag))


def _metrics(train: float | None, val: float, test: float | None, loss: float) -> dict[str, Any]:
    out: dict[str, dict[str, float]] = {"val": {"acc": val, "loss": loss}}
    if train is not None:
        out["train"] = {"acc": train}
    if test is not None:
        out["test"] = {"acc": test}
    return out


# tag: experiment, status, ended (Jan 2025, day, hour), metrics, config, tags
WORLD: dict[str, dict[str, Any]] = {
    "a1": {
        "exp": "svm",
        "ended": (1, 10),
        "m": _metrics(0.95, 0.90, 0.88, 0.30),
        "cfg": {"C": 1.0},
    },
    "a2": {
        "exp": "svm",
        "ended": (3, 10),
        "m": _metrics(0.99, 0.93, 0.92, 0.25),
        "cfg": {"C": 10.0},
    },
    "a3": {"exp": "svm", "ended": (4, 10), "m": {}, "cfg": {"C": 100.0}, "status": "failed"},
    "b1": {"exp": "knn", "ended": (2, 10), "m": _metrics(0.86, 0.85, 0.84, 0.40), "cfg": {"k": 3}},
    "b2": {
        "exp": "knn",
        "ended": (10, 10),
        "m": _metrics(0.97, 0.95, 0.90, 0.20),
        "cfg": {"k": 5},
        "tags": ["debug"],
    },
    "c1": {
        "exp": "tree",
        "ended": (5, 10),
        "m": _metrics(1.0, 0.80, None, 0.50),
        "cfg": {"depth": 3},
    },
    "c2": {
        "exp": "tree",
        "ended": (6, 10),
        "m": _metrics(0.90, 0.80, None, 0.45),
        "cfg": {"depth": 4},
    },
    "c3": {"exp": "tree", "ended": None, "m": {}, "cfg": {"depth": 5}, "status": "running"},
}


def _doc(tag: str, spec: dict[str, Any]) -> dict[str, Any]:
    ended = spec["ended"]
    day = ended[0] if ended else 11
    run = Run(
        run_id=rid(tag),
        experiment=spec["exp"],
        status=spec.get("status", "completed"),
        started_at=datetime(2025, 1, day, 8, tzinfo=UTC),
        ended_at=datetime(2025, 1, ended[0], ended[1], tzinfo=UTC) if ended else None,
        tags=spec.get("tags", []),
        config={"model": {"family": spec["exp"], **spec["cfg"]}, "seed": 0},
        params={"model.family": spec["exp"], **{f"model.{k}": v for k, v in spec["cfg"].items()}},
        metrics=spec["m"],
        sample_counts={"val": 5, "train": 2} if tag == "b2" else {"val": 5} if tag == "a2" else {},
    )
    return run.to_doc()


def _samples(values: list[float]) -> Iterator[pa.RecordBatch]:
    yield pa.record_batch(
        {
            "sample_id": pa.array([f"s{i}" for i in range(len(values))], pa.string()),
            "pixel_acc": pa.array(values, pa.float64()),
            "output_uri": pa.array([f"file:///o/s{i}.png" for i in range(len(values))]),
        }
    )


def write_world(s: LocalStore) -> None:
    """WORLD's runs, plus samples: b2 (val 5 rows, train 2) and a2 (val 5 rows)."""
    s.write_runs([_doc(tag, spec) for tag, spec in WORLD.items()])
    s.write_samples(rid("b2"), "knn", "val", _samples([0.9, 0.1, 0.5, 0.3, 0.7]))
    s.write_samples(rid("b2"), "knn", "train", _samples([0.2, 0.05]))
    s.write_samples(rid("a2"), "svm", "val", _samples([0.6, 0.4, 0.8, 0.2, 0.95]))


@pytest.fixture
def store(home: Path) -> Iterator[LocalStore]:
    with LocalStore(home) as s:
        write_world(s)
        yield s


# --- metric names ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "direction", "expected"),
    [
        pytest.param("val.acc", None, ("val", "acc", "max", "metrics.val.acc"), id="dotted"),
        pytest.param("val/acc", None, ("val", "acc", "max", "metrics.val.acc"), id="slash"),
        pytest.param(
            "metrics.val.loss",
            None,
            ("val", "loss", "min", "metrics.val.loss"),
            id="full-path-loss-is-min",
        ),
        pytest.param("val.acc", "min", ("val", "acc", "min", "metrics.val.acc"), id="explicit"),
    ],
)
def test_metric_accepts_every_spelling_and_infers_direction(
    text: str, direction: str | None, expected: tuple[str, str, str, str]
) -> None:
    m = resolve_metric(text, direction)
    assert (m.split, m.name, m.direction, m.path) == expected


def test_metric_without_split_is_a_usage_error() -> None:
    with pytest.raises(ConfigurationError, match=r"split\.metric"):
        resolve_metric("acc")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param("ended_at", ("ended_at", "asc"), id="plain-field-asc"),
        pytest.param("metrics.val.acc", ("metrics.val.acc", "desc"), id="score-best-first"),
        pytest.param("metrics.val.loss", ("metrics.val.loss", "asc"), id="loss-best-first"),
        pytest.param("params.model.C:desc", ("params.model.C", "desc"), id="explicit"),
    ],
)
def test_sort_spec_parses_field_and_order(spec: str, expected: tuple[str, str]) -> None:
    assert views.parse_sort(spec) == expected


def test_sort_with_an_unknown_order_is_rejected() -> None:
    with pytest.raises(QuerySyntaxError, match="neither asc nor desc"):
        views.parse_sort("ended_at:up")


# --- runs -------------------------------------------------------------------------------


def test_runs_default_to_newest_first(store: LocalStore) -> None:
    # started_at is 08:00 on the day each run ended (c3: day 11); ties by run id
    ids = [d["run_id"][:2] for d in views.runs(store)]
    assert ids == ["c3", "b2", "c2", "c1", "a3", "a2", "b1", "a1"]


def test_runs_filter_sort_and_limit(store: LocalStore) -> None:
    docs = views.runs(
        store, filter="experiment:svm OR experiment:knn", sort=["metrics.val.acc"], limit=3
    )
    assert [d["run_id"][:2] for d in docs] == ["b2", "a2", "a1"]


def test_runs_sort_by_param_ascending(store: LocalStore) -> None:
    docs = views.runs(store, filter="experiment:svm", sort=["params.model.C:asc"])
    assert [d["params"]["model.C"] for d in docs] == [1.0, 10.0, 100.0]


def test_runs_return_whole_documents_by_default(store: LocalStore) -> None:
    (doc,) = views.runs(store, filter=f"run_id:{rid('a1')}")
    assert doc["config"] == {"model": {"family": "svm", "C": 1.0}, "seed": 0}
    assert doc["metrics"]["val"] == {"acc": 0.90, "loss": 0.30}


def test_runs_with_fields_keep_only_those(store: LocalStore) -> None:
    docs = views.runs(store, filter="experiment:knn", fields=["run_id", "metrics.val.acc"])
    assert sorted(get_path(d, "metrics.val.acc") for d in docs) == [0.85, 0.95]
    assert all("config" not in d for d in docs)


def test_runs_with_a_bad_filter_raise_query_syntax_error(store: LocalStore) -> None:
    with pytest.raises(QuerySyntaxError):
        views.runs(store, filter="experiment:(svm")


# --- best and leaderboard ---------------------------------------------------------------


def test_best_is_the_globally_best_run(store: LocalStore) -> None:
    (row,) = views.best(store, "val.acc")
    assert (row["run_id"], row["experiment"], row["score"]) == (rid("b2"), "knn", 0.95)


def test_best_top_n_lists_the_best_runs_in_order(store: LocalStore) -> None:
    rows = views.best(store, "val.acc", limit=3)
    assert [(r["rank"], r["run_id"][:2], r["score"]) for r in rows] == [
        (1, "b2", 0.95),
        (2, "a2", 0.93),
        (3, "a1", 0.90),
    ]


def test_best_per_experiment_with_a_lower_is_better_metric(store: LocalStore) -> None:
    rows = views.best(store, "val.loss", per_experiment=True)
    assert [(r["experiment"], r["run_id"][:2], r["score"], r["run_count"]) for r in rows] == [
        ("knn", "b2", 0.20, 2),
        ("svm", "a2", 0.25, 3),
        ("tree", "c2", 0.45, 3),
    ]


def test_leaderboard_ranks_experiments_best_first(store: LocalStore) -> None:
    rows = views.leaderboard(store, "val.acc")
    assert rows == [
        {
            "rank": 1,
            "experiment": "knn",
            "best_score": 0.95,
            "best_run_id": rid("b2"),
            "run_count": 2,
            "ended_at": "2025-01-10T10:00:00Z",
        },
        {
            "rank": 2,
            "experiment": "svm",
            "best_score": 0.93,
            "best_run_id": rid("a2"),
            "run_count": 3,
            "ended_at": "2025-01-03T10:00:00Z",
        },
        # c1 and c2 tie at 0.80: the run that ended first wins
        {
            "rank": 3,
            "experiment": "tree",
            "best_score": 0.80,
            "best_run_id": rid("c1"),
            "run_count": 3,
            "ended_at": "2025-01-05T10:00:00Z",
        },
    ]


def test_leaderboard_honours_the_filter(store: LocalStore) -> None:
    rows = views.leaderboard(store, "val.acc", filter="NOT tags:debug")
    assert [(r["experiment"], r["best_run_id"][:2], r["run_count"]) for r in rows] == [
        ("svm", "a2", 3),
        ("knn", "b1", 1),
        ("tree", "c1", 3),
    ]


def test_leaderboard_of_a_metric_no_run_has_names_the_closest_metrics(store: LocalStore) -> None:
    with pytest.raises(QuerySyntaxError, match=r"metrics\.val\.f1.*metrics\.val\.acc"):
        views.leaderboard(store, "val.f1")


# --- over time ----------------------------------------------------------------------------


def _expected_running_best() -> list[tuple[str, float, float, str, bool]]:
    """Independent running maximum over WORLD, by end time (runs with val.acc only)."""
    ended = sorted(
        (spec["ended"], tag, spec["m"]["val"]["acc"])
        for tag, spec in WORLD.items()
        if spec["ended"] and spec["m"]
    )
    out, best, holder = [], -1.0, ""
    for _, tag, score in ended:
        new = score > best
        if new:
            best, holder = score, tag
        out.append((tag, score, best, holder, new))
    return out


def test_over_time_is_the_running_best_by_end_time(store: LocalStore) -> None:
    points = views.over_time(store, "val.acc")
    got = [
        (p["run_id"][:2], p["score"], p["best_so_far"], p["best_run_id"][:2], p["is_new_best"])
        for p in points
    ]
    assert got == _expected_running_best()
    assert got == [
        ("a1", 0.90, 0.90, "a1", True),
        ("b1", 0.85, 0.90, "a1", False),
        ("a2", 0.93, 0.93, "a2", True),
        ("c1", 0.80, 0.93, "a2", False),
        ("c2", 0.80, 0.93, "a2", False),
        ("b2", 0.95, 0.95, "b2", True),
    ]
    assert points[0]["ended_at"] == "2025-01-01T10:00:00Z"


def test_over_time_by_week_gives_the_best_at_each_weeks_end(store: LocalStore) -> None:
    # 2025-01-01 is a Wednesday: its ISO week starts Monday 2024-12-30 and ends Sunday Jan 5
    points = views.over_time(store, "val.acc", interval="week")
    assert [
        (p["period"], p["run_count"], p["run_id"][:2], p["best_so_far"], p["is_new_best"])
        for p in points
    ] == [("2024-12-30", 4, "a2", 0.93, True), ("2025-01-06", 2, "b2", 0.95, True)]


def test_over_time_by_day_fills_days_without_runs(store: LocalStore) -> None:
    points = views.over_time(store, "val.acc", interval="day")
    assert [p["period"] for p in points] == [f"2025-01-{d:02d}" for d in range(1, 11)]
    quiet = points[6]  # Jan 7: no run ended
    assert (quiet["run_count"], quiet["run_id"], quiet["best_so_far"]) == (0, None, 0.93)
    assert [p["is_new_best"] for p in points].count(True) == 3


def test_over_time_lower_is_better_and_limit_keeps_the_latest(store: LocalStore) -> None:
    points = views.over_time(store, "val.loss", limit=2)
    # losses by end time: a1 .30, b1 .40, a2 .25, c1 .50, c2 .45, b2 .20
    assert [(p["run_id"][:2], p["best_so_far"]) for p in points] == [("c2", 0.25), ("b2", 0.20)]


def test_over_time_rejects_an_unknown_interval(store: LocalStore) -> None:
    with pytest.raises(ConfigurationError, match="day, week, month"):
        views.over_time(store, "val.acc", interval="year")  # type: ignore[arg-type]


# --- decomposition ------------------------------------------------------------------------


def test_decomposition_of_each_experiments_best_run(store: LocalStore) -> None:
    rows = views.decomposition(store, "val.acc", baseline_error=0.02)
    assert [r["experiment"] for r in rows] == ["knn", "svm", "tree"]
    knn, svm, tree = rows
    # b2: errors train .03, val .05, test .10
    assert knn["run_id"] == rid("b2")
    assert knn["score"] == 0.95
    assert knn["baseline_error"] == 0.02
    assert (knn["train_error"], knn["val_error"], knn["test_error"]) == pytest.approx(
        (0.03, 0.05, 0.10)
    )
    assert (knn["avoidable_bias"], knn["variance"], knn["dev_overfit"]) == pytest.approx(
        (0.01, 0.02, 0.05)
    )
    # a2: errors .01, .07, .08
    assert (svm["avoidable_bias"], svm["variance"], svm["dev_overfit"]) == pytest.approx(
        (-0.01, 0.06, 0.01)
    )
    # c1: train error 0, val .20, no test split
    assert (tree["avoidable_bias"], tree["variance"]) == pytest.approx((-0.02, 0.20))
    assert tree["test_error"] is None
    assert tree["dev_overfit"] is None
    assert list(knn) == [
        "experiment",
        "run_id",
        "score",
        "baseline_error",
        "train_error",
        "val_error",
        "test_error",
        "avoidable_bias",
        "variance",
        "dev_overfit",
    ]


# --- samples --------------------------------------------------------------------------------


def test_samples_of_the_best_run_sorted_lowest_first(store: LocalStore) -> None:
    result = views.samples(store, best=True, split="val", sort="pixel_acc", order="asc", limit=3)
    assert result.run["run_id"] == rid("b2")
    rows = list(result)
    assert [(r["sample_id"], r["pixel_acc"]) for r in rows] == [
        ("s1", 0.1),
        ("s3", 0.3),
        ("s2", 0.5),
    ]
    assert rows[0]["output_uri"] == "file:///o/s1.png"
    assert {r["run_id"] for r in rows} == {rid("b2")}


def test_samples_of_the_best_run_within_an_experiment(store: LocalStore) -> None:
    result = views.samples(
        store, best=True, experiment="svm", split="val", sort="pixel_acc", order="desc", limit=2
    )
    assert result.run["run_id"] == rid("a2")
    assert [r["pixel_acc"] for r in result] == [0.95, 0.8]


def test_samples_of_a_run_by_id_prefix_all_splits(store: LocalStore) -> None:
    rows = list(views.samples(store, "b200", limit=None))
    assert sorted((r["split"], r["sample_id"]) for r in rows) == sorted(
        [("val", f"s{i}") for i in range(5)] + [("train", "s0"), ("train", "s1")]
    )


def test_samples_of_a_missing_split_name_the_splits_there(store: LocalStore) -> None:
    with pytest.raises(NotFound, match="splits with samples: train, val"):
        views.samples(store, rid("b2"), split="test")


def test_samples_need_exactly_one_of_run_and_best(store: LocalStore) -> None:
    with pytest.raises(ConfigurationError, match="either"):
        views.samples(store)
    with pytest.raises(ConfigurationError, match="either"):
        views.samples(store, rid("b2"), best=True)


def test_samples_best_with_no_scored_run_is_not_found(store: LocalStore) -> None:
    with pytest.raises(NotFound, match="experiment"):
        views.samples(store, best=True, experiment="nope")


# --- show, compare ----------------------------------------------------------------------


def test_show_finds_a_run_by_id_or_unique_prefix(store: LocalStore) -> None:
    assert views.show(store, rid("c2"))["experiment"] == "tree"
    assert views.show(store, "c200")["run_id"] == rid("c2")


def test_show_of_an_unknown_run_is_not_found_with_a_hint(store: LocalStore) -> None:
    with pytest.raises(NotFound, match="warehouse query runs"):
        views.show(store, "ffff")


def test_show_of_an_ambiguous_prefix_asks_for_more(store: LocalStore) -> None:
    store.write_runs(
        [
            Run(run_id="abcd" + "1" * 28, experiment="x").to_doc(),
            Run(run_id="abcd" + "2" * 28, experiment="x").to_doc(),
        ]
    )
    with pytest.raises(ConfigurationError, match="several runs"):
        views.show(store, "abcd")


def test_compare_lists_metrics_side_by_side_and_only_differing_config(store: LocalStore) -> None:
    rows = views.compare(store, [rid("a1"), "a200"])
    by_field = {r["field"]: (r[rid("a1")], r[rid("a2")]) for r in rows}
    assert by_field["experiment"] == ("svm", "svm")
    assert by_field["metrics.val.acc"] == (0.90, 0.93)
    assert by_field["metrics.test.acc"] == (0.88, 0.92)
    config_rows = [f for f in by_field if f.startswith("config.")]
    assert config_rows == ["config.model.C"]  # family and seed are equal
    assert by_field["config.model.C"] == (1.0, 10.0)


def test_compare_shows_a_key_missing_in_one_run_as_none(store: LocalStore) -> None:
    rows = views.compare(store, [rid("a1"), rid("b1")])
    by_field = {r["field"]: (r[rid("a1")], r[rid("b1")]) for r in rows}
    assert by_field["config.model.C"] == (1.0, None)
    assert by_field["config.model.k"] == (None, 3)
    assert by_field["config.model.family"] == ("svm", "knn")
    assert "config.seed" not in by_field


def test_compare_needs_two_distinct_runs(store: LocalStore) -> None:
    with pytest.raises(ConfigurationError, match="two or more"):
        views.compare(store, [rid("a1")])
    with pytest.raises(ConfigurationError, match="twice"):
        views.compare(store, [rid("a1"), "a100"])


# --- helpers ------------------------------------------------------------------------------


def test_and_filters_parenthesises_each_part() -> None:
    assert views.and_filters(None, "a:1 OR b:2", " ", "c:3") == "(a:1 OR b:2) AND (c:3)"
    assert views.and_filters(None, "") is None
