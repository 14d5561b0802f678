"""The slice heat map in Kibana: its one aggregation on the samples index, built exactly as
Kibana builds it (``%context%`` = the dashboard query, ``%timefield%`` = the time picker), run
on the ES-API test server over samples recorded through the recorder, the answer read at the
spec's ``format.property`` and pushed through the spec's transforms — and the cells it plots
(experiment x label: n and mean) equal ``warehouse query slices`` on the same runs.

Kibana pools every run of an experiment in the time range (it cannot join the runs index to
pick the best run), so the comparisons are like with like: the experiments that have one run
(their best run) against the CLI's default answer, and every run against the CLI's answer for
all runs, pooled per experiment.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import vl_convert

import warehouse
from tests.kibana.test_vega_views import plotted, run_in_es
from tests.servers import wipe_prefix
from warehouse.dashboards.vega import VL_VERSION, slices_spec_for_kibana
from warehouse.models import resolve_metric
from warehouse.query.slices import slices
from warehouse.settings import Settings, load
from warehouse.stores import open_store

LABELS = ("cat", "dog", "bird", "fish")
# experiment -> the accuracy of each of its runs (the first experiment has two runs)
RUNS = {"exp-a": (0.6, 0.85), "exp-b": (0.75,), "exp-c": (0.9,)}
SINGLE = 'experiment:("exp-b" OR "exp-c")'
FIELDS = ("experiment", "slice", "n", "mean")


@pytest.fixture(scope="module")
def recorded(es_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Runs with a ``label`` and a boolean ``correct`` per sample (some samples lack a label,
    one lacks ``correct``), in an index prefix of their own."""
    from warehouse.stores.elastic import init_elasticsearch

    home = tmp_path_factory.mktemp("slices-heatmap")
    settings = load(
        cli={
            "home": home / "warehouse",
            "store": "elasticsearch",
            "es_url": es_url,
            "index_prefix": f"kh{uuid.uuid4().hex[:10]}",
            "console": False,
            "system_interval_s": 0,
            "capture_git_diff": False,
        }
    )
    init_elasticsearch(settings)
    rng = random.Random(18)
    for experiment, accs in RUNS.items():
        for seed, acc in enumerate(accs):
            rows: list[dict[str, Any]] = []
            for i in range(rng.randint(60, 90)):
                row: dict[str, Any] = {"sample_id": f"s{i}", "correct": rng.random() < acc}
                if i % 13 != 12:  # every 13th sample has no label (not the first:
                    # from_pylist takes the columns from the first row). Skewed labels,
                    # so slices differ in size and score
                    row["label"] = LABELS[min(3, int(rng.random() ** 1.5 * 4))]
                rows.append(row)
            rows[5]["correct"] = None  # a sample without the metric: in no n
            config = {"model": experiment, "seed": seed}
            with warehouse.start_run(experiment, config, settings=settings, cwd=home) as run:
                run.log_samples("val", rows)
                scored = [r["correct"] for r in rows if r["correct"] is not None]
                run.log_metrics("val", {"acc": sum(scored) / len(scored)})
    yield settings
    wipe_prefix(es_url, settings.index_prefix)


def kibana_cells(
    settings: Settings, query: str | None = None, slice: str = "label"
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The spec with Kibana's answer inlined, and the cells it plots."""
    from elasticsearch import Elasticsearch

    spec = slices_spec_for_kibana(settings.index_prefix, slice=slice)
    context = None
    if query is not None:
        context = {
            "bool": {
                "must": [{"query_string": {"query": query, "analyze_wildcard": True}}],
                "filter": [],
                "should": [],
                "must_not": [],
            }
        }
    assert spec["data"]["url"]["index"] == f"{settings.index_prefix}-samples"
    with Elasticsearch(str(settings.es_url)) as client:
        spec = run_in_es(client, spec, context, span=timedelta(days=90))
    rows = [r for r in plotted(spec, FIELDS) if r["mean"] != "null"]
    return spec, rows


def as_cells(rows: list[dict[str, str]]) -> dict[tuple[str, str], tuple[int, float]]:
    return {(r["experiment"], r["slice"]): (int(r["n"]), float(r["mean"])) for r in rows}


def pooled(answer: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[int, float]]:
    """The CLI's per-run slices summed per experiment (n, and the count of correct)."""
    sums: dict[tuple[str, str], list[float]] = {}
    for row in answer:
        acc = sums.setdefault((row["experiment"], row["label"]), [0, 0.0])
        acc[0] += row["n"]
        acc[1] += row["mean"] * row["n"]
    return {k: (int(n), right / n) for k, (n, right) in sums.items()}


def test_heat_map_equals_the_cli_slices_of_the_best_runs(recorded: Settings) -> None:
    _, rows = kibana_cells(recorded, SINGLE)
    with open_store(recorded) as store:
        expected = slices(store, resolve_metric("val.acc"), "label", filter=SINGLE)
    assert {r["experiment"] for r in expected} == {"exp-b", "exp-c"}
    assert len(expected) >= 6  # several labels per experiment
    cells = as_cells(rows)
    assert sorted(cells) == sorted((r["experiment"], r["label"]) for r in expected)
    for row in expected:
        n, mean = cells[(row["experiment"], row["label"])]
        assert n == row["n"]
        assert mean == pytest.approx(row["mean"], abs=1e-12)


def test_heat_map_pools_every_run_of_an_experiment_in_the_time_range(
    recorded: Settings,
) -> None:
    _, rows = kibana_cells(recorded)
    metric = resolve_metric("val.acc")
    with open_store(recorded) as store:
        from warehouse.query import views

        ids = [str(r["run_id"]) for r in views.runs(store, limit=None)]
        assert len(ids) == 4
        every = slices(store, metric, "label", runs=ids)
        best = slices(store, metric, "label")
    expected = pooled(every)
    cells = as_cells(rows)
    assert sorted(cells) == sorted(expected)
    for key, (n, mean) in expected.items():
        assert cells[key][0] == n
        assert cells[key][1] == pytest.approx(mean, abs=1e-12)
    # exp-a's two runs are pooled: more samples than its best run alone
    best_a = sum(r["n"] for r in best if r["experiment"] == "exp-a")
    assert sum(n for (e, _), (n, _) in cells.items() if e == "exp-a") > best_a


def test_a_data_set_without_the_column_shows_a_note(recorded: Settings) -> None:
    spec, rows = kibana_cells(recorded, slice="size_bucket")
    assert rows == []
    graph = vl_convert.vegalite_to_scenegraph(spec, vl_version=VL_VERSION)["scenegraph"]
    texts: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("marktype") == "text":
            texts.extend(str(i.get("text")) for i in node.get("items", []))
        for item in node.get("items", []):
            walk(item)

    walk(graph)
    assert any(t.startswith("No sample has both a size_bucket") for t in texts), texts
    _, with_label = kibana_cells(recorded, slice="label")
    assert with_label  # the same data with the column draws cells


def test_the_spec_renders_as_svg(recorded: Settings, tmp_path: Path) -> None:
    spec, rows = kibana_cells(recorded)
    svg = vl_convert.vegalite_to_svg(spec, vl_version=VL_VERSION)
    assert svg.count("<path") >= len(rows)  # one rect per cell at least
