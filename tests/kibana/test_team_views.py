"""The overview dashboard at a team's shape: 300 experiments, 12,000 runs, sweeps of 300
configs, 50 slice labels (``team_shape.py``), bulk-loaded into the test server.

Each view's request is built as Kibana builds it (an empty query bar, the last 90 days) and
sent through the checking layer, so a request Elasticsearch 9 would refuse fails here; its
answer is drawn by vl-convert at the size of its dashboard panel. Then:

- what the view plots equals an independent computation from the documents (never the
  server's own answer: it orders terms by a sub-aggregation and sorts missing values
  differently), and a running run is never an experiment's best;
- a panel draws at most 20 rows, each with room for its label, and says "N of M" shown; the
  leader is its first row;
- the answer's buckets do not grow with the runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from tests.kibana.drawn import Drawn, drawn
from tests.kibana.team_shape import (
    LEADER,
    TeamData,
    bulk_samples,
    expected_components,
    expected_over_time,
    expected_ranking,
    expected_seed_groups,
    expected_slices,
    team_data,
)
from tests.kibana.test_vega_views import BUCKET_FIELDS, as_bucket_rows, as_float, plotted
from tests.servers import StrictProxy, es_settings, wipe_prefix
from tests.strict_es import count_buckets
from warehouse.dashboards.kibana import OVERVIEW_PANELS, panel_pixels
from warehouse.dashboards.vega import kibana_request, slices_spec_for_kibana, spec_for_kibana
from warehouse.settings import Settings
from warehouse.stores import open_store

RUNS = 12_000
TOP = 20  # the rows a manager's panel shows


@pytest.fixture(scope="module")
def team(es_url: str) -> Iterator[tuple[Settings, TeamData]]:
    from warehouse.stores.elastic import init_elasticsearch

    settings = es_settings(es_url, "tm", es_timeout_s=600)
    init_elasticsearch(settings)
    data = team_data(RUNS)
    with open_store(settings) as store:
        for start in range(0, len(data.runs), 3_000):  # bulk requests, not one run at a time
            store.write_runs(data.runs[start : start + 3_000])
    with Elasticsearch(es_url, request_timeout=600) as client:
        bulk_samples(client, f"{settings.index_prefix}-samples", data.samples)
    yield settings, data
    wipe_prefix(es_url, settings.index_prefix)


def answered(settings: Settings, data: TeamData, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with its ``data.url`` answered as Kibana would: an empty query bar, the last
    90 days, through the checking layer (a refusal raises)."""
    index, body = kibana_request(spec["data"]["url"], *data.window)
    with Elasticsearch(str(settings.es_url), request_timeout=600) as client:
        response = client.search(index=index, body=body).body
    return {**spec, "data": {"values": response, "format": spec["data"]["format"]}}


def view(settings: Settings, data: TeamData, name: str) -> dict[str, Any]:
    if name == "slices":
        return answered(settings, data, slices_spec_for_kibana(settings.index_prefix))
    slug = "seed_replicates" if name == "seeds" else name
    return answered(settings, data, spec_for_kibana(slug, settings.index_prefix))


def in_panel(spec: dict[str, Any], name: str) -> Drawn:
    _, _, w, h = OVERVIEW_PANELS[name]
    return drawn(spec, panel_pixels(w, h))


def every_row(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with no top-N cut: every row its transforms make."""
    opened = json.loads(json.dumps(spec))
    for param in opened.get("params", []):
        if param["name"] == "top_n":
            param["value"] = 100_000
    return opened


def note(picture: Drawn) -> str:
    return next(t for t in picture.mark_texts() if " shown" in t)


# --- requests within Elasticsearch's limits ---------------------------------------------------


OVERVIEW = ("experiments_ranked", "bias_variance", "best_over_time", "slices", "seeds")


@pytest.mark.parametrize("name", OVERVIEW)
def test_each_request_passes_and_its_buckets_follow_the_experiments_not_the_runs(
    team: tuple[Settings, TeamData], strict_es: StrictProxy, name: str
) -> None:
    settings, data = team
    before = len(strict_es.refused)
    spec = view(settings, data, name)
    assert len(strict_es.refused) == before
    response = spec["data"]["values"]
    buckets = count_buckets(response.get("aggregations"))
    experiments = len({r["experiment"] for r in data.runs})
    budget = {  # O(experiments) or O(time buckets), whatever the number of runs
        "experiments_ranked": 2 * experiments,  # run counts; best runs
        "bias_variance": 2 * experiments,
        "best_over_time": 92,  # a day each
        "slices": 50 + experiments * (3 + 50 * 3),  # per experiment and label, 1s and 0s
        "seeds": 0,  # hits collapsed by config, and a cardinality
    }[name]
    assert buckets <= budget
    assert len(response["hits"]["hits"]) <= TOP


# --- what each panel shows --------------------------------------------------------------------


def test_experiments_ranked_shows_the_top_20_leader_first(
    team: tuple[Settings, TeamData],
) -> None:
    settings, data = team
    spec = view(settings, data, "experiments_ranked")
    expected = expected_ranking(data)
    assert len(expected) > 250
    assert expected[0]["experiment"] == LEADER
    picture = in_panel(spec, "experiments_ranked")
    assert [t.text for t in picture.row_labels()] == [r["experiment"] for r in expected[:TOP]]
    assert note(picture).startswith(f"{TOP} of {len(expected)} experiments shown")
    rows = plotted(every_row(spec), ["rank", "experiment", "run_id", "score", "run_count"])
    got = sorted(rows, key=lambda r: int(r["rank"]))
    assert [
        (r["experiment"], r["run_id"], as_float(r["score"]), int(r["run_count"])) for r in got
    ] == [(e["experiment"], e["run_id"], e["score"], e["run_count"]) for e in expected]


def test_a_running_run_is_no_experiments_best_even_when_it_scores_higher_or_ties(
    team: tuple[Settings, TeamData],
) -> None:
    settings, data = team
    running = {r["run_id"] for r in data.runs if r["status"] == "running"}
    spec = view(settings, data, "experiments_ranked")
    shown = {r["run_id"] for r in plotted(every_row(spec), ["run_id"])}
    assert not shown & running
    ahead = [  # experiments where a running run scores above every finished one
        e
        for e in expected_ranking(data)
        if any(
            r["experiment"] == e["experiment"]
            and r["run_id"] in running
            and (r["metrics"]["val"]["acc"] >= e["score"])
            for r in data.runs
        )
    ]
    assert len(ahead) >= 5


def test_bias_variance_shows_the_components_of_the_top_20(
    team: tuple[Settings, TeamData],
) -> None:
    settings, data = team
    spec = view(settings, data, "bias_variance")
    expected = expected_ranking(data)[:TOP]
    picture = in_panel(spec, "bias_variance")
    assert [t.text for t in picture.row_labels()] == [r["experiment"] for r in expected]
    assert note(picture).startswith(f"{TOP} of ")
    rows = plotted(spec, ["experiment", "run_id", "component", "error"])
    got = {(r["experiment"], r["component"]): as_float(r["error"]) for r in rows}
    want = {
        (e["experiment"], part): pytest.approx(value, abs=1e-12)
        for e in expected
        for part, value in expected_components(e).items()
    }
    assert got == want


def test_seeds_show_the_replicate_groups_of_the_best_runs(
    team: tuple[Settings, TeamData],
) -> None:
    settings, data = team
    spec = view(settings, data, "seeds")
    expected = expected_seed_groups(data, TOP)
    picture = in_panel(spec, "seeds")
    labels = [f"{g['experiment']} · {g['group'][:8]}" for g in expected]
    assert [t.text for t in picture.row_labels()] == labels
    assert expected[0]["experiment"] == LEADER  # the group of the best run comes first
    assert " replicate groups shown, of " in note(picture)
    fields = ["experiment", "group", "n_seeds", "mean", "low", "high", "best_run_id"]
    got = sorted(
        plotted(spec, fields), key=lambda r: labels.index(f"{r['experiment']} · {r['group'][:8]}")
    )
    assert [(r["experiment"], r["group"], int(r["n_seeds"]), r["best_run_id"]) for r in got] == [
        (g["experiment"], g["group"], g["n_seeds"], g["best_run_id"]) for g in expected
    ]
    for row, group in zip(got, expected, strict=True):
        assert float(row["mean"]) == pytest.approx(group["mean"], abs=1e-12)
        assert (float(row["low"]), float(row["high"])) == (group["low"], group["high"])


def test_slices_show_the_top_20_experiments_and_labels_in_numeric_order(
    team: tuple[Settings, TeamData],
) -> None:
    settings, data = team
    spec = view(settings, data, "slices")
    expected = expected_slices(data, TOP)
    assert expected["experiments"][0] == LEADER
    picture = in_panel(spec, "slices")
    assert [t.text for t in picture.row_labels()] == expected["experiments"]
    columns = [t.text for t in picture.axis_labels()[0]]
    assert columns == [str(k) for k in expected["labels"]]  # 0, 1, 2 ... 49, not 0, 1, 10
    text = note(picture)
    assert text.startswith(f"{TOP} of {expected['experiments_found']} experiments shown")
    assert f"50 of {expected['labels_found']} values of label" in text
    cells = {
        (r["experiment"], r["slice"]): (int(r["n"]), float(r["mean"]))
        for r in plotted(spec, ["experiment", "slice", "n", "mean"])
        if r["mean"] != "null"
    }
    assert cells.keys() == expected["cells"].keys()
    for key, (n, mean) in expected["cells"].items():
        assert cells[key][0] == n
        assert cells[key][1] == pytest.approx(mean, abs=1e-12)


def test_best_over_time_plots_every_bucket_and_few_colours(
    team: tuple[Settings, TeamData],
) -> None:
    settings, data = team
    spec = view(settings, data, "best_over_time")
    assert as_bucket_rows(plotted(spec, BUCKET_FIELDS)) == expected_over_time(data)
    picture = in_panel(spec, "best_over_time")
    assert 1 <= len(picture.legend_labels()) <= 10
    assert not picture.outside()


@pytest.mark.parametrize("name", ["experiments_ranked", "bias_variance", "slices", "seeds"])
def test_no_panel_draws_more_rows_than_it_can_label(
    team: tuple[Settings, TeamData], name: str
) -> None:
    settings, data = team
    picture = in_panel(view(settings, data, name), name)
    rows = picture.row_labels()
    assert 1 < len(rows) <= 30
    font = max(t.size for t in rows)
    assert picture.row_step() >= font + 2  # each label has its own line
    assert not picture.outside()  # the notes and legends stay inside the panel
