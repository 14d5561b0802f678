"""Sample columns come out in one order on every store (issue 32, item 7): the row's
identity, the logged columns by name, then ``output_uri`` and ``recorded_at``. The local store
keeps them as logged, Elasticsearch as its documents hold them; the views order them."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import warehouse
from tests.helpers import run_main
from warehouse.models import SAMPLE_FIXED_COLUMNS, sample_column_order
from warehouse.query import views
from warehouse.settings import load
from warehouse.stores.elastic import ElasticStore, init_elasticsearch
from warehouse.stores.local import LocalStore

LOGGED = ["zeta", "correct", "Alpha", "label", "confidence", "b_2"]  # not in name order


@given(st.lists(st.text("abcxyz_", min_size=1, max_size=6), unique=True))
def test_the_order_is_identity_then_names_then_the_link_and_time(names: list[str]) -> None:
    logged = [n for n in names if n not in SAMPLE_FIXED_COLUMNS]
    order = sample_column_order([*reversed(SAMPLE_FIXED_COLUMNS), *logged])
    assert order == [*SAMPLE_FIXED_COLUMNS[:4], *sorted(logged), *SAMPLE_FIXED_COLUMNS[4:]]
    assert sample_column_order(reversed(order)) == order


@pytest.fixture
def recorded(es_env: dict[str, str], home: Path) -> str:
    """One run with samples in both stores (recorded with Elasticsearch configured)."""
    init_elasticsearch(load())
    with warehouse.start_run(experiment="order") as run:
        rows = [
            {"sample_id": k, **{c: (k if c != "label" else "cat") for c in LOGGED}}
            for k in range(5)
        ]
        run.log_samples("val", rows)
        run.log_output("val", 1, b"x", content_type="text/plain")
    return run.run_id


def test_the_views_give_the_same_column_order_on_both_stores(recorded: str, home: Path) -> None:
    with LocalStore(home) as local, ElasticStore.from_settings(load()) as remote:
        orders = [list(next(iter(views.samples(store, recorded)))) for store in (local, remote)]
    assert orders[0] == orders[1]
    assert orders[0] == sample_column_order(orders[0])


@pytest.mark.parametrize("args", [[], ["--sort", "zeta"]], ids=["whole", "sorted"])
def test_the_csv_and_json_give_the_same_column_order_on_both_stores(
    recorded: str,
    args: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    found: dict[str, Any] = {}
    for store in ("local", "elasticsearch"):
        monkeypatch.setenv("WAREHOUSE_STORE", store)
        argv = ["query", "samples", "--run", recorded, "--split", "val", *args]
        code, out, err = run_main([*argv, "-f", "csv"], monkeypatch, capsys)
        assert code == 0, err
        header = next(csv.reader(io.StringIO(out)))
        code, out, err = run_main([*argv, "-f", "json"], monkeypatch, capsys)
        assert code == 0, err
        found[store] = (header, list(json.loads(out)[0]))
    assert found["local"] == found["elasticsearch"]
    header, keys = found["local"]
    assert header == keys == sample_column_order(keys)
