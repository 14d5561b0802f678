"""The seed-replicates view in Kibana: one aggregation on the runs index, built as Kibana
builds it, run on the ES-API test server, read at the spec's ``format.property`` and pushed
through the spec's transforms — equal to ``warehouse query replicates`` (seeds, mean) on the
same runs, and drawn."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import vl_convert

from tests.kibana.test_vega_views import plotted, run_in_es
from tests.servers import wipe_prefix
from warehouse.dashboards.vega import VL_VERSION, spec_for_kibana
from warehouse.models import Run, RunStatus, config_hash, resolve_metric
from warehouse.query.replicates import replicates
from warehouse.settings import Settings, load
from warehouse.stores import open_store

NOW = datetime.now(UTC).replace(microsecond=0)
SEED_KEYS = ("seed", "*_seed")
# experiment -> configs -> the val.acc of each seed of that config
GROUPS: dict[str, list[tuple[dict[str, Any], tuple[float, ...]]]] = {
    "lucky": [({"lr": 0.1}, (0.95, 0.80, 0.81)), ({"lr": 0.3}, (0.70,))],
    "steady": [({"lr": 0.1}, (0.86, 0.87, 0.85))],
    "wide": [({"lr": 0.2, "depth": 4}, (0.6, 0.9)), ({"lr": 0.2, "depth": 8}, (0.75, 0.74))],
}


@pytest.fixture(scope="module")
def loaded(es_url: str) -> Iterator[Settings]:
    from warehouse.stores.elastic import init_elasticsearch

    settings = load(
        cli={
            "store": "elasticsearch",
            "es_url": es_url,
            "index_prefix": f"ks{uuid.uuid4().hex[:10]}",
            "console": False,
        }
    )
    init_elasticsearch(settings)
    docs = []
    n = 0
    for experiment, groups in GROUPS.items():
        for config, accs in groups:
            for seed, acc in enumerate(accs):
                full = {**config, "seed": seed}
                n += 1
                docs.append(
                    Run(
                        run_id=f"r{n:03d}",
                        experiment=experiment,
                        status=RunStatus.COMPLETED,
                        started_at=NOW - timedelta(hours=n),
                        ended_at=NOW - timedelta(hours=n) + timedelta(minutes=5),
                        config=full,
                        config_hash_noseed=config_hash(full, SEED_KEYS),
                        metrics={"val": {"acc": acc}},
                    ).to_doc()
                )
    docs.append(Run(run_id="nometric", experiment="steady", started_at=NOW).to_doc())
    with open_store(settings) as store:
        store.write_runs(docs)
    yield settings
    wipe_prefix(es_url, settings.index_prefix)


def kibana_answer(settings: Settings) -> dict[str, Any]:
    from elasticsearch import Elasticsearch

    spec = spec_for_kibana("seed_replicates", settings.index_prefix, "val.acc")
    assert spec["data"]["url"]["index"] == f"{settings.index_prefix}-runs"
    with Elasticsearch(str(settings.es_url)) as client:
        return run_in_es(client, spec, span=timedelta(days=30))


def test_the_seed_view_equals_the_cli_replicates(loaded: Settings) -> None:
    spec = kibana_answer(loaded)
    rows = plotted(spec, ["experiment", "group", "n_seeds", "mean", "low", "high"])
    with open_store(loaded) as store:
        expected = replicates(store, resolve_metric("val.acc"), flips=False)
    got = {(r["experiment"], r["group"]): (int(r["n_seeds"]), float(r["mean"])) for r in rows}
    assert got.keys() == {(r["experiment"], r["group"]) for r in expected}
    for r in expected:
        n, mean = got[(r["experiment"], r["group"])]
        assert n == r["n_seeds"]
        assert mean == pytest.approx(r["mean"], abs=1e-12)
    lucky = next(r for r in rows if r["experiment"] == "lucky" and r["n_seeds"] == "3")
    assert (float(lucky["low"]), float(lucky["high"])) == (0.8, 0.95)  # the seeds' range
    assert sum(int(r["n_seeds"]) for r in rows) == sum(
        len(a) for g in GROUPS.values() for _, a in g
    )


def test_the_seed_view_draws(loaded: Settings) -> None:
    spec = kibana_answer(loaded)
    svg = vl_convert.vegalite_to_svg(spec, vl_version=VL_VERSION, allowed_base_urls=[])
    assert svg.count("<circle") + svg.count('role="graphics-symbol"') > 0
    assert "lucky" in svg
