"""The store contract, run against every engine: only ``Store`` protocol methods are used.

Expected answers are written out by hand or computed here in plain Python from the input
records, never by the code under test.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

from warehouse.errors import NotFound, QuerySyntaxError
from warehouse.models import GitInfo, Run, RunStatus
from warehouse.stores.base import (
    CountQuery,
    GroupQuery,
    RankQuery,
    RunQuery,
    SampleQuery,
    StepRange,
    Store,
)

T0 = datetime(2024, 5, 1, tzinfo=UTC)

# run_id, experiment, val acc, test acc, tags, status, model.C, model.kind, git dirty, day
TABLE: list[tuple[Any, ...]] = [
    ("run-00", "svm", 0.91, 0.90, ["prod"], "completed", 0.1, "rbf", False, 1),
    ("run-01", "svm", 0.85, None, ["debug"], "completed", 1.0, "linear", True, 2),
    ("run-02", "svm", 0.88, 0.86, ["prod", "sweep"], "failed", 10.0, "rbf", False, 3),
    ("run-03", "knn", 0.80, 0.79, ["sweep"], "completed", 3.0, "kd", False, 4),
    ("run-04", "knn", 0.95, None, ["debug", "sweep"], "completed", 5.0, "ball", True, 5),
    ("run-05", "knn", 0.70, 0.69, [], "interrupted", 7.0, "kd", False, 6),
    ("run-06", "random-forest", 0.93, 0.92, ["prod"], "completed", 0.5, "gini", False, 7),
    ("run-07", "random-forest", 0.60, 0.58, ["debug"], "failed", 0.2, "entropy", True, 8),
    ("run-08", "random-forest", 0.75, None, [], "completed", 2.0, "gini", False, 9),
]


def run_doc(
    run_id: str,
    experiment: str,
    val_acc: float | None,
    test_acc: float | None = None,
    tags: list[str] | None = None,
    status: str = "completed",
    c: float = 1.0,
    kind: str = "rbf",
    dirty: bool = False,
    day: int = 1,
) -> dict[str, Any]:
    metrics: dict[str, dict[str, float]] = {"train": {"acc": 0.99}}
    if val_acc is not None:
        metrics["val"] = {"acc": val_acc, "loss": round(1.05 - val_acc, 4)}
    if test_acc is not None:
        metrics["test"] = {"acc": test_acc}
    return Run(
        run_id=run_id,
        experiment=experiment,
        tags=tags or [],
        status=RunStatus(status),
        started_at=T0 + timedelta(days=day, hours=-1),
        ended_at=T0 + timedelta(days=day),
        params={"model.C": c, "model.kind": kind, "seed": day},
        config={"model": {"C": c, "kind": kind}, "seed": day},
        git=GitInfo(commit=f"{day:040x}", branch="main", dirty=dirty),
        metrics=metrics,
    ).to_doc()


DOCS = [run_doc(*row) for row in TABLE]


def metric(doc: dict[str, Any], split: str, name: str = "acc") -> Any:
    """The finite value of a metric, or None (Any: predicates compare it directly)."""
    value = doc["metrics"].get(split, {}).get(name)
    return value if value is not None and math.isfinite(value) else None


def ids(docs: list[dict[str, Any]]) -> list[str]:
    return [d["run_id"] for d in docs]


def sample_batches() -> list[pa.RecordBatch]:
    return [
        pa.record_batch(
            {
                "sample_id": ["s0", "s1", "s2", "s3", "s4"],
                "pixel_acc": [0.50, None, 0.10, 0.90, 0.30],
                "label": ["cat", "dog", "cat", "dog", "cat"],
                "correct": [True, False, False, True, False],
                "output_uri": [f"file:///out/s{i}.png" for i in range(5)],
            }
        ),
        pa.record_batch(
            {
                "sample_id": ["s5", "s6", "s7"],
                "pixel_acc": [0.70, 0.20, None],
                "label": ["dog", "cat", "cat"],
                "correct": [True, False, True],
                "output_uri": [f"file:///out/s{i}.png" for i in range(5, 8)],
            }
        ),
    ]


SAMPLES = [row for batch in sample_batches() for row in batch.to_pylist()]


def grouped_rows() -> dict[str, list[dict[str, Any]]]:
    """Two runs over the same 40 samples: labels, sizes and correctness varying by run."""
    out: dict[str, list[dict[str, Any]]] = {}
    for run, shift in (("g1", 0), ("g2", 3)):
        out[run] = [
            {
                "sample_id": f"s{i:02d}",
                "label": ["cat", "dog", "eel"][i % 3],
                "size": float(i % 7),
                "correct": (i + shift) % 4 != 0,
            }
            for i in range(40)
        ]
    return out


def by_value(rows: list[dict[str, Any]], column: str, desc: bool) -> list[str]:
    """Sample ids sorted by a column, missing values last, ties by sample_id."""
    present = [r for r in rows if r[column] is not None]
    missing = [r for r in rows if r[column] is None]
    present.sort(key=lambda r: r["sample_id"])
    present.sort(key=lambda r: r[column], reverse=desc)
    return [r["sample_id"] for r in present + sorted(missing, key=lambda r: r["sample_id"])]


FILTERS: list[Any] = [
    pytest.param("experiment:svm", lambda d: d["experiment"] == "svm", id="exact"),
    pytest.param(
        "experiment:(svm OR knn)", lambda d: d["experiment"] in ("svm", "knn"), id="or-group"
    ),
    pytest.param(
        "experiment:svm experiment:knn",
        lambda d: d["experiment"] in ("svm", "knn"),
        id="implicit-or",
    ),
    pytest.param("metrics.val.acc:>=0.88", lambda d: metric(d, "val") >= 0.88, id="range-gte"),
    pytest.param("metrics.val.acc:<0.8", lambda d: metric(d, "val") < 0.8, id="range-lt"),
    pytest.param(
        "metrics.val.acc:[0.8 TO 0.91}", lambda d: 0.8 <= metric(d, "val") < 0.91, id="range-mixed"
    ),
    pytest.param("metrics.val.acc:[0.9 TO *]", lambda d: metric(d, "val") >= 0.9, id="open-range"),
    pytest.param(
        "experiment:svm AND NOT tags:debug",
        lambda d: d["experiment"] == "svm" and "debug" not in d["tags"],
        id="and-not",
    ),
    pytest.param(
        "+experiment:svm -status:failed",
        lambda d: d["experiment"] == "svm" and d["status"] != "failed",
        id="plus-minus",
    ),
    pytest.param("tags:sweep", lambda d: "sweep" in d["tags"], id="list-any-element"),
    pytest.param(
        "tags:deb*", lambda d: any(t.startswith("deb") for t in d["tags"]), id="list-wild"
    ),
    pytest.param("experiment:random*", lambda d: d["experiment"].startswith("random"), id="wild"),
    pytest.param("experiment:k?n", lambda d: d["experiment"] == "knn", id="wild-one-char"),
    pytest.param(
        "NOT metrics.test.acc:>0.8",
        lambda d: not (metric(d, "test") is not None and metric(d, "test") > 0.8),
        id="not-includes-missing",
    ),
    pytest.param("_exists_:metrics.test.acc", lambda d: "test" in d["metrics"], id="exists"),
    pytest.param("metrics.test.acc:*", lambda d: "test" in d["metrics"], id="field-star"),
    pytest.param("params.model.C:<1", lambda d: d["params"]["model.C"] < 1, id="numeric-param"),
    pytest.param(
        'params.model.kind:"rbf"', lambda d: d["params"]["model.kind"] == "rbf", id="phrase"
    ),
    pytest.param("git.dirty:true", lambda d: d["git"]["dirty"] is True, id="boolean"),
    pytest.param(
        "status:completed AND metrics.val.acc:>0.8",
        lambda d: d["status"] == "completed" and metric(d, "val") > 0.8,
        id="and-range",
    ),
    pytest.param("knn", lambda d: d["experiment"] == "knn", id="bare-term"),
    pytest.param("ended_at:>=2024-05-05", lambda d: d["ended_at"] >= "2024-05-05", id="date"),
    pytest.param(
        "(experiment:svm OR tags:prod) AND NOT (status:failed OR git.dirty:true)",
        lambda d: (
            (d["experiment"] == "svm" or "prod" in d["tags"])
            and not (d["status"] == "failed" or d["git"]["dirty"])
        ),
        id="nested",
    ),
]


def expected_best(
    docs: list[dict[str, Any]],
    split: str,
    name: str,
    direction: str,
    keep: Callable[[dict[str, Any]], bool] = lambda d: True,
) -> list[tuple[str, float, str, int]]:
    """(experiment, score, run_id, run_count) by plain Python, best experiment first."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        if keep(doc):
            groups.setdefault(doc["experiment"], []).append(doc)
    sign = -1.0 if direction == "max" else 1.0
    rows = []
    for experiment, runs in groups.items():
        scored = [d for d in runs if metric(d, split, name) is not None]
        if not scored:
            continue
        best = min(
            scored, key=lambda d: (sign * metric(d, split, name), d["ended_at"], d["run_id"])
        )
        rows.append((experiment, metric(best, split, name), best, len(runs)))
    rows.sort(key=lambda r: (sign * r[1], r[2]["ended_at"], r[2]["run_id"]))
    return [(e, s, b["run_id"], n) for e, s, b, n in rows]


class TestStoreContract:
    # runs: writes ---------------------------------------------------------------------
    def test_a_written_run_comes_back_whole(self, store: Store) -> None:
        store.write_runs(DOCS[:1])
        assert store.search_runs(RunQuery(filter="run_id:run-00")) == [DOCS[0]]

    def test_writing_a_run_twice_replaces_it(self, store: Store) -> None:
        store.write_runs(DOCS)
        changed = {**DOCS[0], "status": "failed", "tags": ["rerun"]}
        store.write_runs([changed])
        found = store.search_runs(RunQuery(filter="run_id:run-00"))
        assert found == [changed]
        assert len(store.search_runs(RunQuery(limit=None))) == len(DOCS)

    def test_an_older_copy_of_a_run_never_replaces_a_newer_one(self, store: Store) -> None:
        def saved(status: str, second: int) -> dict[str, Any]:
            return {**DOCS[0], "status": status, "updated_at": f"2026-01-01T00:00:{second:02d}Z"}

        store.write_runs([saved("completed", 20)])
        store.write_runs([saved("running", 10)])  # a late retry of an older save
        assert store.search_runs(RunQuery(filter="run_id:run-00"))[0]["status"] == "completed"
        store.write_runs([saved("completed", 20)])  # the same version again: harmless
        store.write_runs([saved("failed", 30)])  # a newer save replaces it
        assert store.search_runs(RunQuery(filter="run_id:run-00"))[0]["status"] == "failed"

    def test_writing_the_same_batch_again_changes_nothing(self, store: Store) -> None:
        store.write_runs(DOCS)
        store.write_runs(DOCS)
        got = store.search_runs(RunQuery(sort=[("run_id", "asc")], limit=None))
        assert got == sorted(DOCS, key=lambda d: d["run_id"])

    # version: what a front end caches an answer by ------------------------------------
    def test_the_version_changes_with_each_write_and_delete_and_never_with_a_read(
        self, store: Store
    ) -> None:
        def read() -> None:
            store.search_runs(RunQuery(limit=None))
            store.count_by(CountQuery("experiment"))
            store.best_per_experiment(RankQuery("metrics.val.acc", "max"))

        empty = store.version()
        store.write_runs(DOCS[:3])
        assert store.version() != empty
        read()  # the first read of a new local store may store the catalog it built
        written = store.version()
        read()
        assert store.version() == written
        hash(written)  # a cache key
        store.write_runs([{**DOCS[0], "tags": ["edited"], "updated_at": "2030-01-01T00:00:00Z"}])
        edited = store.version()
        assert edited != written
        store.delete_runs(["run-01"])
        assert store.version() not in (edited, written)

    # runs: filters --------------------------------------------------------------------
    @pytest.mark.parametrize(("text", "predicate"), FILTERS)
    def test_filter_matches_exactly_the_runs_python_selects(
        self, store: Store, text: str, predicate: Callable[[dict[str, Any]], bool]
    ) -> None:
        store.write_runs(DOCS)
        expected = sorted(d["run_id"] for d in DOCS if _safe(predicate, d))
        assert expected, "a filter case must select something"
        got = store.search_runs(RunQuery(filter=text, limit=None))
        assert sorted(ids(got)) == expected

    def test_unknown_filter_field_names_the_closest_known_field(self, store: Store) -> None:
        store.write_runs(DOCS)
        with pytest.raises(QuerySyntaxError, match=r"metrics\.val\.acc"):
            store.search_runs(RunQuery(filter="metrics.val.acx:>0.5"))

    def test_text_bound_on_a_numeric_field_is_a_type_error(self, store: Store) -> None:
        store.write_runs(DOCS)
        with pytest.raises(QuerySyntaxError, match="numeric"):
            store.search_runs(RunQuery(filter="metrics.val.acc:>=high"))

    def test_unparsable_filter_is_a_syntax_error(self, store: Store) -> None:
        store.write_runs(DOCS)
        with pytest.raises(QuerySyntaxError, match="position"):
            store.search_runs(RunQuery(filter="experiment:svm AND (status:failed"))

    # runs: sort, limit, fields ---------------------------------------------------------
    @pytest.mark.parametrize("order", ["asc", "desc"])
    def test_sort_by_a_metric_puts_runs_without_it_last(self, store: Store, order: Any) -> None:
        store.write_runs(DOCS)
        got = ids(store.search_runs(RunQuery(sort=[("metrics.test.acc", order)], limit=None)))
        scored = sorted(
            (d for d in DOCS if metric(d, "test") is not None),
            key=lambda d: metric(d, "test"),
            reverse=order == "desc",
        )
        assert got[: len(scored)] == ids(scored)
        assert set(got[len(scored) :]) == {d["run_id"] for d in DOCS if "test" not in d["metrics"]}

    def test_sort_by_two_fields(self, store: Store) -> None:
        store.write_runs(DOCS)
        query = RunQuery(sort=[("experiment", "asc"), ("metrics.val.acc", "desc")], limit=None)
        expected = sorted(DOCS, key=lambda d: (d["experiment"], -metric(d, "val")))
        assert ids(store.search_runs(query)) == ids(expected)

    def test_limit_keeps_the_first_runs_in_order(self, store: Store) -> None:
        store.write_runs(DOCS)
        got = store.search_runs(RunQuery(sort=[("metrics.val.acc", "desc")], limit=3))
        assert ids(got) == ["run-04", "run-06", "run-00"]

    def test_no_limit_returns_every_run(self, store: Store) -> None:
        store.write_runs(DOCS)
        assert len(store.search_runs(RunQuery(limit=None))) == len(DOCS)

    def test_fields_project_runs_to_nested_dicts(self, store: Store) -> None:
        store.write_runs(DOCS)
        query = RunQuery(
            filter="run_id:run-03", fields=["run_id", "metrics.val.acc", "params.model.C"]
        )
        assert store.search_runs(query) == [
            {"run_id": "run-03", "metrics": {"val": {"acc": 0.80}}, "params": {"model.C": 3.0}}
        ]

    def test_unknown_sort_field_is_an_error(self, store: Store) -> None:
        store.write_runs(DOCS)
        with pytest.raises(QuerySyntaxError, match=r"metrics\.val\.acc"):
            store.search_runs(RunQuery(sort=[("metrics.val.accc", "desc")]))

    # best per experiment ------------------------------------------------------------------
    def test_best_per_experiment_by_hand(self, store: Store) -> None:
        store.write_runs(DOCS)
        got = store.best_per_experiment(RankQuery("metrics.val.acc", "max"))
        assert [(b.experiment, b.score, b.run["run_id"], b.run_count) for b in got] == [
            ("knn", 0.95, "run-04", 3),
            ("random-forest", 0.93, "run-06", 3),
            ("svm", 0.91, "run-00", 3),
        ]
        assert got[0].run == DOCS[4]

    @pytest.mark.parametrize(
        ("split", "name", "direction", "text", "keep"),
        [
            pytest.param("val", "acc", "max", None, lambda d: True, id="max"),
            pytest.param("val", "loss", "min", None, lambda d: True, id="min"),
            pytest.param("test", "acc", "max", None, lambda d: True, id="some-runs-lack-it"),
            pytest.param(
                "val",
                "acc",
                "max",
                "NOT tags:debug",
                lambda d: "debug" not in d["tags"],
                id="filtered",
            ),
            pytest.param(
                "val",
                "acc",
                "min",
                "status:completed",
                lambda d: d["status"] == "completed",
                id="filtered-min",
            ),
        ],
    )
    def test_best_per_experiment_matches_plain_python(
        self,
        store: Store,
        split: str,
        name: str,
        direction: Any,
        text: str | None,
        keep: Callable[[dict[str, Any]], bool],
    ) -> None:
        store.write_runs(DOCS)
        got = store.best_per_experiment(RankQuery(f"metrics.{split}.{name}", direction, text))
        expected = expected_best(DOCS, split, name, direction, keep)
        assert [(b.experiment, b.score, b.run["run_id"], b.run_count) for b in got] == expected

    def test_nan_and_missing_values_never_win(self, store: Store) -> None:
        docs = [
            run_doc("a-nan", "a", math.nan, day=1),
            run_doc("a-low", "a", 0.5, day=2),
            run_doc("b-nan", "b", math.nan, day=3),
            run_doc("b-none", "b", None, day=4),
            run_doc("c-one", "c", 0.7, day=5),
        ]
        store.write_runs(docs)
        got = store.best_per_experiment(RankQuery("metrics.val.acc", "max"))
        assert [(b.experiment, b.score, b.run["run_id"], b.run_count) for b in got] == [
            ("c", 0.7, "c-one", 1),
            ("a", 0.5, "a-low", 2),
        ]

    def test_ties_go_to_the_earlier_end_then_the_smaller_run_id(self, store: Store) -> None:
        docs = [
            run_doc("tie-2", "t", 0.9, day=2),
            run_doc("tie-1", "t", 0.9, day=3),
            run_doc("tie-0", "t", 0.9, day=2),
            run_doc("u-late", "u", 0.9, day=9),
            run_doc("v-early", "v", 0.9, day=1),
        ]
        store.write_runs(docs)
        got = store.best_per_experiment(RankQuery("metrics.val.acc", "max"))
        assert [(b.experiment, b.run["run_id"]) for b in got] == [
            ("v", "v-early"),
            ("t", "tie-0"),
            ("u", "u-late"),
        ]

    def test_a_running_run_is_never_an_experiments_best(self, store: Store) -> None:
        """A running run's score is not final: it never leads its experiment, whether it
        scores higher or ties (its twin without an end), on every store."""
        running = [
            dict(run_doc("a-ahead", "a", 0.97, day=3), status="running", ended_at=None),
            dict(run_doc("a-twin", "a", 0.90, day=1), status="running", ended_at=None),
            dict(run_doc("b-only", "b", 0.99, day=4), status="running", ended_at=None),
        ]
        finished = [run_doc("a-done", "a", 0.90, day=2), run_doc("c-done", "c", 0.5, day=2)]
        store.write_runs(running + finished)
        got = store.best_per_experiment(RankQuery("metrics.val.acc", "max"))
        assert [(b.experiment, b.score, b.run["run_id"], b.run_count) for b in got] == [
            ("a", 0.90, "a-done", 3),
            ("c", 0.5, "c-done", 1),
        ]

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            pytest.param("params.data.augment:TRUE", ["bool-true"], id="upper"),
            pytest.param("params.data.augment:True", ["bool-true"], id="title"),
            pytest.param("params.data.augment:true", ["bool-true"], id="lower"),
            pytest.param("params.data.augment:FALSE", ["bool-false"], id="false"),
            pytest.param(
                "NOT params.data.augment:TRUE",
                ["bool-false", "mixed-true", "mixed-text", "mixed-word"],
                id="negated",
            ),
            pytest.param("params.data.mode:TRUE", ["mixed-true", "mixed-word"], id="mixed"),
            pytest.param("params.data.mode:true", ["mixed-true"], id="mixed-lower"),
            pytest.param("params.data.mode:auto", ["mixed-text"], id="mixed-text"),
        ],
    )
    def test_boolean_params_match_true_in_any_case(
        self, store: Store, text: str, expected: list[str]
    ) -> None:
        """A boolean param is a boolean column on the local store (``TRUE`` matches it) and a
        keyword ``true`` on Elasticsearch: both stores find the same runs; where a key holds
        booleans and text, the boolean's word matches in any case and text as written."""
        docs = [
            dict(run_doc("bool-true", "p", 0.5), params={"data.augment": True}),
            dict(run_doc("bool-false", "p", 0.5), params={"data.augment": False}),
            dict(run_doc("mixed-true", "p", 0.5), params={"data.mode": True}),
            dict(run_doc("mixed-text", "p", 0.5), params={"data.mode": "auto"}),
            dict(run_doc("mixed-word", "p", 0.5), params={"data.mode": "TRUE"}),
        ]
        store.write_runs(docs)
        assert ids(store.search_runs(RunQuery(filter=text, sort=(("run_id", "asc"),)))) == sorted(
            expected
        )

    def test_best_per_experiment_of_an_unknown_metric_is_an_error(self, store: Store) -> None:
        store.write_runs(DOCS)
        with pytest.raises(QuerySyntaxError, match=r"metrics\.val\.acc"):
            store.best_per_experiment(RankQuery("metrics.val.accuracy", "max"))

    def test_date_math_filters_runs_by_end_time(self, store: Store) -> None:
        """Kibana's ``ended_at:>now-7d``: Elasticsearch evaluates it, the local store too."""
        from datetime import UTC, datetime, timedelta

        from warehouse.models import Run

        now = datetime.now(UTC)
        store.write_runs(
            [
                Run(
                    run_id=f"age-{days}", experiment="e", ended_at=now - timedelta(days=days)
                ).to_doc()
                for days in (1, 3, 10, 40)
            ]
        )
        recent = store.search_runs(RunQuery(filter="ended_at:>now-7d", sort=(("run_id", "asc"),)))
        assert ids(recent) == ["age-1", "age-3"]
        older = store.search_runs(
            RunQuery(filter="ended_at:[now-30d TO now-7d]", sort=(("run_id", "asc"),))
        )
        assert ids(older) == ["age-10"]

    def test_ranked_views_are_empty_while_every_value_was_non_finite(self, store: Store) -> None:
        """Every val.acc so far was NaN: no store has the field, yet it is no typo."""
        from warehouse.models import Run
        from warehouse.query import views

        doc = Run(
            run_id="nan-run",
            experiment="e",
            status="completed",
            metrics={"val": {"loss": 0.5}},
            invalid_metrics=["val.acc"],
        ).to_doc()
        store.write_runs([doc])
        assert views.leaderboard(store, "val.acc", "max") == []
        assert views.best(store, "val.acc", "max") == []
        assert views.best(store, "val.acc", "max", limit=3) == []
        assert views.decomposition(store, "val.acc", "max") == []
        with pytest.raises(QuerySyntaxError, match=r"val\.loss"):  # a typo is still an error
            views.leaderboard(store, "val.los", "min")

    # grouped counts -------------------------------------------------------------------------
    def test_count_by_counts_what_python_counts(self, store: Store) -> None:
        store.write_runs(DOCS)
        assert store.count_by(CountQuery("experiment")) == {"svm": 3, "knn": 3, "random-forest": 3}
        completed = [d for d in DOCS if d["status"] == "completed"]
        expected: dict[str, int] = {}
        for doc in completed:
            expected[doc["experiment"]] = expected.get(doc["experiment"], 0) + 1
        assert store.count_by(CountQuery("experiment", "status:completed")) == expected
        tags: dict[str, int] = {}
        for doc in DOCS:
            for tag in doc["tags"]:
                tags[tag] = tags.get(tag, 0) + 1
        assert store.count_by(CountQuery("tags")) == tags  # a list counts each element
        assert store.count_by(CountQuery("experiment", "experiment:nothing")) == {}

    # grouped samples ------------------------------------------------------------------------
    def test_group_samples_counts_what_python_counts(self, store: Store) -> None:
        rows = grouped_rows()
        self._write_grouped(store, rows)
        got = store.group_samples(GroupQuery(("g1", "g2"), "val", "label", "correct"))
        expected = []
        for run_id in ("g1", "g2"):
            for label in sorted({r["label"] for r in rows[run_id]}):
                mine = [r["correct"] for r in rows[run_id] if r["label"] == label]
                expected.append((run_id, label, len(mine), sum(mine), mine.count(False)))
        assert [(g.run_id, g.key, g.n, g.total, g.wrong) for g in got] == expected

    def test_the_most_wrong_samples_across_runs_come_first(self, store: Store) -> None:
        rows = grouped_rows()
        self._write_grouped(store, rows)
        query = GroupQuery(("g1", "g2"), "val", "sample_id", "correct", per_run=False)
        got = store.group_samples(replace(query, order="wrong", limit=3))
        wrong: dict[str, int] = {}
        for run_rows in rows.values():
            for r in run_rows:
                wrong[r["sample_id"]] = wrong.get(r["sample_id"], 0) + (not r["correct"])
        expected = sorted(wrong, key=lambda s: (-wrong[s], s))[:3]
        assert [(g.key, g.n, g.wrong) for g in got] == [(s, 2, wrong[s]) for s in expected]

    def test_numeric_groups_can_be_binned(self, store: Store) -> None:
        rows = grouped_rows()
        self._write_grouped(store, rows)
        query = GroupQuery(("g1",), "val", "size", "correct", per_run=False, bins=2)
        low, high = got = store.group_samples(query)
        sizes = [r["size"] for r in rows["g1"]]
        middle = (min(sizes) + max(sizes)) / 2
        assert low.key == (min(sizes), middle)
        assert high.key == (middle, max(sizes))
        assert low.n == sum(1 for s in sizes if s < middle)
        assert high.n == sum(1 for s in sizes if s >= middle)  # the last bin is closed
        assert len(got) == 2

    def _write_grouped(self, store: Store, rows: dict[str, list[dict[str, Any]]]) -> None:
        for run_id, run_rows in rows.items():
            store.write_runs([run_doc(run_id, "grouped", 0.5)])
            store.write_samples(run_id, "grouped", "val", [pa.RecordBatch.from_pylist(run_rows)])

    # samples --------------------------------------------------------------------------------
    def test_write_samples_returns_the_row_count(self, store: Store) -> None:
        store.write_runs(DOCS[:1])
        assert store.write_samples("run-00", "svm", "val", sample_batches()) == len(SAMPLES)

    @pytest.mark.parametrize("order", ["asc", "desc"])
    def test_samples_sort_with_missing_values_last(self, store: Store, order: Any) -> None:
        store.write_runs(DOCS[:1])
        store.write_samples("run-00", "svm", "val", sample_batches())
        query = SampleQuery(run_id="run-00", split="val", sort="pixel_acc", order=order, limit=None)
        got = [r["sample_id"] for r in store.search_samples(query)]
        assert got == by_value(SAMPLES, "pixel_acc", desc=order == "desc")

    def test_samples_limit_and_offset_page_through_the_order(self, store: Store) -> None:
        store.write_runs(DOCS[:1])
        store.write_samples("run-00", "svm", "val", sample_batches())
        query = SampleQuery(run_id="run-00", split="val", sort="pixel_acc", limit=3, offset=2)
        got = [r["sample_id"] for r in store.search_samples(query)]
        assert got == by_value(SAMPLES, "pixel_acc", desc=False)[2:5]

    def test_sample_rows_carry_their_run_split_and_columns(self, store: Store) -> None:
        store.write_runs(DOCS[:1])
        store.write_samples("run-00", "svm", "val", sample_batches())
        query = SampleQuery(run_id="run-00", split="val", sort="pixel_acc", limit=1)
        (row,) = store.search_samples(query)
        assert row["sample_id"] == "s2"
        assert row["run_id"] == "run-00"
        assert row["experiment"] == "svm"
        assert row["split"] == "val"
        assert row["label"] == "cat"
        assert row["correct"] is False
        assert row["output_uri"] == "file:///out/s2.png"

    @pytest.mark.parametrize(
        ("text", "predicate"),
        [
            pytest.param("correct:false", lambda r: r["correct"] is False, id="boolean"),
            pytest.param(
                "label:cat AND pixel_acc:<0.5",
                lambda r: r["label"] == "cat" and (r["pixel_acc"] or 1) < 0.5,
                id="and-range",
            ),
            pytest.param("NOT _exists_:pixel_acc", lambda r: r["pixel_acc"] is None, id="missing"),
            pytest.param("output_uri:*s1*", lambda r: "s1" in r["output_uri"], id="wildcard"),
        ],
    )
    def test_sample_filter_selects_what_python_selects(
        self, store: Store, text: str, predicate: Callable[[dict[str, Any]], bool]
    ) -> None:
        store.write_runs(DOCS[:1])
        store.write_samples("run-00", "svm", "val", sample_batches())
        query = SampleQuery(run_id="run-00", split="val", filter=text, sort="sample_id", limit=None)
        got = [r["sample_id"] for r in store.search_samples(query)]
        assert got == sorted(r["sample_id"] for r in SAMPLES if predicate(r))

    def test_writing_a_split_again_replaces_its_samples(self, store: Store) -> None:
        store.write_runs(DOCS[:1])
        store.write_samples("run-00", "svm", "val", sample_batches())
        replacement = pa.record_batch({"sample_id": ["s9", "s0"], "pixel_acc": [0.4, 0.6]})
        assert store.write_samples("run-00", "svm", "val", [replacement]) == 2
        query = SampleQuery(run_id="run-00", split="val", sort="pixel_acc", limit=None)
        got = [(r["sample_id"], r["pixel_acc"]) for r in store.search_samples(query)]
        assert got == [("s9", 0.4), ("s0", 0.6)]

    def test_all_splits_are_searched_when_no_split_is_given(self, store: Store) -> None:
        store.write_runs(DOCS[:1])
        store.write_samples("run-00", "svm", "val", sample_batches())
        train = pa.record_batch({"sample_id": ["t0", "t1"], "pixel_acc": [0.05, 0.95]})
        store.write_samples("run-00", "svm", "train", [train])
        query = SampleQuery(run_id="run-00", sort="pixel_acc", order="desc", limit=2)
        got = [(r["split"], r["sample_id"]) for r in store.search_samples(query)]
        assert got == [("train", "t1"), ("val", "s3")]
        everything = list(store.search_samples(SampleQuery(run_id="run-00", limit=None)))
        assert len(everything) == len(SAMPLES) + 2

    def test_sample_batches_read_a_split_back_in_write_order(self, store: Store) -> None:
        store.write_runs(DOCS[:1])
        store.write_samples("run-00", "svm", "val", sample_batches())
        table = pa.Table.from_batches(list(store.sample_batches("run-00", "val")))
        assert table.column("sample_id").to_pylist() == [s["sample_id"] for s in SAMPLES]
        picked = pa.Table.from_batches(
            list(store.sample_batches("run-00", "val", columns=["sample_id", "pixel_acc"]))
        )
        assert picked.column("pixel_acc").to_pylist() == [s.get("pixel_acc") for s in SAMPLES]
        with pytest.raises(NotFound):
            list(store.sample_batches("run-00", "test"))

    def test_a_split_without_samples_is_empty(self, store: Store) -> None:
        store.write_runs(DOCS[:1])
        store.write_samples("run-00", "svm", "val", sample_batches())
        assert list(store.search_samples(SampleQuery(run_id="run-00", split="test"))) == []

    def test_samples_of_an_unknown_run_are_not_found(self, store: Store) -> None:
        store.write_runs(DOCS[:1])
        with pytest.raises(NotFound, match="no-such-run"):
            list(store.search_samples(SampleQuery(run_id="no-such-run")))

    def test_sorting_samples_by_an_unknown_column_is_an_error(self, store: Store) -> None:
        store.write_runs(DOCS[:1])
        store.write_samples("run-00", "svm", "val", sample_batches())
        with pytest.raises(QuerySyntaxError, match="pixel_acc"):
            list(store.search_samples(SampleQuery(run_id="run-00", split="val", sort="pixel_ac")))

    # steps ------------------------------------------------------------------------------------
    def test_steps_come_back_in_seq_order_with_the_first_write_winning(self, store: Store) -> None:
        # a step sent again (a retry after a timeout, a replay of spilled steps) is already
        # stored: Elasticsearch's data stream only creates, so every store keeps the first copy
        store.write_runs(DOCS[:1])
        first = [_step(seq, loss=1.0 / (seq + 1)) for seq in (2, 0, 1)]
        store.write_steps("run-00", "svm", first)
        store.write_steps("run-00", "svm", [_step(1, loss=0.25), _step(3, loss=0.2)])
        got = list(store.steps(StepRange(run_id="run-00")))
        assert [s["seq"] for s in got] == [0, 1, 2, 3]
        assert [s["metrics"]["loss"] for s in got] == [1.0, 0.5, 1.0 / 3, 0.2]
        assert {(s["run_id"], s["experiment"]) for s in got} == {("run-00", "svm")}

    def test_steps_after_a_seq_with_a_limit(self, store: Store) -> None:
        store.write_runs(DOCS[:1])
        store.write_steps("run-00", "svm", [_step(seq, loss=1.0) for seq in range(10)])
        got = list(store.steps(StepRange(run_id="run-00", after_seq=4, limit=3)))
        assert [s["seq"] for s in got] == [5, 6, 7]


def _step(seq: int, loss: float) -> dict[str, Any]:
    stamp = (T0 + timedelta(seconds=seq)).isoformat().replace("+00:00", "Z")
    return {
        "@timestamp": stamp,
        "seq": seq,
        "step": seq * 10,
        "epoch": 0,
        "metrics": {"loss": loss},
    }


def _safe(predicate: Callable[[dict[str, Any]], bool], doc: dict[str, Any]) -> bool:
    """A predicate over a doc that lacks the field is False (comparisons with None)."""
    try:
        return bool(predicate(doc))
    except TypeError:
        return False
