"""The local store's filter engine: a Lucene tree (:mod:`warehouse.lucene`) evaluated over an
Arrow table, column by column with pyarrow.compute — the mirror of ``elastic_query.py``, which
translates the same tree to Elasticsearch's query DSL.

Semantics follow Elasticsearch/Lucene exactly (the parity suite checks them): a term on a
list field matches when any element does; a document without the field never matches a term
or range on it, so ``NOT field:x`` includes it.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warehouse import lucene


def arrow_kinds(schema: pa.Schema) -> dict[str, str]:
    """The kind of every column of an Arrow schema (names starting with ``_`` left out)."""
    kinds: dict[str, str] = {}
    for f in schema:
        typ = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        if f.name.startswith("_"):
            continue
        if pa.types.is_boolean(typ):
            kinds[f.name] = lucene.BOOLEAN
        elif pa.types.is_integer(typ) or pa.types.is_floating(typ):
            kinds[f.name] = lucene.NUMBER
        elif pa.types.is_timestamp(typ) or pa.types.is_date(typ):
            kinds[f.name] = lucene.DATE
        elif pa.types.is_list(typ) or pa.types.is_large_list(typ):
            kinds[f.name] = lucene.TEXT_LIST
        elif pa.types.is_null(typ):
            kinds[f.name] = lucene.EMPTY
        else:
            kinds[f.name] = lucene.TEXT
    return kinds


def to_mask(
    node: lucene.Node, table: pa.Table, default_fields: Collection[str] = lucene.DEFAULT_FIELDS
) -> np.ndarray:
    """A boolean numpy array: which rows of ``table`` match (validated first)."""
    columns = arrow_kinds(table.schema)
    lucene.validate(node, columns, default_fields)
    return _ArrowEval(table, columns, default_fields).mask(node)


class _ArrowEval:
    """Evaluates a validated tree column by column with pyarrow.compute."""

    def __init__(self, table: pa.Table, columns: dict[str, str], defaults: Collection[str]):
        self.table, self.columns, self.defaults = table, columns, defaults
        self.n = table.num_rows

    def mask(self, node: lucene.Node) -> np.ndarray:
        out: np.ndarray
        if isinstance(node, lucene.And):
            out = np.ones(self.n, dtype=bool)
            for item in node.items:
                out &= self.mask(item)
            return out
        if isinstance(node, lucene.Or):
            out = np.zeros(self.n, dtype=bool)
            for item in node.items:
                out |= self.mask(item)
            return out
        if isinstance(node, lucene.Not):
            return ~self.mask(node.item)
        if node.field is None:
            fields_ = lucene.default_fields_present(self.columns, self.defaults)
            return self.mask(lucene.Or(tuple(lucene.with_field(node, f) for f in fields_)))
        kind = self.columns[node.field]
        col = self.table.column(node.field)
        if kind == lucene.EMPTY:
            out = np.zeros(self.n, dtype=bool)
            return out
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        if kind == lucene.TEXT_LIST:
            if isinstance(node, lucene.Exists):
                length = pc.list_value_length(col)
                return self._numpy(pc.greater(length, 0))
            flat, parents = pc.list_flatten(col), pc.list_parent_indices(col)
            hit = self._leaf(node, lucene.TEXT, flat)
            out = np.zeros(self.n, dtype=bool)
            out[parents.to_numpy(zero_copy_only=False)[hit]] = True
            return out
        return self._leaf(node, kind, col)

    def _leaf(self, node: lucene.Node, kind: str, col: Any) -> np.ndarray:
        if isinstance(node, lucene.Exists):
            valid = pc.is_valid(col)
            if kind == lucene.NUMBER and pa.types.is_floating(col.type):
                valid = pc.and_(valid, pc.invert(pc.is_nan(col)))
            return self._numpy(valid)
        if isinstance(node, lucene.Range):
            hit = None
            if node.low is not None:
                cmp = pc.greater_equal if node.include_low else pc.greater
                hit = cmp(col, self._scalar(node.field, kind, col.type, node.low, ranged=True))
            if node.high is not None:
                cmp = pc.less_equal if node.include_high else pc.less
                high = cmp(col, self._scalar(node.field, kind, col.type, node.high, ranged=True))
                hit = high if hit is None else pc.and_(hit, high)
            return self._numpy(pc.is_valid(col) if hit is None else hit)
        assert isinstance(node, lucene.Term | lucene.Phrase)
        if isinstance(node, lucene.Term) and node.wildcard:
            return self._numpy(pc.match_like(col, _like(node.value)))
        return self._numpy(pc.equal(col, self._scalar(node.field, kind, col.type, node.value)))

    def _scalar(
        self, field: str | None, kind: str, typ: Any, value: str, ranged: bool = False
    ) -> Any:
        assert field is not None
        converted = lucene.value_of(field, kind, value, ranged=ranged)
        if kind == lucene.DATE:  # the column's own unit and zone (naive columns hold UTC)
            if pa.types.is_date(typ):
                return pa.scalar(converted.astimezone(UTC).date(), typ)
            if typ.tz is None:
                converted = converted.astimezone(UTC).replace(tzinfo=None)
            return pa.scalar(converted, typ)
        return converted

    def _numpy(self, result: Any) -> np.ndarray:
        filled = pc.fill_null(result, False)
        out: np.ndarray = np.asarray(filled.to_numpy(zero_copy_only=False), dtype=bool)
        return out


def _like(pattern: str) -> str:
    """A Lucene wildcard pattern as an SQL LIKE pattern (backslash escapes)."""
    out, escaped = [], False
    for ch in pattern:
        if escaped:
            out.append("\\" + ch if ch in "%_\\" else ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "*":
            out.append("%")
        elif ch == "?":
            out.append("_")
        else:
            out.append("\\" + ch if ch in "%_" else ch)
    return "".join(out)


__all__ = ["arrow_kinds", "to_mask"]
