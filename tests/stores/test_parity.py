"""Parity: the local store and Elasticsearch answer every filter and view the same way.

One data set is written through each store's normal write path (``write_runs``): the local
store in this test's warehouse folder, and the session's Elasticsearch-API server (noida-db,
or a real cluster when ``WAREHOUSE_TEST_ES_URL`` is set). Then one list of filters runs on
both, and the ranked views (leaderboard, best, over-time) too: the run ids, ranks and scores
must be identical. The expected ids of the filters whose meaning is Elasticsearch's own
(date rounding, analysed text, params_extra) are also checked against answers worked out by
hand from the data below, so that both stores agreeing on a wrong answer fails too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from warehouse.errors import QuerySyntaxError
from warehouse.filters import lucene
from warehouse.models import Run, RunError, RunStatus
from warehouse.query import views
from warehouse.stores.base import RunQuery, Store
from warehouse.stores.elastic import ElasticStore
from warehouse.stores.elastic_templates import MAX_TYPED_PARAMS
from warehouse.stores.local import LocalStore

NOW = datetime.now(UTC).replace(microsecond=0)
DAY = datetime(2025, 11, 20, tzinfo=UTC)  # a fixed day, more than a month before now
HUGE = {f"zz.key{i:04d}": i * 0.5 for i in range(MAX_TYPED_PARAMS + 20)}
"""A huge config: keys sorted past the first 1,000 live in params_extra on Elasticsearch."""


def _run(
    run_id: str,
    experiment: str,
    ended: datetime | None,
    acc: float | None,
    *,
    tags: tuple[str, ...] = (),
    status: str = "completed",
    message: str | None = None,
    git_message: str = "fix the loader",
    dirty: bool = False,
    params: dict[str, Any] | None = None,
    duration: float | None = 60.0,
) -> dict[str, Any]:
    nan = acc is not None and math.isnan(acc)
    metrics: dict[str, dict[str, float]] = {"train": {"acc": 0.99}}
    if acc is not None:
        metrics["val"] = {"acc": acc}
        if not math.isnan(acc):
            metrics["test"] = {"acc": round(acc - 0.01, 4)}
    return Run(
        run_id=run_id,
        experiment=experiment,
        tags=list(tags),
        status=RunStatus(status),
        error=RunError(type="RuntimeError", message=message) if message else None,
        started_at=(ended or NOW) - timedelta(hours=1),
        ended_at=ended,
        duration_s=duration,
        git={"commit": "abc123", "dirty": dirty, "message": git_message},
        params={"model.C": 1.0, "model.kind": "rbf", **(params or {})},
        metrics=metrics,
        invalid_metrics=["val.acc"] if nan else [],
    ).to_doc()


DOCS = [
    # the day 2026-11-20 and its edges (date-only bounds and rounding)
    _run("d-start", "day", DAY, 0.80, tags=("edge",)),
    _run("d-noon", "day", DAY + timedelta(hours=12, microseconds=123_456), 0.85),
    _run("d-last-ms", "day", DAY + timedelta(days=1, microseconds=-500), 0.82, tags=("edge",)),
    _run("d-next", "day", DAY + timedelta(days=1), 0.79, tags=("edge", "next")),
    _run("d-before", "day", DAY - timedelta(milliseconds=1), 0.81),
    _run("d-second", "day", DAY + timedelta(hours=10, milliseconds=999), 0.83),
    _run("d-nov1", "day", datetime(2025, 11, 1, 18, tzinfo=UTC), 0.70),
    _run("d-oct", "day", datetime(2025, 10, 15, 8, tzinfo=UTC), 0.65, tags=("old",)),
    # relative to now (date math), far from every day boundary the filters use
    _run("r-3d", "recent", NOW - timedelta(days=3, hours=2), 0.91, tags=("new",)),
    _run("r-10d", "recent", NOW - timedelta(days=10, hours=2), 0.93),
    _run("r-40d", "recent", NOW - timedelta(days=40), 0.88),
    _run(
        "r-crash",
        "recent",
        NOW - timedelta(days=2),
        math.nan,
        status="failed",
        message="CUDA error: out of memory (tried to allocate 2.00 GiB)",
    ),
    _run(
        "r-oom",
        "recent",
        NOW - timedelta(days=1),
        None,
        status="failed",
        message="Out-of-memory killer stopped the job",
    ),
    _run(
        "r-mem",
        "recent",
        NOW - timedelta(days=5),
        0.5,
        message="memory use was out of range",
        git_message="Memory: use less",
    ),
    _run("r-running", "recent", None, None, status="running", duration=None),
    # ties, experiments, params
    _run("t-a", "ties", datetime(2025, 9, 1, tzinfo=UTC), 0.95, params={"opt": "adam"}),
    _run("t-b", "ties", datetime(2025, 9, 1, tzinfo=UTC), 0.95, params={"opt": "adamw"}),
    _run("t-c", "ties", datetime(2025, 9, 2, tzinfo=UTC), 0.95, params={"opt": "sgd"}),
    _run("t-dirty", "ties", datetime(2025, 9, 3, tzinfo=UTC), 0.6, dirty=True, duration=5.0),
    _run(
        "p-typed",
        "params",
        datetime(2025, 8, 1, tzinfo=UTC),
        0.7,
        params={"zz.key1010": "typed-here", "zz.key1019": 3.0},
    ),
    _run(
        "p-huge",
        "params",
        datetime(2025, 8, 2, tzinfo=UTC),
        0.72,
        params={**HUGE, "zz.key1010": "huge-value", "opt": "adam"},
    ),
]
"""run ids tell what each run is for; expected answers below are worked out from them."""


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, es_url: str) -> Iterator[dict[str, Store]]:
    """Both stores holding :data:`DOCS`, written through ``write_runs`` (module-wide)."""
    import uuid

    from tests.servers import wipe_prefix

    home: Path = tmp_path_factory.mktemp("parity") / "warehouse"
    prefix = f"parity-{uuid.uuid4().hex[:8]}"
    local = LocalStore(home)
    es = ElasticStore(es_url, prefix=prefix)
    es.install()
    for store in (local, es):
        store.write_runs(DOCS)
    try:
        yield {"local": local, "elasticsearch": es}
    finally:
        local.close()
        es.close()
        wipe_prefix(es_url, prefix)


# (filter, expected run ids or None: "whatever, as long as both stores agree")
FILTERS: list[tuple[str, set[str] | None]] = [
    # keyword text, lists, booleans, numbers
    ("experiment:day", None),
    ('experiment:"ties"', {"t-a", "t-b", "t-c", "t-dirty"}),
    ("experiment:(day OR ties)", None),
    ("tags:edge", {"d-start", "d-last-ms", "d-next"}),
    ("tags:edge AND NOT tags:next", {"d-start", "d-last-ms"}),
    ("tags:ed*", {"d-start", "d-last-ms", "d-next"}),
    ("run_id:d-?ext", {"d-next"}),
    ("status:failed", {"r-crash", "r-oom"}),
    ("git.dirty:true", {"t-dirty"}),
    ("NOT git.dirty:false", {"t-dirty"}),
    ("duration_s:<10", {"t-dirty"}),
    ("metrics.val.acc:>=0.9", {"r-3d", "r-10d", "t-a", "t-b", "t-c"}),
    ("metrics.val.acc:[0.8 TO 0.85}", {"d-start", "d-last-ms", "d-before", "d-second"}),
    ("metrics.val.acc:0.95", {"t-a", "t-b", "t-c"}),
    ("metrics.val.acc:{0.5 TO *]", None),
    # NaN / missing metrics
    ("_exists_:metrics.val.acc AND experiment:recent", {"r-3d", "r-10d", "r-40d", "r-mem"}),
    ("NOT _exists_:metrics.val.acc", {"r-crash", "r-oom", "r-running"}),
    ('invalid_metrics:"val.acc"', {"r-crash"}),
    ("NOT metrics.val.acc:<0.9 AND experiment:recent", None),
    # dates: bare dates, bounds, rounding, date math
    ("ended_at:2025-11-20", {"d-start", "d-noon", "d-last-ms", "d-second"}),
    (
        "ended_at:<=2025-11-20 AND experiment:day",
        {"d-start", "d-noon", "d-last-ms", "d-before", "d-second", "d-nov1", "d-oct"},
    ),
    ("ended_at:<2025-11-20 AND experiment:day", {"d-before", "d-nov1", "d-oct"}),
    ("ended_at:>2025-11-20 AND experiment:day", {"d-next"}),
    (
        "ended_at:>=2025-11-20 AND experiment:day",
        {"d-start", "d-noon", "d-last-ms", "d-next", "d-second"},
    ),
    (
        "ended_at:[2025-11-20 TO 2025-11-21] AND experiment:day",
        {"d-start", "d-noon", "d-last-ms", "d-next", "d-second"},
    ),
    ("ended_at:{2025-11-19 TO 2025-11-21}", {"d-start", "d-noon", "d-last-ms", "d-second"}),
    ('ended_at:"2025-11-20T10:00:00"', {"d-second"}),
    ('ended_at:>="2025-11-20T10:00:00.999"', None),
    ('ended_at:<="2025-11-20T12:00:00.123Z"', None),
    ('ended_at:"2025-11-20T11:00:00+01:00"', {"d-second"}),
    ("ended_at:2025-11 AND experiment:day", {"d-nov1"}),
    ('ended_at:>="2025-11-20||-1d/M" AND ended_at:<"2025-11-20||/d"', {"d-before", "d-nov1"}),
    ("ended_at:>now-7d", {"r-3d", "r-crash", "r-oom", "r-mem"}),
    ("ended_at:[now-30d/d TO now-7d/d]", {"r-10d"}),
    ("ended_at:<now-1M/M AND experiment:recent", None),
    (
        "_exists_:ended_at AND experiment:recent",
        {"r-3d", "r-10d", "r-40d", "r-crash", "r-oom", "r-mem"},
    ),
    ("NOT _exists_:ended_at", {"r-running"}),
    # analysed text: words and phrases, as Elasticsearch's standard analyser makes them
    ('error.message:"out of memory"', {"r-crash", "r-oom"}),
    ("error.message:memory", {"r-crash", "r-oom", "r-mem"}),
    ("error.message:MEMORY AND NOT error.message:killer", {"r-crash", "r-mem"}),
    ('error.message:"memory out"', set()),
    ("error.message:memor*", {"r-crash", "r-oom", "r-mem"}),
    ("_exists_:error.message", {"r-crash", "r-oom", "r-mem"}),
    ('git.message:"memory use"', {"r-mem"}),
    ("git.message:loader OR error.message:gib", None),
    # params: typed, and kept in params_extra past 1,000 keys
    ("params.opt:adam", {"t-a", "p-huge"}),
    ("params.opt:adam*", {"t-a", "t-b", "p-huge"}),
    ("params.model.C:>=1 AND experiment:params", {"p-typed", "p-huge"}),
    ('params.zz.key1010:"huge-value"', {"p-huge"}),
    ("params.zz.key1010:*value", None),  # an error: see test_wildcards_on_params_extra
    ("params.zz.key1010:typed*", {"p-typed"}),
    ("params.zz.key1010:huge*", {"p-huge"}),
    ("params.zz.key1010:>m", {"p-typed"}),
    ("params.zz.key1010:<m", {"p-huge"}),
    ("_exists_:params.zz.key1015", {"p-huge"}),
    ('params.zz.key1015:"507.5"', {"p-huge"}),
    ("params.zz.key1010:[h TO i]", {"p-huge"}),
    ("params.zz.key1019:3", {"p-typed"}),
    # (params.zz.key1019:>=2 would also find p-huge's "509.5" as text on Elasticsearch; the
    # test server compares no number kept in a flattened field with a text bound)
    ("params.zz.key0001:0.5", {"p-huge"}),
    # bare terms, nesting, Lucene's clause rules
    ("ties", {"t-a", "t-b", "t-c", "t-dirty"}),
    ("edge OR new", {"d-start", "d-last-ms", "d-next", "r-3d"}),
    ("+experiment:recent -status:failed -status:running", {"r-3d", "r-10d", "r-40d", "r-mem"}),
    (
        "NOT (experiment:day OR experiment:recent OR experiment:params)",
        {"t-a", "t-b", "t-c", "t-dirty"},
    ),
    (
        "(experiment:ties AND NOT (metrics.val.acc:0.95 AND params.opt:adam)) OR tags:old",
        {"t-b", "t-c", "t-dirty", "d-oct"},
    ),
    ("experiment:ties && !(params.opt:sgd || git.dirty:true)", {"t-a", "t-b"}),
]
ERRORS = {"params.zz.key1010:*value"}


def _ids(store: Store, text: str) -> list[str]:
    found = store.search_runs(RunQuery(filter=text, sort=(("run_id", "asc"),), limit=None))
    return [str(d["run_id"]) for d in found]


def test_the_filter_list_covers_what_it_must() -> None:
    assert len(FILTERS) >= 40
    texts = " ".join(f for f, _ in FILTERS)
    for needle in ("now-", "||", '"out of memory"', "*", "?", "_exists_", "NOT", "OR", "zz."):
        assert needle in texts


@pytest.mark.parametrize(("text", "expected"), FILTERS, ids=[f for f, _ in FILTERS])
def test_every_filter_finds_the_same_runs(
    stores: dict[str, Store], text: str, expected: set[str] | None
) -> None:
    if text in ERRORS:  # refused, by both stores alike
        messages = []
        for store in stores.values():
            with pytest.raises(QuerySyntaxError) as caught:
                _ids(store, text)
            messages.append(str(caught.value))
        assert messages[0] == messages[1]
        return
    local, es = _ids(stores["local"], text), _ids(stores["elasticsearch"], text)
    assert local == es, f"{text!r}: local {local} != elasticsearch {es}"
    if expected is not None:
        assert set(local) == expected, text


def test_wildcards_on_params_extra_are_one_clear_error_everywhere(
    stores: dict[str, Store],
) -> None:
    messages = []
    for store in stores.values():
        with pytest.raises(QuerySyntaxError) as caught:
            _ids(store, "params.zz.key1010:*value")
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert "params_extra" in messages[0]
    assert "params.zz.key1010:abc*" in messages[0]


@pytest.mark.parametrize(
    "text",
    [
        "error.message:[a TO z]",
        "metrics.val.acc:abc*",
        "ended_at:now-3x",
        "nosuch.field:1",
        "params.zz.key1015:[507 TO 508]",  # kept as text only: no numeric range
    ],
)
def test_refused_filters_are_refused_by_both_stores(stores: dict[str, Store], text: str) -> None:
    messages = []
    for store in stores.values():
        with pytest.raises(QuerySyntaxError) as caught:
            _ids(store, text)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_analysed_fields_are_the_ones_elasticsearch_maps_as_text(
    stores: dict[str, Store],
) -> None:
    es = stores["elasticsearch"]
    assert isinstance(es, ElasticStore)
    analysed = {f for f, kind in es.columns("runs").items() if kind == lucene.ANALYZED}
    assert analysed == set(lucene.ANALYZED_RUN_FIELDS)


VIEW_FILTERS = [None, "experiment:(day OR ties)", "ended_at:<=2025-11-20", "NOT tags:edge"]


@pytest.mark.parametrize("where", VIEW_FILTERS)
@pytest.mark.parametrize("metric", ["val.acc", "test.acc"])
def test_ranked_views_give_the_same_ids_ranks_and_scores(
    stores: dict[str, Store], where: str | None, metric: str
) -> None:
    answers = []
    for store in stores.values():
        answers.append(
            {
                "leaderboard": views.leaderboard(store, metric, filter=where),
                "best": views.best(store, metric, filter=where, limit=5),
                "best_each": views.best(store, metric, filter=where, per_experiment=True),
                "over_time": views.over_time(store, metric, filter=where),
                "over_time_latest": views.over_time(store, metric, filter=where, limit=4),
                "by_month": views.over_time(store, metric, filter=where, interval="month"),
                "by_day": views.over_time(store, metric, filter=where, interval="day", limit=9),
            }
        )
    local, es = answers
    for view in local:
        assert _comparable(local[view]) == _comparable(es[view]), view
    assert local["leaderboard"], "the views have something to compare"
    # the over-time points with a limit are the last points of the whole series
    assert local["over_time_latest"] == local["over_time"][-4:]


def _comparable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with their times as instants (each store writes its own time format)."""
    out = []
    for row in rows:
        copy = dict(row)
        if isinstance(copy.get("ended_at"), str):
            copy["ended_at"] = datetime.fromisoformat(copy["ended_at"].replace("Z", "+00:00"))
        out.append(copy)
    return out
