"""The content digest of a split's sample rows: the same rows give the same digest on every store.

The local store records it in each sample file's footer when it writes the file
(``warehouse_rows_sha256``); ``warehouse sync --verify`` computes it again from the file and
from Elasticsearch's copy and compares the three. It is defined on the rows, not on bytes, so
that it does not depend on how a store keeps them:

- rows in write order; batch boundaries do not count;
- the columns a store adds (``run_id``, ``experiment``, ``split``, ``recorded_at``) are left
  out, and a column whose every value is null is the same as no column (Elasticsearch leaves
  nulls out of its documents);
- every number is a float64 (``3`` and ``3.0`` are one value), booleans and text are
  themselves; any other value is its JSON text.

Per column, one hash takes a type byte per row (0 null, 1 number, 2 boolean, 3 text, 4 other)
and others take the values of each type, all fed batch by batch with Arrow kernels, so a
million rows cost milliseconds, not a Python object each.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from warehouse.stores.lazy import np, pa, pc

ADDED = frozenset({"run_id", "experiment", "split", "recorded_at"})
"""Columns a store adds to every row: not part of the content."""
FOOTER_KEY = b"warehouse_rows_sha256"
"""The Parquet footer key the digest is recorded under."""

_NULL, _NUMBER, _BOOL, _TEXT, _OTHER = 0, 1, 2, 3, 4


class _Column:
    def __init__(self, rows_before: int) -> None:
        self.kinds = hashlib.sha256(bytes(rows_before))
        self.values = {kind: hashlib.sha256() for kind in (_NUMBER, _BOOL, _TEXT, _OTHER)}
        self.lengths = {kind: hashlib.sha256() for kind in (_TEXT, _OTHER)}


class RowDigest:
    """Fed batches in write order; :meth:`hexdigest` is the rows' content digest."""

    def __init__(self) -> None:
        self.rows = 0
        self._columns: dict[str, _Column] = {}

    def add(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        seen: set[str] = set()
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            if name in ADDED:
                continue
            if pa.types.is_dictionary(column.type):
                column = column.cast(column.type.value_type)
            if column.null_count == n and name not in self._columns:
                continue  # still no value in this column: the same as no column
            state = self._columns.get(name)
            if state is None:
                state = self._columns[name] = _Column(self.rows)
            seen.add(name)
            _feed(state, column)
        for name, state in self._columns.items():
            if name not in seen:
                state.kinds.update(bytes(n))
        self.rows += n

    def update(self, batches: Iterable[pa.RecordBatch]) -> RowDigest:
        for batch in batches:
            self.add(batch)
        return self

    def hexdigest(self) -> str:
        total = hashlib.sha256(f"rows {self.rows}\n".encode())
        for name in sorted(self._columns):
            state = self._columns[name]
            total.update(json.dumps(name).encode() + b"\n" + state.kinds.digest())
            for hashes in (state.values, state.lengths):
                for kind in sorted(hashes):
                    total.update(hashes[kind].digest())
        return total.hexdigest()


def digest_of(batches: Iterable[pa.RecordBatch]) -> str:
    """The content digest of ``batches`` (a split's rows in write order)."""
    return RowDigest().update(batches).hexdigest()


def _feed(state: _Column, column: pa.Array) -> None:
    kind_of = _kind(column.type)
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    state.kinds.update((valid.astype(np.uint8) * np.uint8(kind_of)).tobytes())
    values = pc.drop_null(column)
    if not len(values):
        return
    if kind_of == _NUMBER:
        numbers = values.cast(pa.float64()).to_numpy(zero_copy_only=False)
        state.values[_NUMBER].update(np.ascontiguousarray(numbers, "<f8").tobytes())
    elif kind_of == _BOOL:
        state.values[_BOOL].update(values.cast(pa.uint8()).to_numpy().tobytes())
    else:
        if kind_of == _OTHER:
            values = pa.array([_json(v) for v in values.to_pylist()], pa.string())
        text = values.cast(pa.large_string())
        lengths = pc.binary_length(text).to_numpy(zero_copy_only=False).astype("<i8")
        state.lengths[kind_of].update(lengths.tobytes())
        offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)
        start, end = int(offsets[text.offset]), int(offsets[text.offset + len(text)])
        state.values[kind_of].update(memoryview(text.buffers()[2])[start:end])


def _kind(kind: pa.DataType) -> int:
    if pa.types.is_boolean(kind):
        return _BOOL
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return _NUMBER
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _TEXT
    return _OTHER


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True, ensure_ascii=False)


__all__ = ["ADDED", "FOOTER_KEY", "RowDigest", "digest_of"]
