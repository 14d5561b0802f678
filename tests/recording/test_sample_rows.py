"""``log_samples``' rows → Arrow batches (``warehouse.recording.sample_rows.iter_batches``): the
fast path for rows that share their keys must give what the general path gives."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest

from warehouse.errors import InvalidRecord
from warehouse.recording import sample_rows
from warehouse.recording.sample_rows import batch_from_rows, iter_batches


def _rows(n: int) -> Iterator[dict[str, Any]]:
    for i in range(n):
        yield {"sample_id": f"s{i}", "label": i % 3, "correct": i % 2 == 0}


def test_rows_sharing_their_keys_become_columns_in_their_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sample_rows, "BATCH_ROWS", 4)
    batches = list(iter_batches(_rows(10)))  # a generator, read 4 rows at a time
    assert [len(b) for b in batches] == [4, 4, 2]
    assert all(b.schema.names == ["sample_id", "label", "correct"] for b in batches)
    assert batches[2].to_pylist() == list(_rows(10))[8:]


def test_rows_with_other_keys_keep_every_column_with_nulls_where_missing() -> None:
    rows: list[Mapping[str, Any]] = [
        {"sample_id": "a", "x": 1},
        {"sample_id": "b", "y": 2.5},  # same number of keys, another key
        {"x": 3, "sample_id": "c"},  # same keys, another order
    ]
    assert batch_from_rows(rows).to_pydict() == {
        "sample_id": ["a", "b", "c"],
        "x": [1, None, 3],
        "y": [None, 2.5, None],
    }


def test_any_mapping_is_a_row_and_anything_else_is_refused_by_type() -> None:
    mixed = [{"sample_id": "a"}, MappingProxyType({"sample_id": "b"})]
    (batch,) = iter_batches(mixed)
    assert batch.column("sample_id").to_pylist() == ["a", "b"]
    with pytest.raises(InvalidRecord, match="must be a mapping, not tuple"):
        list(iter_batches([{"sample_id": "a"}, ("sample_id", "b")]))
