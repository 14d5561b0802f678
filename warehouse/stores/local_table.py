"""The run catalog's table: run documents flattened to typed columns, merged, stacked.

Pure functions over Arrow tables (no file is read or written here): the catalog
(:mod:`~warehouse.stores.local_catalog`) and its background compaction
(:mod:`~warehouse.stores.local_compaction`) both build with them.

Column types are unified over all runs: a column whose values are all numbers is DOUBLE, all
booleans BOOLEAN, otherwise text; ``tags``/``invalid_metrics``/``overrides`` are lists of
text; ``started_at``/``ended_at``/``heartbeat_at``/``git.committed_at`` are UTC timestamps.
``config``, ``environment``, ``artifacts`` and ``error.traceback`` are kept only in ``_doc``.

One run never makes the catalog pay for its size: of a run with more than
:data:`~warehouse.stores.elastic_templates.MAX_TYPED_PARAMS` params, only the first that many
(by name) become columns, as Elasticsearch types them; the rest are read from its document
when a filter names them (the run is marked in :data:`EXTRA_PARAMS`). ``_doc_crc`` holds the
CRC-32 of each ``_doc`` text, checked whenever a document is read from the mapped catalog.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence
from typing import Any

from warehouse.stores.elastic_templates import MAX_TYPED_PARAMS
from warehouse.stores.lazy import np, pa, pc
from warehouse.values import parse_time

DOC = "_doc"
DOC_CRC = "_doc_crc"
EXTRA_PARAMS = "_params_extra"  # true for a run whose params are not all columns
LISTS = frozenset({"tags", "invalid_metrics", "overrides", "recording_notes"})
TIMESTAMPS = frozenset({"started_at", "ended_at", "heartbeat_at", "git.committed_at"})
_SKIP = frozenset({"config", "environment", "artifacts", "error.traceback", "params"})


def flatten_run(doc: dict[str, Any], text: str) -> dict[str, Any]:
    """One run document as ``{dotted.column: scalar}`` plus ``_doc`` (its JSON text)."""
    row: dict[str, Any] = {DOC: text, DOC_CRC: doc_crc(text)}
    _walk(doc, "", row)
    params = doc.get("params")
    if isinstance(params, dict) and params:
        keys = sorted(params) if len(params) > MAX_TYPED_PARAMS else list(params)
        if len(keys) > MAX_TYPED_PARAMS:
            row[EXTRA_PARAMS] = True
        for key in keys[:MAX_TYPED_PARAMS]:
            value = params[key]
            if isinstance(value, dict):
                _walk(value, f"params.{key}.", row)
            elif isinstance(value, list):
                continue
            else:
                row[f"params.{key}"] = value
    return row


def doc_crc(text: str) -> int:
    """The CRC-32 of a document's text as stored (UTF-8)."""
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def _walk(node: dict[str, Any], prefix: str, row: dict[str, Any]) -> None:
    for key, value in node.items():
        name = f"{prefix}{key}"
        if name in _SKIP:
            continue
        if isinstance(value, dict):
            _walk(value, f"{name}.", row)
        elif isinstance(value, list):
            if name in LISTS:
                row[name] = [_text(v) for v in value if v is not None]
        else:
            row[name] = value


def build_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Rows of flattened runs as one table, each column's type unified over the rows."""
    names: dict[str, None] = {"run_id": None, DOC: None, DOC_CRC: None}
    for row in rows:
        names.update(dict.fromkeys(row))
    return pa.table({name: _column(name, [r.get(name) for r in rows]) for name in names})


def _column(name: str, values: list[Any]) -> pa.Array:
    if name in (DOC, "run_id"):
        return pa.array(values, pa.string())
    if name == DOC_CRC:
        return pa.array(values, pa.uint32())
    if name in LISTS:
        return pa.array([v if isinstance(v, list) else None for v in values], pa.list_(pa.string()))
    if name in TIMESTAMPS:
        return pa.array([parse_time(v) for v in values], pa.timestamp("us", tz="UTC"))
    present = [v for v in values if v is not None]
    if not present:
        return pa.nulls(len(values))
    if all(isinstance(v, bool) for v in present):
        return pa.array(values, pa.bool_())
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pa.array([_finite(v) for v in values], pa.float64())
    return pa.array([None if v is None else _text(v) for v in values], pa.string())


def merge(base: pa.Table | None, delta: dict[str, dict[str, Any] | None]) -> pa.Table | None:
    """``base`` with the journaled runs replaced (or removed: None = file gone or corrupt).
    The rows of ``base`` that stay are zero-copy slices of it: a mapped catalog stays mapped."""
    if not delta:
        return base
    parts = []
    if base is not None and base.num_rows:
        changed = pa.array(list(delta), pa.string())
        hit = pc.is_in(base.column("run_id"), value_set=changed)
        holes = np.flatnonzero(hit.to_numpy(zero_copy_only=False))
        start = 0
        for row in holes.tolist():
            if row > start:
                parts.append(base.slice(start, row - start))
            start = row + 1
        if start < base.num_rows:
            parts.append(base.slice(start))
    rows = [row for row in delta.values() if row is not None]
    if rows:
        parts.append(build_table(rows))
    return concat(parts) if parts else build_table([])


def concat(tables: list[pa.Table]) -> pa.Table:
    """Tables stacked; a column typed differently in two tables becomes text."""
    if len(tables) == 1:
        return tables[0]
    types: dict[str, pa.DataType] = {}
    for table in tables:
        for f in table.schema:
            seen = types.get(f.name)
            if seen is None or pa.types.is_null(seen):
                types[f.name] = f.type
            elif seen != f.type and not pa.types.is_null(f.type):
                types[f.name] = pa.string()
    aligned = []
    for table in tables:
        names = table.schema.names
        columns = {
            name: (
                (
                    table.column(name)
                    if table.schema.field(name).type == typ
                    else table.column(name).cast(typ)
                )
                if name in names
                else pa.nulls(table.num_rows, typ)
            )
            for name, typ in types.items()
        }
        aligned.append(pa.table(columns))
    return pa.concat_tables(aligned)


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else json.dumps(value)


__all__ = [
    "DOC",
    "DOC_CRC",
    "EXTRA_PARAMS",
    "LISTS",
    "TIMESTAMPS",
    "build_table",
    "concat",
    "doc_crc",
    "flatten_run",
    "merge",
]
