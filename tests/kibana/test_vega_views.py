"""Each Kibana view, run as Kibana runs it: its Elasticsearch query (Kibana's placeholders
expanded) against the test server on demo-like runs recorded through the recorder, the answer
fed to the spec's data path, rendered to PNG — and the values it plots equal the answers of
``warehouse query over-time|leaderboard|decomposition``."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import vl_convert
from PIL import Image

import warehouse
from tests.servers import wipe_prefix
from warehouse.dashboards.vega import (
    STEP_PANELS,
    VL_VERSION,
    auto_interval,
    kibana_request,
    spec_for_kibana,
    spec_with_values,
    step_series_spec,
)
from warehouse.dashboards.vega.responses import bucket_start, time_buckets, view_response
from warehouse.errors import ConfigurationError
from warehouse.models import resolve_metric
from warehouse.query import views
from warehouse.settings import Settings, load
from warehouse.stores import open_store
from warehouse.stores.base import RunQuery

# experiment, train acc, val acc, test acc — recorded in this order (= ended_at order).
# Ties on purpose: digits-knn's two 0.97 runs (the earlier wins), and digits-svm reaching the
# same 0.985 as ... nothing else, so the running best changes several times.
DEMO_RUNS: tuple[tuple[str, float | None, float | None, float | None], ...] = (
    ("digits-logreg", 0.97, 0.94, 0.93),
    ("digits-svm", 0.99, 0.95, 0.96),
    ("digits-logreg", 0.98, 0.96, 0.95),
    ("digits-knn", 0.99, 0.97, 0.965),
    ("digits-knn", 0.985, 0.97, 0.96),
    ("digits-svm", 1.0, 0.985, 0.98),
    ("digits-tree", 0.999, 0.85, 0.84),
    ("digits-logreg", 0.96, 0.93, None),
    ("digits-svm", 0.995, 0.98, 0.979),
)


def record_demo_runs(settings: Settings, cwd: Path, *, failed_run: bool = True) -> list[str]:
    """Record DEMO_RUNS (with a loss per split too), then a failed run without metrics."""
    ids = []
    for number, (experiment, *accs) in enumerate(DEMO_RUNS):
        config = {"model": experiment.split("-", 1)[1], "seed": number}
        with warehouse.start_run(experiment, config, settings=settings, cwd=cwd) as run:
            for split, acc in zip(("train", "val", "test"), accs, strict=True):
                if acc is not None:
                    run.log_metrics(split, {"acc": acc, "loss": round(1.5 * (1 - acc) + 0.01, 6)})
            ids.append(run.run_id)
    _spread_in_time(settings, ids)
    if not failed_run:
        return ids
    with (
        pytest.raises(RuntimeError),
        warehouse.start_run("digits-tree", {"seed": 99}, settings=settings, cwd=cwd),
    ):
        raise RuntimeError("diverged before any metric")
    return ids


def _spread_in_time(settings: Settings, ids: list[str]) -> None:
    """Give the runs end times 30 s apart (as a real sweep's), newest last: recorded in a
    few milliseconds, they would share one time bucket of every chart over time."""
    from datetime import UTC, datetime, timedelta

    from warehouse.replication import open_recording

    now = datetime.now(UTC).replace(microsecond=0)
    recording = open_recording(settings)  # the path every run write takes: local, then ES
    try:
        found = recording.store.search_runs(RunQuery(limit=None))
        docs = {d["run_id"]: d for d in found}
        moved = []
        for i, run_id in enumerate(ids):
            ended = now - timedelta(seconds=30 * (len(ids) - i))
            doc = dict(docs[run_id])
            doc["started_at"] = (ended - timedelta(minutes=10)).isoformat()
            doc["ended_at"] = ended.isoformat()
            doc["updated_at"] = (now + timedelta(seconds=1)).isoformat()
            moved.append(doc)
        recording.store.write_runs(moved)
    finally:
        recording.close()


SEP = "|~|"


def plotted(
    spec: dict[str, Any], fields: Sequence[str], vl_version: str = VL_VERSION
) -> list[dict[str, str]]:
    """The rows a spec's transforms produce (what its marks draw), as strings, in order.

    The spec's data, params and transforms are compiled and run by vl-convert's Vega; a text
    mark then writes each row's fields with JavaScript's number formatting (shortest
    round-trip, like Python's ``repr``), read back from the scenegraph.
    """
    cells = [
        f"(isValid(datum[{json.dumps(f)}]) ? '' + datum[{json.dumps(f)}] : 'null')" for f in fields
    ]
    probe: dict[str, Any] = {
        k: spec[k] for k in ("$schema", "data", "params", "transform") if k in spec
    }
    probe["transform"] = [
        *spec.get("transform", []),
        {"calculate": f" + '{SEP}' + ".join(cells), "as": "__row"},
    ]
    probe["mark"] = "text"
    probe["encoding"] = {"text": {"field": "__row", "type": "nominal"}}
    graph = vl_convert.vegalite_to_scenegraph(probe, vl_version=vl_version)["scenegraph"]
    rows: list[dict[str, str]] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("marktype") == "text" and node.get("role") == "mark":
            rows.extend(dict(zip(fields, i["text"].split(SEP), strict=True)) for i in node["items"])
            return
        for item in node.get("items", []):
            walk(item)

    walk(graph)
    return rows


def as_float(text: str) -> float | None:
    return None if text == "null" else float(text)


def colored_pixels(png: bytes) -> int:
    """Pixels with a clear hue (marks), as opposed to white, grey axes and black text."""
    data = Image.open(io.BytesIO(png)).convert("RGB").tobytes()
    pixels = zip(data[0::3], data[1::3], data[2::3], strict=True)
    return sum(1 for r, g, b in pixels if max(r, g, b) - min(r, g, b) > 60)


# --- fixtures: demo-like runs in the test Elasticsearch --------------------------------------


@pytest.fixture(scope="module")
def es_settings(es_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Settings recording into Elasticsearch under a prefix of its own, with the demo runs."""
    from warehouse.stores.elastic import init_elasticsearch

    home = tmp_path_factory.mktemp("vega-views")
    settings = load(
        cli={
            "home": home / "warehouse",
            "store": "elasticsearch",
            "es_url": es_url,
            "index_prefix": f"kv{uuid.uuid4().hex[:10]}",
            "console": False,
            "system_interval_s": 0,
            "capture_git_diff": False,
        }
    )
    init_elasticsearch(settings)
    record_demo_runs(settings, cwd=home)
    yield settings
    wipe_prefix(es_url, settings.index_prefix)


@pytest.fixture(scope="module")
def es_client(es_url: str) -> Iterator[Any]:
    from elasticsearch import Elasticsearch

    client = Elasticsearch(es_url)
    yield client
    client.close()


def run_in_es(
    client: Any,
    spec: dict[str, Any],
    context: dict[str, Any] | None = None,
    span: timedelta = timedelta(days=1),
) -> dict[str, Any]:
    """The spec with its ``data.url`` answered as Kibana would, over the last ``span``: one
    request, an aggregation and at most a few hits (the live views' 10 most recent runs, the
    seeds' 20 best groups), never a page of runs."""
    now = datetime.now(UTC)
    index, body = kibana_request(
        spec["data"]["url"], now - span, now + timedelta(minutes=5), context
    )
    assert body["size"] <= 20  # an aggregation and a few hits, never a page of runs
    response = client.search(index=index, body=body).body
    assert len(response["hits"]["hits"]) <= body["size"]
    return {**spec, "data": {"values": response, "format": spec["data"]["format"]}}


def render_png(spec: dict[str, Any]) -> bytes:
    png: bytes = vl_convert.vegalite_to_png(spec, vl_version=VL_VERSION, allowed_base_urls=[])
    assert png.startswith(b"\x89PNG")
    return png


# --- Kibana's placeholders -------------------------------------------------------------------


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_context_and_timefield_become_a_bool_query_with_the_time_range() -> None:
    url = {"index": "w-runs", "%context%": True, "%timefield%": "ended_at", "body": {"size": 5}}
    index, body = kibana_request(url, T0, T0 + timedelta(days=7))
    assert index == "w-runs"
    assert body["size"] == 5
    bool_query = body["query"]["bool"]
    assert bool_query["filter"] == [{"match_all": {}}]
    assert bool_query["must"] == [
        {
            "range": {
                "ended_at": {
                    "gte": "2026-01-01T00:00:00.000Z",
                    "lte": "2026-01-08T00:00:00.000Z",
                    "format": "strict_date_optional_time",
                }
            }
        }
    ]
    assert "%context%" in url  # the caller's spec is left alone


def test_dashboard_filters_are_kept_and_the_time_range_added() -> None:
    context = {"bool": {"must": [{"query_string": {"query": "experiment:x"}}], "filter": []}}
    _, body = kibana_request(
        {"index": "i", "%context%": True, "%timefield%": "t"}, T0, T0 + timedelta(hours=1), context
    )
    must = body["query"]["bool"]["must"]
    assert must[0] == {"query_string": {"query": "experiment:x"}}
    assert "range" in must[1]
    assert context["bool"]["must"] == [{"query_string": {"query": "experiment:x"}}]


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        pytest.param(timedelta(hours=1), {"calendar_interval": "1m"}, id="1h-range-1m"),
        pytest.param(timedelta(hours=6), {"fixed_interval": "5m"}, id="6h-range-5m"),
        pytest.param(timedelta(days=30), {"fixed_interval": "12h"}, id="30d-range-12h"),
        pytest.param(timedelta(days=365), {"calendar_interval": "1w"}, id="1y-range-1w"),
    ],
)
def test_autointerval_becomes_the_interval_kibana_would_send(
    span: timedelta, expected: dict[str, str]
) -> None:
    url = {
        "index": "i",
        "body": {
            "aggs": {
                "h": {
                    "date_histogram": {"field": "@timestamp", "interval": {"%autointerval%": True}}
                }
            }
        },
    }
    _, body = kibana_request(url, T0, T0 + span)
    histogram = body["aggs"]["h"]["date_histogram"]
    assert "interval" not in histogram
    assert {k: v for k, v in histogram.items() if k.endswith("_interval")} == expected


def test_a_body_query_next_to_context_is_refused_as_kibana_does() -> None:
    url = {"index": "i", "%context%": True, "body": {"query": {"match_all": {}}}}
    with pytest.raises(ConfigurationError, match=r"no body\.query"):
        kibana_request(url, T0, T0 + timedelta(days=1))


# --- the three views against Elasticsearch ---------------------------------------------------


def expected_buckets(
    points: Sequence[dict[str, Any]], interval: str, direction: str = "max"
) -> list[tuple[Any, ...]]:
    """The CLI's per-run running best, grouped by time bucket: per bucket its best run (the
    first of equal scores), the number of scored runs, and the running best after its last run."""
    buckets: dict[int, list[dict[str, Any]]] = {}
    for point in points:
        moment = datetime.fromisoformat(str(point["ended_at"]).replace("Z", "+00:00"))
        buckets.setdefault(bucket_start(moment, interval), []).append(point)
    rows = []
    for key in sorted(buckets):
        members = buckets[key]
        top = members[0]
        for p in members:
            if (p["score"] > top["score"]) if direction == "max" else (p["score"] < top["score"]):
                top = p
        last = members[-1]
        rows.append(
            (
                key,
                top["run_id"],
                top["score"],
                len(members),
                last["best_so_far"],
                last["best_run_id"],
            )
        )
    return rows


BUCKET_FIELDS = ["bucket_ms", "run_id", "score", "run_count", "best", "best_run_id"]


def as_bucket_rows(rows: list[dict[str, str]]) -> list[tuple[Any, ...]]:
    return sorted(
        (int(float(r["bucket_ms"])), r["run_id"], as_float(r["score"]), int(r["run_count"]),
         as_float(r["best"]), r["best_run_id"])
        for r in rows
    )  # fmt: skip


def test_best_over_time_plots_the_running_best_of_query_over_time(
    es_settings: Settings, es_client: Any
) -> None:
    span = timedelta(minutes=10)  # ~50 buckets of 10 s: the demo's runs, seconds apart
    spec = run_in_es(
        es_client, spec_for_kibana("best_over_time", es_settings.index_prefix), span=span
    )
    assert colored_pixels(render_png(spec)) > 50
    with open_store(es_settings) as store:
        expected = views.over_time(store, "val.acc")
    assert len(expected) == len(DEMO_RUNS)
    interval = auto_interval((span + timedelta(minutes=5)).total_seconds() * 1000 / 50)
    assert as_bucket_rows(plotted(spec, BUCKET_FIELDS)) == expected_buckets(expected, interval)
    assert len({p["best_so_far"] for p in expected}) >= 4  # the line really steps up


def test_experiments_ranked_plots_the_leaderboard(es_settings: Settings, es_client: Any) -> None:
    spec = run_in_es(es_client, spec_for_kibana("experiments_ranked", es_settings.index_prefix))
    assert colored_pixels(render_png(spec)) > 100
    rows = plotted(spec, ["rank", "experiment", "score", "run_id", "run_count"])
    rows.sort(key=lambda r: int(r["rank"]))  # the y axis sorts bars by rank
    with open_store(es_settings) as store:
        board = views.leaderboard(store, "val.acc")
    assert [
        (int(r["rank"]), r["experiment"], as_float(r["score"]), r["run_id"], int(r["run_count"]))
        for r in rows
    ] == [
        (b["rank"], b["experiment"], b["best_score"], b["best_run_id"], b["run_count"])
        for b in board
    ]
    assert [b["experiment"] for b in board][:2] == ["digits-svm", "digits-knn"]


def test_bias_variance_plots_the_decomposition_of_each_best_run(
    es_settings: Settings, es_client: Any
) -> None:
    spec = run_in_es(es_client, spec_for_kibana("bias_variance", es_settings.index_prefix))
    assert colored_pixels(render_png(spec)) > 100
    rows = plotted(spec, ["rank", "experiment", "run_id", "component", "error"])
    with open_store(es_settings) as store:
        parts = views.decomposition(store, "val.acc")
    expected = [
        (p["experiment"], p["run_id"], label, p[key])
        for p in parts
        for key, label in (
            ("avoidable_bias", "avoidable bias"),
            ("variance", "variance"),
            ("dev_overfit", "dev overfit"),
        )
        if p[key] is not None
    ]
    got = [(r["experiment"], r["run_id"], r["component"], as_float(r["error"])) for r in rows]
    assert sorted(got, key=lambda g: (g[0], g[2])) == sorted(expected, key=lambda e: (e[0], e[2]))
    ranks = {r["experiment"]: int(r["rank"]) for r in rows}  # the y axis sorts bars by rank
    assert sorted(ranks, key=ranks.__getitem__) == [p["experiment"] for p in parts]


def test_views_rank_a_lower_is_better_metric_the_other_way(
    es_settings: Settings, es_client: Any
) -> None:
    spec = run_in_es(
        es_client, spec_for_kibana("experiments_ranked", es_settings.index_prefix, "val.loss")
    )
    rows = plotted(spec, ["rank", "experiment", "score", "run_id"])
    rows.sort(key=lambda r: int(r["rank"]))
    with open_store(es_settings) as store:
        board = views.leaderboard(store, "val.loss")
    assert [(r["experiment"], as_float(r["score"]), r["run_id"]) for r in rows] == [
        (b["experiment"], b["best_score"], b["best_run_id"]) for b in board
    ]
    assert board[0]["best_score"] < board[-1]["best_score"]


def test_dashboard_query_narrows_the_views_like_a_query_filter(
    es_settings: Settings, es_client: Any
) -> None:
    lucene = 'experiment:"digits-knn" OR experiment:"digits-logreg"'
    context = {
        "bool": {
            "must": [{"query_string": {"query": lucene}}],
            "filter": [],
            "should": [],
            "must_not": [],
        }
    }
    spec = run_in_es(
        es_client, spec_for_kibana("experiments_ranked", es_settings.index_prefix), context
    )
    rows = plotted(spec, ["rank", "experiment", "score", "run_id", "run_count"])
    rows.sort(key=lambda r: int(r["rank"]))
    with open_store(es_settings) as store:
        board = views.leaderboard(store, "val.acc", filter=lucene)
    assert [
        (r["experiment"], as_float(r["score"]), r["run_id"], int(r["run_count"])) for r in rows
    ] == [(b["experiment"], b["best_score"], b["best_run_id"], b["run_count"]) for b in board]
    assert {b["experiment"] for b in board} == {"digits-knn", "digits-logreg"}


@pytest.mark.parametrize("view", ["experiments_ranked", "bias_variance"])
def test_report_answer_plots_the_same_as_kibanas(
    view: str, es_settings: Settings, es_client: Any
) -> None:
    """One source of chart data: the report's answer (from the CLI) draws what Kibana's does."""
    kibana_spec = run_in_es(es_client, spec_for_kibana(view, es_settings.index_prefix))
    with open_store(es_settings) as store:
        report_spec = spec_with_values(view, view_response(view, store, "val.acc"))
    fields = ["rank", "experiment", "score", "run_id"] + (
        ["run_count"] if view == "experiments_ranked" else ["component", "error"]
    )
    from_store = sorted(plotted(report_spec, fields), key=lambda r: tuple(r.values()))
    from_kibana = sorted(plotted(kibana_spec, fields), key=lambda r: tuple(r.values()))
    assert from_store == from_kibana
    assert len({r["experiment"] for r in from_store}) == 4


def test_report_answer_over_time_plots_the_same_as_kibanas(
    es_settings: Settings, es_client: Any
) -> None:
    span = timedelta(minutes=10)
    kibana_spec = run_in_es(
        es_client, spec_for_kibana("best_over_time", es_settings.index_prefix), span=span
    )
    interval = auto_interval((span + timedelta(minutes=5)).total_seconds() * 1000 / 50)
    with open_store(es_settings) as store:
        answer = view_response("best_over_time", store, "val.acc", interval=interval)
    report_spec = spec_with_values("best_over_time", answer)
    fields = [*BUCKET_FIELDS, "is_new_best", "experiment"]
    assert plotted(report_spec, fields) == plotted(kibana_spec, fields)


# --- the live-training views over the steps data stream ---------------------------------------


@pytest.fixture(scope="module")
def steps_written(es_settings: Settings) -> list[dict[str, Any]]:
    """Two runs' steps, a few per minute over the last 20 minutes, with system figures."""
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=20)
    docs: list[dict[str, Any]] = []
    with open_store(es_settings) as store:
        for number, run_id in enumerate(("run-live-a", "run-live-b")):
            steps = []
            for seq in range(60):
                steps.append(
                    {
                        "@timestamp": (start + timedelta(seconds=20 * seq + number)).isoformat(),
                        "run_id": run_id,
                        "experiment": "live",
                        "seq": seq,
                        "step": seq * 10,
                        "epoch": seq // 20,
                        "duration_s": 0.05 + 0.01 * number + 0.0001 * seq,
                        "metrics": {"loss": 2.0 / (seq + 1) + number, "lr": 1e-3 * 0.99**seq},
                        "system": {
                            "gpu_util_pct": 60.0 + number * 20 + seq % 7,
                            "gpu_mem_used_bytes": 8_000_000_000 + seq * 1_000_000,
                            "gpu_power_w": 200.0 + seq,
                            "gpu_temperature_c": 60.0 + seq % 5,
                        },
                    }
                )
            store.write_steps(run_id, "live", steps)
            docs += steps
    return docs


@pytest.mark.parametrize("panel", STEP_PANELS, ids=[p.slug for p in STEP_PANELS])
def test_live_panel_query_runs_and_renders(
    panel: Any, es_settings: Settings, es_client: Any, steps_written: list[dict[str, Any]]
) -> None:
    spec = run_in_es(es_client, step_series_spec(panel, es_settings.index_prefix))
    rows = plotted(spec, ["run_id", "time", "value"])
    has_field = any(_get(d, panel.field) is not None for d in steps_written)
    if has_field:
        assert {r["run_id"] for r in rows} >= {"run-live-a", "run-live-b"}
        assert colored_pixels(render_png(spec)) > 50
    else:  # tokens/s is not logged here: an empty chart, not an error
        assert rows == []
        render_png(spec)


def test_live_loss_points_are_the_per_minute_means_of_the_steps(
    es_settings: Settings, es_client: Any, steps_written: list[dict[str, Any]]
) -> None:
    panel = next(p for p in STEP_PANELS if p.field == "metrics.loss")
    # the last hour in the time picker: Kibana's ~50 buckets round to 1-minute buckets
    spec = run_in_es(
        es_client, step_series_spec(panel, es_settings.index_prefix), span=timedelta(hours=1)
    )
    got = {
        (r["run_id"], int(float(r["time"]))): float(r["value"])
        for r in plotted(spec, ["run_id", "time", "value"])
    }
    buckets: dict[tuple[str, int], list[float]] = {}
    for doc in steps_written:
        moment = datetime.fromisoformat(doc["@timestamp"])
        key = int(moment.timestamp()) // 60 * 60 * 1000
        buckets.setdefault((doc["run_id"], key), []).append(doc["metrics"]["loss"])
    expected = {k: sum(v) / len(v) for k, v in buckets.items()}
    assert got.keys() == expected.keys()
    for bucket, value in expected.items():
        assert got[bucket] == pytest.approx(value, rel=1e-12)


def _get(doc: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)  # type: ignore[assignment]
    return doc


# --- the same views on the local store (the report's path) -----------------------------------


def test_views_over_local_store_answers_equal_the_query_answers(home: Path, tmp_path: Path) -> None:
    settings = load(cli={"capture_git_diff": False, "system_interval_s": 0})
    record_demo_runs(settings, cwd=tmp_path)
    with open_store(settings) as store:
        over_time = views.over_time(store, "val.acc")
        board = views.leaderboard(store, "val.acc")
        parts = views.decomposition(store, "val.acc")
        answers = {v: view_response(v, store, "val.acc", interval="100ms") for v in VIEW_NAMES}

    best = plotted(spec_with_values("best_over_time", answers["best_over_time"]), BUCKET_FIELDS)
    assert as_bucket_rows(best) == expected_buckets(over_time, "100ms")
    ranked = plotted(
        spec_with_values("experiments_ranked", answers["experiments_ranked"]),
        ["rank", "experiment", "score", "run_id", "run_count"],
    )
    ranked.sort(key=lambda r: int(r["rank"]))
    assert [
        (r["experiment"], as_float(r["score"]), r["run_id"], int(r["run_count"])) for r in ranked
    ] == [(b["experiment"], b["best_score"], b["best_run_id"], b["run_count"]) for b in board]
    stacked = plotted(
        spec_with_values("bias_variance", answers["bias_variance"]),
        ["run_id", "component", "error"],
    )
    by_run = {(r["run_id"], r["component"]): as_float(r["error"]) for r in stacked}
    for p in parts:
        assert by_run[(p["run_id"], "variance")] == p["variance"]
        assert by_run[(p["run_id"], "avoidable bias")] == p["avoidable_bias"]
        assert by_run.get((p["run_id"], "dev overfit")) == p["dev_overfit"]


VIEW_NAMES = ("best_over_time", "experiments_ranked", "bias_variance")


def synthetic_answer(view: str, runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """An Elasticsearch-shaped answer for ``runs`` (each experiment's best by val.acc)."""
    m = resolve_metric("val.acc")
    if view == "best_over_time":
        points = [
            {**r, "score": r["metrics"]["val"]["acc"]}
            for r in sorted(runs, key=lambda r: (r["ended_at"], r["run_id"]))
        ]
        return time_buckets(points, m)
    counts, buckets = [], []
    for experiment in sorted({r["experiment"] for r in runs}):
        mine = [r for r in runs if r["experiment"] == experiment]
        top = max(mine, key=lambda r: r["metrics"]["val"]["acc"])
        counts.append({"key": experiment, "doc_count": len(mine)})
        buckets.append({"key": experiment, "top": {"hits": {"hits": [{"_source": top}]}}})
    return {
        "aggregations": {
            "runs": {"buckets": counts},
            "scored": {"experiments": {"buckets": buckets}},
        }
    }


SYNTHETIC_RUNS = [
    {
        "run_id": f"r{n:02d}",
        "experiment": f"exp-{n % 3}",
        "ended_at": (T0 + timedelta(hours=n)).isoformat(),
        "metrics": {
            "train": {"acc": 0.9 + n / 200},
            "val": {"acc": 0.85 + (n * 7 % 10) / 100},
            "test": {"acc": 0.84 + (n * 3 % 10) / 100},
        },
    }
    for n in range(12)
]


@pytest.mark.parametrize("vl_version", ["5.21", "6.4"], ids=["kibana-8.x", "kibana-9.4+"])
def test_specs_draw_the_same_on_the_vega_lite_versions_kibana_ships(vl_version: str) -> None:
    for view, fields in (
        ("best_over_time", ["run_id", "best", "best_run_id", "is_new_best"]),
        ("experiments_ranked", ["rank", "experiment", "score", "run_id"]),
        ("bias_variance", ["run_id", "component", "error"]),
    ):
        spec = spec_with_values(view, synthetic_answer(view, SYNTHETIC_RUNS))
        assert vl_convert.vegalite_to_svg(spec, vl_version=vl_version).startswith("<svg")
        rows = plotted(spec, fields, vl_version)
        assert len(rows) >= 3  # something is drawn
        assert rows == plotted(spec, fields, "5.21")
    for panel in STEP_PANELS:
        spec = step_series_spec(panel)
        spec["data"] = {
            "values": {"aggregations": {"runs": {"buckets": []}}},
            "format": spec["data"]["format"],
        }
        assert vl_convert.vegalite_to_svg(spec, vl_version=vl_version).startswith("<svg")


@pytest.mark.parametrize(
    ("span_s", "label"),
    [
        pytest.param(3, r"02:35:\d\d", id="seconds"),  # the demo: runs seconds apart
        pytest.param(2 * 86400, r"Nov 2[234] \d\d:00", id="days-with-hours"),
        pytest.param(120 * 86400, r"[A-Z][a-z]{2} \d\d", id="months"),
        pytest.param(3 * 365 * 86400, r"20\d\d-\d\d", id="years"),
    ],
)
def test_the_time_axis_labels_suit_the_span(span_s: float, label: str) -> None:
    """Never Vega's bare sub-second ".500" labels, never the same day on every tick."""
    import re

    start = datetime(2026, 11, 22, 2, 35, 17, tzinfo=UTC)
    rows = [
        {
            "run_id": f"r{i}",
            "experiment": "e",
            "ended_at": (start + timedelta(seconds=span_s * i / 14)).isoformat(),
            "metrics": {"val": {"acc": 0.5 + i / 100}},
        }
        for i in range(15)
    ]
    points = [{**r, "score": r["metrics"]["val"]["acc"]} for r in rows]
    answer = time_buckets(points, resolve_metric("val.acc"))
    assert len(answer["aggregations"]["scored"]["time"]["buckets"]) == len(rows)  # one per run
    svg = vl_convert.vegalite_to_svg(spec_with_values("best_over_time", answer, width=600))
    ticks = re.findall(r"role-axis-label.*?</g>", svg, flags=re.S)
    texts = re.findall(r">([^<>]+)</text>", ticks[0] if ticks else "")
    assert texts, "no x-axis labels rendered"
    assert all(re.fullmatch(label, t) for t in texts), texts
    assert len(set(texts)) == len(texts), texts
