"""The Kibana views past 10,000 runs: each view's request, built exactly as Kibana builds it
(``%context%`` = the dashboard query, ``%timefield%`` = the time picker's range, the automatic
interval), is run on the ES-API test server over runs bulk-loaded into it, the answer read at
the spec's ``format.property`` and pushed through the spec's transforms; the chart data must
equal the CLI's answer (``warehouse.query.views``) on the same store and filter.

The data: old experiments with many runs, and ``exp-new`` whose late runs beat them all — a
view that fetched the first 10,000 hits by end time (the old ``size: 10000``) never saw them.
Also: ties on the best score (the earlier run wins), running runs without an end, failed runs
without metrics, runs outside the time range, and an experiment the dashboard query leaves out.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.kibana.test_vega_views import (
    BUCKET_FIELDS,
    as_bucket_rows,
    as_float,
    expected_buckets,
    plotted,
)
from tests.servers import wipe_prefix
from warehouse.dashboards.vega import auto_interval, kibana_request, spec_for_kibana
from warehouse.models import Run, RunStatus
from warehouse.query import views
from warehouse.settings import Settings, load
from warehouse.stores import open_store

NOW = datetime.now(UTC).replace(microsecond=0)
SPAN = timedelta(days=90)  # the dashboard's time picker: now-90d .. now
LEFT_OUT = "exp-3"
LUCENE = f'NOT experiment:"{LEFT_OUT}"'  # what the user typed in the query bar (Lucene)
CONTEXT = {  # what Kibana puts in %context% for that query bar and no filter pills
    "bool": {
        "must": [{"query_string": {"query": LUCENE, "analyze_wildcard": True}}],
        "filter": [],
        "should": [],
        "must_not": [],
    }
}


def make_runs(total: int, seed: int = 7) -> list[dict[str, Any]]:
    """``total`` runs over the last ~100 days; ``exp-new``'s last eighth beats every other."""
    rng = random.Random(seed)
    late = total // 8
    docs: list[dict[str, Any]] = []

    def add(experiment: str, started: datetime, val: float | None, status: RunStatus) -> None:
        ended = started + timedelta(minutes=rng.randint(1, 90))
        metrics = {}
        if val is not None:
            train = min(1.0, val + rng.choice([-0.01, 0.0, 0.02, 0.05]))  # some val > train
            metrics = {
                "train": {"acc": train, "loss": round(1 - train, 6)},
                "val": {"acc": val, "loss": round(1.5 * (1 - val) + 0.01, 6)},
            }
            if rng.random() < 0.7:
                metrics["test"] = {"acc": val - rng.choice([0.004, -0.002, 0.01])}
        ci = {}
        if val is not None and round(val * 1e4) % 2 == 0:  # half the runs logged samples
            ci = {"val": {"acc": {"low": val - 0.01, "high": min(1.0, val + 0.01), "n": 900}}}
        run = Run(
            run_id=uuid.UUID(int=rng.getrandbits(128)).hex,
            experiment=experiment,
            status=status,
            started_at=started,
            ended_at=None if status is RunStatus.RUNNING else ended,
            metrics=metrics,
            metrics_ci=ci,
        )
        docs.append(run.model_dump(mode="json", exclude_none=True))

    for n in range(total - late):
        started = NOW - timedelta(days=100) + timedelta(seconds=rng.randint(0, 95 * 86_400))
        experiment = f"exp-{n % 7}"
        if n % 97 == 0:
            add(experiment, started, None, RunStatus.FAILED)
        elif n % 101 == 0:
            add(experiment, started, round(rng.uniform(0.5, 0.9), 4), RunStatus.RUNNING)
        else:
            add(experiment, started, 0.7 + rng.random() * 0.27, RunStatus.COMPLETED)
    for n in range(late):  # the last four days: exp-new, better and better
        started = NOW - timedelta(days=4) + timedelta(seconds=int(n * 3 * 86_400 / late))
        val = round(0.975 + 0.02 * n / late, 4)  # rounded: neighbours tie on the best score
        add("exp-new", started, val, RunStatus.COMPLETED)
    return docs


@pytest.fixture(scope="module", params=[1_200, pytest.param(14_000, marks=pytest.mark.slow)])
def loaded(request: pytest.FixtureRequest, es_url: str) -> Iterator[tuple[Settings, int]]:
    """A prefix of its own holding ``param`` runs, written with the bulk API."""
    from warehouse.stores.elastic import init_elasticsearch

    total: int = request.param
    settings = load(
        cli={
            "store": "elasticsearch",
            "es_url": es_url,
            "index_prefix": f"ks{uuid.uuid4().hex[:10]}",
            "console": False,
        }
    )
    init_elasticsearch(settings)
    docs = make_runs(total)
    with open_store(settings) as store:
        store.write_runs(docs)  # bulk requests of many runs each, not one run at a time
    yield settings, total
    wipe_prefix(es_url, settings.index_prefix)


def kibana_answer(settings: Settings, view: str, metric: str = "val.acc") -> dict[str, Any]:
    """The spec with its data.url answered as Kibana would under the dashboard's query."""
    from elasticsearch import Elasticsearch

    spec = spec_for_kibana(view, settings.index_prefix, metric)
    index, body = kibana_request(spec["data"]["url"], NOW - SPAN, NOW, CONTEXT)
    assert body["size"] == 0  # no hits: the answer is O(buckets), not O(runs)
    assert "aggs" in body
    client = Elasticsearch(str(settings.es_url))
    try:
        response = client.search(index=index, body=body).body
    finally:
        client.close()
    assert response["hits"]["hits"] == []
    return {**spec, "data": {"values": response, "format": spec["data"]["format"]}}


def cli_filter(time_field: str) -> str:
    """The same runs as the dashboard shows: its query and the time picker's range."""
    lo, hi = (t.isoformat().replace("+00:00", "Z") for t in (NOW - SPAN, NOW))
    return f'({LUCENE}) AND {time_field}:["{lo}" TO "{hi}"]'


def buckets_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    found: Any = spec["data"]["values"]
    for part in spec["data"]["format"]["property"].split("."):
        found = found[part]
    return list(found)


@pytest.mark.parametrize("metric", ["val.acc", "val.loss"])
def test_experiments_ranked_equals_the_leaderboard(
    loaded: tuple[Settings, int], metric: str
) -> None:
    settings, total = loaded
    spec = kibana_answer(settings, "experiments_ranked", metric)
    fields = ["rank", "experiment", "score", "run_id", "run_count", "ci_low", "ci_high"]
    rows = plotted(spec, fields)
    rows.sort(key=lambda r: int(r["rank"]))
    with open_store(settings) as store:
        board = views.leaderboard(store, metric, filter=cli_filter("started_at"), evidence=True)
    assert [
        (int(r["rank"]), r["experiment"], as_float(r["score"]), r["run_id"], int(r["run_count"]))
        for r in rows
    ] == [
        (b["rank"], b["experiment"], b["best_score"], b["best_run_id"], b["run_count"])
        for b in board
    ]
    # the error bars: each best run's recorded interval, as the CLI's ci_low/ci_high columns
    bars = [(as_float(r["ci_low"]), as_float(r["ci_high"])) for r in rows]
    assert bars == [(b["ci_low"], b["ci_high"]) for b in board]
    if metric == "val.acc":
        assert any(low is not None for low, _ in bars)
    assert board[0]["experiment"] == "exp-new"  # the late runs win
    assert LEFT_OUT not in {b["experiment"] for b in board}
    scored = spec["data"]["values"]["aggregations"]["scored"]["experiments"]["buckets"]
    assert len(scored) == len(board)  # one bucket per experiment, whatever the runs
    if total > 10_000:
        assert sum(b["run_count"] for b in board) > 10_000


def test_bias_variance_equals_the_decomposition(loaded: tuple[Settings, int]) -> None:
    settings, _ = loaded
    spec = kibana_answer(settings, "bias_variance")
    rows = plotted(spec, ["rank", "experiment", "run_id", "component", "error"])
    with open_store(settings) as store:
        parts = views.decomposition(store, "val.acc", filter=cli_filter("started_at"))
    expected = sorted(
        (p["experiment"], p["run_id"], label, p[key])
        for p in parts
        for key, label in (
            ("avoidable_bias", "avoidable bias"),
            ("variance", "variance"),
            ("dev_overfit", "dev overfit"),
        )
        if p[key] is not None
    )
    got = sorted((r["experiment"], r["run_id"], r["component"], as_float(r["error"])) for r in rows)
    assert got == expected
    ranks = {r["experiment"]: int(r["rank"]) for r in rows}
    assert sorted(ranks, key=ranks.__getitem__) == [p["experiment"] for p in parts]


def test_best_over_time_equals_the_running_best(loaded: tuple[Settings, int]) -> None:
    settings, total = loaded
    spec = kibana_answer(settings, "best_over_time")
    interval = auto_interval(SPAN.total_seconds() * 1000 / 50)
    assert interval == "24h"  # a bucket per day: at most 91 buckets, whatever the runs
    with open_store(settings) as store:
        points = views.over_time(store, "val.acc", filter=cli_filter("ended_at"))
    got = as_bucket_rows(plotted(spec, BUCKET_FIELDS))
    assert got == expected_buckets(points, interval, "max")
    assert len(buckets_of(spec)) <= 92
    assert got[-1][5] == points[-1]["best_run_id"]  # the line reaches the newest record
    assert sum(row[3] for row in got) == len(points)
    if total > 10_000:
        assert len(points) > 10_000
