"""Issue 14 item 11: one sample-id rule on every store — no null ids, no id twice in a split.

Before, 100 rows with 50 ids were 100 rows locally and 50 in Elasticsearch (the id is the
document id there), and null ids were stored locally but refused by Elasticsearch for ever.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from warehouse.errors import InvalidRecord
from warehouse.models import Run
from warehouse.stores.base import SampleQuery, Store


def _rows(ids: list[str | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"sample_id": sid, "loss": float(n)} for n, sid in enumerate(ids)]
    )


def _stored(store: Store, run_id: str) -> list[str]:
    return sorted(
        r["sample_id"]
        for r in store.search_samples(SampleQuery(run_id=run_id, split="val", limit=None))
    )


def _run(store: Store) -> str:
    doc = Run(experiment="ids").to_doc()
    store.write_runs([doc])
    return str(doc["run_id"])


def test_ids_repeated_across_batches_are_refused_and_nothing_is_stored(store: Store) -> None:
    run_id = _run(store)
    first = [str(i) for i in range(50)]
    with pytest.raises(InvalidRecord, match="more than once") as caught:
        store.write_samples(run_id, "ids", "val", [_rows(first), _rows(first)])  # 100 rows
    assert "'0'" in str(caught.value)
    assert _stored(store, run_id) == []


def test_ids_repeated_inside_one_batch_are_refused(store: Store) -> None:
    run_id = _run(store)
    with pytest.raises(InvalidRecord, match=r"'7' appear"):
        store.write_samples(run_id, "ids", "val", [_rows(["1", "7", "3", "7"])])
    assert _stored(store, run_id) == []


def test_a_null_id_is_refused_naming_the_row(store: Store) -> None:
    run_id = _run(store)
    with pytest.raises(InvalidRecord, match="sample_id") as caught:
        store.write_samples(run_id, "ids", "val", [_rows(["a", "b"]), _rows(["c", None])])
    assert "row 3" in str(caught.value) or "rows without a sample_id" in str(caught.value)
    assert _stored(store, run_id) == []


def test_unique_ids_over_many_batches_are_all_stored(store: Store) -> None:
    run_id = _run(store)
    batches = [_rows([f"{b}-{i}" for i in range(30)]) for b in range(4)]
    assert store.write_samples(run_id, "ids", "val", batches) == 120
    assert _stored(store, run_id) == sorted(f"{b}-{i}" for b in range(4) for i in range(30))
