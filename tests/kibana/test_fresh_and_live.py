"""Two places where the views met Elasticsearch's real behaviour, checked through the checking
layer and against an independent computation (never the test server's own answer):

- a fresh install (templates, no run; then a run without the metric) answers every saved
  view without an error: a sort on a field no document has mapped yet names its
  ``unmapped_type``, or Elasticsearch refuses the whole search;
- the live dashboard's "10 most recent runs" are the 10 runs that logged a step last, not the
  10 with the most steps (the test server computes ``max`` of a date as null, so a ``terms``
  ordered by it gave the longest runs), newest first in a legend that fits its panel.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import vl_convert
from elasticsearch import Elasticsearch

from tests.kibana.drawn import drawn
from tests.kibana.test_vega_views import plotted
from tests.servers import StrictProxy, es_settings, wipe_prefix
from warehouse.dashboards.kibana import LIVE_PANEL, panel_pixels, saved_objects
from warehouse.dashboards.vega import STEP_PANELS, VL_VERSION, kibana_request, step_series_spec
from warehouse.models import Run, RunStatus
from warehouse.settings import Settings
from warehouse.stores import open_store

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def fresh(es_url: str) -> Iterator[Settings]:
    """`warehouse init` on an empty cluster prefix: templates and indices, no run yet."""
    from warehouse.stores.elastic import init_elasticsearch

    settings = es_settings(es_url, "fr")
    init_elasticsearch(settings)
    yield settings
    wipe_prefix(es_url, settings.index_prefix)


def vega_specs(prefix: str) -> dict[str, dict[str, Any]]:
    """Every Vega view of the saved objects, by id."""
    return {
        obj["id"]: json.loads(json.loads(obj["attributes"]["visState"])["params"]["spec"])
        for obj in saved_objects(prefix)
        if obj["type"] == "visualization"
    }


def answer_all(settings: Settings, strict_es: StrictProxy) -> dict[str, dict[str, Any]]:
    """Each view's request as Kibana sends it over the last 90 days, answered (through the
    checking layer: a refusal raises) and drawn."""
    before = len(strict_es.refused)
    drawn_specs = {}
    with Elasticsearch(str(settings.es_url)) as client:
        for name, spec in vega_specs(settings.index_prefix).items():
            index, body = kibana_request(spec["data"]["url"], NOW - timedelta(days=90), NOW)
            response = client.search(index=index, body=body).body
            filled = {**spec, "data": {"values": response, "format": spec["data"]["format"]}}
            svg = vl_convert.vegalite_to_svg(filled, vl_version=VL_VERSION, allowed_base_urls=[])
            assert svg.startswith("<svg"), name
            drawn_specs[name] = filled
    assert strict_es.refused[before:] == []
    return drawn_specs


def test_a_fresh_install_shows_every_view_without_an_error(
    fresh: Settings, strict_es: StrictProxy
) -> None:
    views = answer_all(fresh, strict_es)
    assert len(views) == 5 + len(STEP_PANELS)
    ranked = views[f"{fresh.index_prefix}-experiments-ranked"]
    assert plotted(ranked, ["experiment"]) == []
    failed = Run(experiment="first", status=RunStatus.FAILED, ended_at=NOW).to_doc()
    with open_store(fresh) as store:  # a first run, without the metric: still unmapped
        store.write_runs([failed])
        assert "metrics.val.acc" not in store.columns("runs", fresh=True)
    answer_all(fresh, strict_es)


@pytest.fixture
def live(es_url: str) -> Iterator[tuple[Settings, list[str]]]:
    """Steps of 14 runs in the last hour: 6 long runs (60 steps each) that stopped 25-50
    minutes ago, 8 short ones (3 steps) that logged last 2-18 minutes ago; and the 10 runs
    that logged a step last, newest first (worked out from the steps written)."""
    from warehouse.stores.elastic import init_elasticsearch

    settings = es_settings(es_url, "lv")
    init_elasticsearch(settings)
    last: dict[str, datetime] = {}
    with open_store(settings) as store:
        for number in range(14):
            long = number < 6
            run_id = f"{'long' if long else 'short'}-{number:02d}-{uuid.uuid4().hex[:6]}"
            end = NOW - timedelta(minutes=25 + 5 * number if long else 2 * (number - 5))
            count = 60 if long else 3
            steps = [
                {
                    "@timestamp": (end - timedelta(seconds=20 * (count - 1 - seq))).isoformat(),
                    "seq": seq,
                    "step": seq,
                    "metrics": {"loss": 1.0 / (seq + 1)},
                }
                for seq in range(count)
            ]
            store.write_steps(run_id, "live", steps)  # create ops into the data stream
            last[run_id] = end
    recent = sorted(last, key=lambda r: last[r], reverse=True)[:10]
    yield settings, recent
    wipe_prefix(es_url, settings.index_prefix)


def test_live_views_draw_the_ten_runs_that_logged_last_newest_first(
    live: tuple[Settings, list[str]],
) -> None:
    settings, recent = live
    panel = next(p for p in STEP_PANELS if p.field == "metrics.loss")
    spec = step_series_spec(panel, settings.index_prefix)
    index, body = kibana_request(spec["data"]["url"], NOW - timedelta(hours=1), NOW)
    with Elasticsearch(str(settings.es_url)) as client:
        response = client.search(index=index, body=body).body
    filled = {**spec, "data": {"values": response, "format": spec["data"]["format"]}}
    rows = plotted(filled, ["run_id", "recency"])
    assert {r["run_id"] for r in rows} == set(recent)
    assert sum(1 for r in recent if r.startswith("long")) == 2  # not the 10 longest runs
    ranks = {r["run_id"]: int(r["recency"]) for r in rows}
    assert sorted(ranks, key=ranks.__getitem__) == recent
    picture = drawn(filled, panel_pixels(*LIVE_PANEL))
    legend = [t.text for t in picture.legend_labels()]
    assert len(legend) == 10
    assert legend[0].startswith(f"1. {recent[0][:6]}")  # the newest run first
    assert not picture.outside()  # the legend's last rows stay inside the panel
