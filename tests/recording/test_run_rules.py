"""Issue 14 items 11 and 12, through the recording API on both store engines: names that
collide once normalised are refused (never one value silently kept), Unicode names are kept,
and sample ids follow one rule (no nulls, no repeats) locally and in Elasticsearch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import warehouse
from warehouse.errors import InvalidRecord
from warehouse.models import normalise_name
from warehouse.settings import Settings, load
from warehouse.stores.base import RunQuery, SampleQuery, Store
from warehouse.stores.elastic import ElasticStore, init_elasticsearch
from warehouse.stores.local import LocalStore


@pytest.fixture(params=["local", "elasticsearch"])
def engine(request: pytest.FixtureRequest, home: Path) -> Iterator[tuple[Settings, list[Store]]]:
    """Settings of one engine and the stores a record must reach (local first, always)."""
    if request.param == "local":
        settings = load(cli={"system_interval_s": 0})
        with LocalStore(home) as local:
            yield settings, [local]
        return
    es_url = request.getfixturevalue("es_url")
    prefix = request.getfixturevalue("es_prefix")
    settings = load(cli={"es_url": es_url, "index_prefix": prefix, "system_interval_s": 0})
    init_elasticsearch(settings)
    with LocalStore(home) as local, ElasticStore(es_url, prefix=prefix) as remote:
        yield settings, [local, remote]


def _doc(store: Store, run_id: str) -> dict[str, Any]:
    (doc,) = store.search_runs(RunQuery(filter=f"run_id:{run_id}"))
    return doc


def test_unicode_metric_names_are_kept_not_turned_into_underscores() -> None:
    assert normalise_name("précision") == "précision"
    assert normalise_name("精度") == "精度"
    assert normalise_name("точность") != normalise_name("精度")
    assert normalise_name("top-1 acc") == "top-1_acc"  # ASCII names are stored as before
    assert normalise_name("e\u0301t\u00e9") == normalise_name("\u00e9t\u00e9")  # NFC


@pytest.mark.parametrize(
    "names", [("top-1 acc", "top-1_acc"), ("top-1 acc", "top-1.acc"), ("a/b", "a b")]
)
def test_two_metric_names_that_collide_in_one_call_are_refused(
    engine: tuple[Settings, list[Store]], names: tuple[str, str]
) -> None:
    settings, stores = engine
    with warehouse.start_run("names", settings=settings) as run:
        with pytest.raises(InvalidRecord) as caught:
            run.log_metrics("val", {names[0]: 0.1, names[1]: 0.9})
        run.log_metrics("val", {"other": 1.0})
    for name in names:
        assert repr(name) in str(caught.value)
    for store in stores:
        stored = _doc(store, run.run_id)["metrics"]["val"]
        assert stored == {"other": 1.0}  # nothing of the refused call, no silent winner


def test_a_colliding_name_in_a_later_call_is_refused_and_the_first_value_kept(
    engine: tuple[Settings, list[Store]],
) -> None:
    settings, stores = engine
    with warehouse.start_run("names", settings=settings) as run:
        run.log_metrics("val", {"top-1 acc": 0.25})
        run.log_metric("val", "top-1 acc", 0.5)  # the same name again: an update
        with pytest.raises(InvalidRecord, match=r"top-1\.acc"):
            run.log_metrics("val", {"top-1.acc": 0.75})
        run.log_metrics("val set", {"acc": 0.1})
        with pytest.raises(InvalidRecord, match="split names"):
            run.log_metrics("val.set", {"acc": 0.2})
    for store in stores:
        metrics = _doc(store, run.run_id)["metrics"]
        assert metrics["val"] == {"top-1_acc": 0.5}
        assert metrics["val_set"] == {"acc": 0.1}


def test_unicode_metrics_are_stored_apart_on_both_stores(
    engine: tuple[Settings, list[Store]],
) -> None:
    settings, stores = engine
    values = {"précision": 0.5, "精度": 0.25, "точность": 0.125}
    with warehouse.start_run("names", settings=settings) as run:
        run.log_metrics("val", values)
    for store in stores:
        assert _doc(store, run.run_id)["metrics"]["val"] == values


def _samples(store: Store, run_id: str) -> list[str]:
    rows = store.search_samples(SampleQuery(run_id=run_id, split="val", limit=None))
    return sorted(r["sample_id"] for r in rows)


@pytest.mark.parametrize(
    "bad",
    [
        [{"sample_id": i % 50, "loss": 0.1} for i in range(100)],  # 100 rows, 50 ids
        [{"sample_id": "a", "loss": 0.1}, {"sample_id": None, "loss": 0.2}],
    ],
    ids=["duplicates", "null"],
)
def test_log_samples_refuses_bad_ids_on_both_stores_and_keeps_the_split_before(
    engine: tuple[Settings, list[Store]], bad: list[dict[str, Any]], home: Path
) -> None:
    settings, stores = engine
    good = [{"sample_id": f"s{i}", "loss": i / 10} for i in range(5)]
    with warehouse.start_run("ids", settings=settings) as run:
        assert run.log_samples("val", good) == 5
        with pytest.raises(InvalidRecord, match="sample_id"):
            run.log_samples("val", bad)
    for store in stores:
        assert _samples(store, run.run_id) == sorted(r["sample_id"] for r in good)
        assert _doc(store, run.run_id)["sample_counts"] == {"val": 5}
    outbox = home / "outbox"
    assert not outbox.exists() or not [p for p in outbox.iterdir() if p.suffix == ".json"]


def test_a_sample_column_the_first_row_lacks_is_kept(home: Path) -> None:
    """Arrow's from_pylist takes the first row's keys only: a `label` that row lacked was
    dropped for every sample, silently. Every column any row has is kept; rows without it
    hold a null there, across batch boundaries too."""
    import pyarrow as pa

    import warehouse
    from warehouse.recording.sample_rows import BATCH_ROWS
    from warehouse.stores.local import LocalStore

    n = BATCH_ROWS + 10
    rows: list[dict[str, object]] = [
        {"sample_id": f"s{i}", "correct": i % 2 == 0} for i in range(n)
    ]
    rows[1]["label"] = "cat"
    rows[-1]["size"] = 3.5  # only in the last batch
    with warehouse.start_run("columns") as run:
        run.log_samples("val", rows)
    with LocalStore(home) as store:
        table = pa.Table.from_batches(list(store.sample_batches(run.run_id, "val")))
    assert table.num_rows == n
    assert table.column("label").to_pylist()[:3] == [None, "cat", None]
    assert table.column("size").null_count == n - 1


def test_a_huge_error_message_is_cut_with_a_note(home: Path) -> None:
    """A 50 MB message (a dumped tensor) would make a 50 MB run document, rewritten on every
    save; it is kept to its first 64 KiB with a note of how much was cut."""
    import warehouse

    message = "x" * (50 * 1024 * 1024)
    with pytest.raises(ValueError, match=r"^xxx"), warehouse.start_run("huge-error") as run:
        raise ValueError(message)
    with LocalStore(home) as store:
        (doc,) = store.search_runs(RunQuery(filter=f"run_id:{run.run_id}"))
    stored = doc["error"]["message"]
    assert len(stored) < 70 * 1024
    assert stored.endswith(f"[cut by warehouse: {len(message) - 64 * 1024:,} more characters]")
