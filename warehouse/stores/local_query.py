"""The local store's filter engine: a Lucene tree (:mod:`warehouse.filters.lucene`) evaluated over
an Arrow table, column by column with pyarrow.compute — the mirror of ``elastic_query.py``, which
translates the same tree to Elasticsearch's query DSL.

Semantics follow Elasticsearch/Lucene exactly (the parity suite checks them): a term on a
list field matches when any element does; a document without the field never matches a term
or range on it, so ``NOT field:x`` includes it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection
from typing import Any

from warehouse.filters import lucene
from warehouse.stores import params_extra as extra
from warehouse.stores.elastic_templates import MAX_TYPED_PARAMS
from warehouse.stores.lazy import np, pa, pc
from warehouse.stores.local_docs import indices
from warehouse.stores.local_table import DOC, EXTRA_PARAMS


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
    node: lucene.Node,
    table: pa.Table,
    default_fields: Collection[str] = lucene.DEFAULT_FIELDS,
    analyzed: Collection[str] | None = None,
) -> np.ndarray:
    """A boolean numpy array: which rows of ``table`` match (validated first).

    ``analyzed``: the fields searched word by word (default: the run fields Elasticsearch
    maps as ``text`` when ``default_fields`` are the run defaults, else none)."""
    if analyzed is None:
        runs = tuple(default_fields) == lucene.DEFAULT_FIELDS
        analyzed = lucene.ANALYZED_RUN_FIELDS if runs else ()
    columns = arrow_kinds(table.schema)
    for name in analyzed:
        if columns.get(name) == lucene.TEXT:
            columns[name] = lucene.ANALYZED
    extra = _ExtraParams(table, lucene.fields(node))
    if extra.present:  # as Elasticsearch sees them: a key only in params_extra is text
        for name in lucene.fields(node):
            if name.startswith("params.") and not extra.typed(name):
                columns[name] = lucene.TEXT
    lucene.validate(node, columns, default_fields)
    return _ArrowEval(table, columns, default_fields, extra).mask(node)


_DOC = DOC  # the run catalog's column holding each run's whole document
_IGNORE_ABOVE = 1024  # params_extra's ignore_above: longer values are not searchable


class _ExtraParams:
    """Where Elasticsearch keeps params of runs with huge configs: past the first
    :data:`MAX_TYPED_PARAMS` keys (sorted), in ``params_extra``, a keyed ``flattened`` field
    holding each value as keyword text. Filters on ``params.<key>`` treat those runs' values
    the way Elasticsearch does there (``elastic_query.extra_leaf``)."""

    def __init__(self, table: pa.Table, names: Collection[str]) -> None:
        self.n = table.num_rows
        self.values: dict[str, dict[int, list[str]]] = {}
        self.present = False
        keys = {n[len("params.") :] for n in names if n.startswith("params.")}
        if not keys or _DOC not in table.schema.names or EXTRA_PARAMS not in table.schema.names:
            return  # no run has more params than are typed (the catalog marks those that do)
        marked = pc.fill_null(table.column(EXTRA_PARAMS), False)
        flagged = np.flatnonzero(np.asarray(marked.to_numpy(zero_copy_only=False), dtype=bool))
        self.values = {key: {} for key in keys}
        self._columns = {
            key: table.column(f"params.{key}")
            for key in keys
            if f"params.{key}" in table.schema.names
        }
        texts = table.column(_DOC).take(indices(flagged)).to_pylist()
        for row, text in zip(flagged.tolist(), texts, strict=True):
            params = json.loads(text).get("params") if text else None
            if not isinstance(params, dict) or len(params) <= MAX_TYPED_PARAMS:
                continue
            self.present = True
            overflow = sorted(params)[MAX_TYPED_PARAMS:]
            for key in keys.intersection(overflow):
                self.values[key][row] = _indexed_texts(params[key])

    def rows(self, field: str) -> np.ndarray:
        """Rows whose value of ``field`` lives in params_extra."""
        out = np.zeros(self.n, dtype=bool)
        held = self.values.get(field[len("params.") :], {}) if field.startswith("params.") else {}
        out[list(held)] = True
        return out

    def typed(self, field: str) -> bool:
        """Whether some run keeps a value of ``field`` among its typed params."""
        column = self._columns.get(field[len("params.") :])
        if column is None:
            return False
        valid = np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), dtype=bool)
        return bool((valid & ~self.rows(field)).any())

    def mask(self, node: lucene.Leaf) -> np.ndarray:
        """Which runs match ``node`` through their params_extra values."""
        assert node.field is not None
        key = node.field[len("params.") :]
        held = self.values.get(key, {})
        out = np.zeros(self.n, dtype=bool)
        if (
            isinstance(node, lucene.Term)
            and node.wildcard
            and any(held.values())
            and extra.wildcard_prefix(node.value) is None
        ):
            raise extra.extra_wildcard_error(f"{extra.EXTRA}.{key}", node.value)
        for row, texts in held.items():
            out[row] = any(_extra_match(node, v) for v in texts)
        return out


def _extra_match(node: lucene.Leaf, value: str) -> bool:
    """Whether one params_extra text matches, as ``elastic_query.extra_leaf`` asks."""
    if isinstance(node, lucene.Exists):
        return True
    if isinstance(node, lucene.Range):
        low, high = extra.extra_bounds(node)
        above = value >= low if node.include_low or node.low is None else value > low
        below = value <= high if node.include_high or node.high is None else value < high
        return above and below
    if isinstance(node, lucene.Term) and node.wildcard:
        prefix = extra.wildcard_prefix(node.value)
        return prefix is not None and value.startswith(prefix)
    return value == node.value


def _indexed_texts(value: Any) -> list[str]:
    """The keyword texts a ``flattened`` field indexes for a JSON value (``ignore_above``)."""
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if item is None or isinstance(item, dict | list):
            continue
        if isinstance(item, bool):
            text = "true" if item else "false"
        elif isinstance(item, float):
            if not math.isfinite(item):
                continue  # stored as null
            text = json.dumps(item)
        else:
            text = str(item)
        if len(text) <= _IGNORE_ABOVE:
            out.append(text)
    return out


class _ArrowEval:
    """Evaluates a validated tree column by column with pyarrow.compute."""

    def __init__(
        self,
        table: pa.Table,
        columns: dict[str, str],
        defaults: Collection[str],
        extra: _ExtraParams,
    ) -> None:
        self.table, self.columns, self.defaults = table, columns, defaults
        self.extra = extra
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
        if self.extra.present and node.field.startswith("params."):
            held = self.extra.rows(node.field)
            if self.extra.typed(node.field):
                typed = self._field(node)
            else:
                typed = np.zeros(self.n, dtype=bool)
            out = (typed & ~held) | self.extra.mask(node)
            return out
        return self._field(node)

    def _field(self, node: lucene.Leaf) -> np.ndarray:
        assert node.field is not None
        kind = self.columns[node.field]
        col = self.table.column(node.field)
        if kind == lucene.EMPTY or pa.types.is_null(col.type):
            out: np.ndarray = np.zeros(self.n, dtype=bool)
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
        if kind == lucene.ANALYZED and not isinstance(node, lucene.Exists):
            return _words(node, col.to_pylist())
        if kind == lucene.DATE and not isinstance(node, lucene.Exists):
            assert isinstance(node, lucene.Range | lucene.Term | lucene.Phrase)
            return _dates(node, col)
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
                hit = cmp(col, self._scalar(node.field, kind, node.low, ranged=True))
            if node.high is not None:
                cmp = pc.less_equal if node.include_high else pc.less
                high = cmp(col, self._scalar(node.field, kind, node.high, ranged=True))
                hit = high if hit is None else pc.and_(hit, high)
            return self._numpy(pc.is_valid(col) if hit is None else hit)
        assert isinstance(node, lucene.Term | lucene.Phrase)
        if isinstance(node, lucene.Term) and node.wildcard:
            return self._numpy(pc.match_like(col, _like(node.value)))
        return self._numpy(pc.equal(col, self._scalar(node.field, kind, node.value)))

    def _scalar(self, field: str | None, kind: str, value: str, ranged: bool = False) -> Any:
        assert field is not None
        return lucene.value_of(field, kind, value, ranged=ranged)

    def _numpy(self, result: Any) -> np.ndarray:
        filled = pc.fill_null(result, False)
        out: np.ndarray = np.asarray(filled.to_numpy(zero_copy_only=False), dtype=bool)
        return out


def _dates(node: lucene.Range | lucene.Term | lucene.Phrase, col: Any) -> np.ndarray:
    """A date term or range as Elasticsearch runs it: the millisecond interval of
    :func:`lucene.ms_bounds` against values cut to milliseconds (Elasticsearch's ``date``)."""
    low, high = lucene.ms_bounds(node)
    typ = col.type
    if pa.types.is_date(typ):
        days = pc.cast(col, pa.date32()).cast(pa.int32()).to_numpy(zero_copy_only=False)
        ms = np.asarray(days, dtype="float64") * 86_400_000
    else:
        raw = pc.cast(col.cast(pa.timestamp(typ.unit, tz=typ.tz)), pa.int64())
        per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[typ.unit]
        values = np.asarray(raw.to_numpy(zero_copy_only=False), dtype="float64")
        ms = values * 1000 if per_ms is None else np.floor_divide(values, per_ms)
    valid = np.asarray(pc.is_valid(col).to_numpy(zero_copy_only=False), dtype=bool)
    out = valid.copy()
    with np.errstate(invalid="ignore"):
        if low is not None:
            out &= ms >= low
        if high is not None:
            out &= ms <= high
    return out


def _words(node: lucene.Node, values: list[Any]) -> np.ndarray:
    """An analysed text field searched word by word, as Elasticsearch's ``match`` (any word),
    ``match_phrase`` (the words in a row) and ``wildcard`` (one word) do."""
    out = np.zeros(len(values), dtype=bool)
    if isinstance(node, lucene.Term) and node.wildcard:
        pattern = re.compile(_wildcard_regex(node.value.lower()), re.DOTALL)
        for row, value in enumerate(values):
            if isinstance(value, str):
                out[row] = any(pattern.fullmatch(w) for w in lucene.analyze(value))
        return out
    assert isinstance(node, lucene.Term | lucene.Phrase)
    wanted = lucene.analyze(node.value)
    if not wanted:
        return out
    if isinstance(node, lucene.Term):
        wanted_set = set(wanted)
        for row, value in enumerate(values):
            if isinstance(value, str):
                out[row] = not wanted_set.isdisjoint(lucene.analyze(value))
        return out
    size = len(wanted)
    for row, value in enumerate(values):
        if isinstance(value, str):
            words = lucene.analyze(value)
            out[row] = any(words[i : i + size] == wanted for i in range(len(words) - size + 1))
    return out


def _wildcard_regex(pattern: str) -> str:
    """A Lucene wildcard pattern as a regular expression (backslash escapes)."""
    out, escaped = [], False
    for ch in pattern:
        if escaped:
            out.append(re.escape(ch))
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return "".join(out)


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
