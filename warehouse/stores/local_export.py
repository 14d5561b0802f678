"""Run fields read from the local store's catalog columns instead of the run documents.

Parsing a run's JSON document costs ~50 µs; at 100,000 runs a view that needs a few fields
of every run would spend seconds there and hold every document in memory. Where a catalog
column provably holds what the documents hold, it is read instead:

- :func:`from_columns`: a projection (``over-time`` and ``best`` ask for a few fields);
- :class:`CsvRows`: ``warehouse query runs --format csv``, the rows as CSV cells in chunks
  of :data:`CHUNK` runs, never a dict per run, so memory stays flat however many runs go out;
- :func:`documents`: ``--format json``, whole documents, parsed a chunk at a time.

"Provably": a text field is a text column, a time a timestamp column (written back as the
records write times, :func:`warehouse.values.iso_utc`), a metric or ``duration_s`` a float
column. The few cells a column cannot tell are read from their run's document: a float
that is a whole number (the document may hold ``3`` or ``3.0``), the shown status of a
``running`` run, and whether a metric no chosen run has a value of is a key of some run's
``metrics`` (the CSV then has its column, empty). Anything else unproven: None, and the
caller reads the documents.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from warehouse.stores.lazy import np, pa
from warehouse.stores.local_docs import indices
from warehouse.values import iso_utc

CHUNK = 8192  # runs per chunk of CSV rows
Texts = Callable[["pa.Table", "np.ndarray"], list[str]]  # RunCatalog.texts

# Run fields a catalog column holds exactly as the run document does (every Run document
# has them, null included), and the column type that proves it; metrics.<split>.<name> are
# finite floats in both (non-finite values are listed in invalid_metrics instead).
RUN_TEXT = frozenset({"run_id", "experiment", "project", "user", "host", "status"})
RUN_TIMES = frozenset({"started_at", "ended_at", "heartbeat_at"})
_FLOATS = frozenset({"duration_s"})


def floats(values: np.ndarray) -> pa.Array:
    """Finite floats as an Arrow float64 array, as :func:`indices`."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    return pa.Array.from_buffers(pa.float64(), len(values), [None, pa.py_buffer(values)])


def from_columns(
    table: pa.Table, rows: np.ndarray, fields: Sequence[str]
) -> list[dict[str, Any]] | None:
    """The projection of ``rows`` read from the catalog's columns, without parsing a run
    document (10k runs: ~20 ms instead of ~450 ms); None when a field needs the documents."""
    picked: list[tuple[list[str], bool, list[Any]]] = []  # (keys, keep nulls, values)
    for field in dict.fromkeys(fields):
        if field not in table.schema.names:
            return None
        typ = table.schema.field(field).type
        column = table.column(field).take(indices(rows))
        if pa.types.is_null(typ) and (field in RUN_TEXT or field in RUN_TIMES):
            picked.append(([field], True, [None] * len(rows)))
        elif field in RUN_TEXT and pa.types.is_string(typ):
            picked.append(([field], True, column.to_pylist()))
        elif field in RUN_TIMES and pa.types.is_timestamp(typ):
            picked.append(
                ([field], True, [None if v is None else iso_utc(v) for v in column.to_pylist()])
            )
        elif field.startswith("metrics.") and field.count(".") == 2 and typ == pa.float64():
            picked.append((field.split("."), False, column.to_pylist()))
        else:
            return None
    docs: list[dict[str, Any]] = [{} for _ in range(len(rows))]
    for keys, keep_nulls, values in picked:
        for doc, value in zip(docs, values, strict=True):
            if value is None and not keep_nulls:
                continue
            node = doc
            for key in keys[:-1]:
                node = node.setdefault(key, {})
            node[keys[-1]] = value
    return docs


class CsvRows:
    """The CSV of ``warehouse query runs``: ``first`` fields, then every metric some chosen
    run has (``metrics.<split>.<name>``, by name, then train/val/test, then the rest),
    ``status`` as shown (``shown_status(document)`` for ``running`` runs).

    :meth:`plan` says whether the columns can give it (else None); :attr:`columns` is the
    header, :meth:`chunks` the rows, as lists of cells the csv module writes as
    :func:`warehouse.output.csv_cell` would."""

    def __init__(
        self,
        table: pa.Table,
        rows: np.ndarray,
        columns: list[str],
        shown_status: Callable[[dict[str, Any]], Any],
        texts: Texts,
    ) -> None:
        self.table, self.rows, self.columns = table, rows, columns
        self._shown_status, self._texts = shown_status, texts
        self.guard: Callable[[str, Iterator[Any]], Iterator[Any]] = lambda _, items: items

    @classmethod
    def plan(
        cls,
        table: pa.Table | None,
        rows: np.ndarray,
        first: Sequence[str],
        shown_status: Callable[[dict[str, Any]], Any],
        texts: Texts,
    ) -> CsvRows | None:
        if table is None or not len(rows):
            return cls(pa.table({}), np.zeros(0, np.int64), list(first), shown_status, texts)
        schema = table.schema
        for name in first:
            if name in schema.names and _kind(name, schema.field(name).type) is None:
                return None
        metrics = [n for n in schema.names if n.startswith("metrics.") and n.count(".") >= 2]
        if any(_kind("metrics.", schema.field(n).type) is None for n in metrics):
            return None
        chosen = indices(rows)
        shown: list[str] = []
        unsure: list[str] = []
        for name in metrics:
            column = table.column(name)
            valid = 0 if pa.types.is_null(column.type) else len(rows) - _nulls(column, chosen)
            (shown if valid else unsure).append(name)
        shown += _keys_of_some_run(table, rows, unsure, texts)
        return cls(table, rows, [*first, *_metric_order(shown)], shown_status, texts)

    def chunks(self) -> Iterator[list[tuple[Any, ...]]]:
        """Lists of up to :data:`CHUNK` rows (store errors as the store raises them)."""
        return self.guard("query runs", self._chunks())

    def _chunks(self) -> Iterator[list[tuple[Any, ...]]]:
        for start in range(0, len(self.rows), CHUNK):
            part = indices(self.rows[start : start + CHUNK])
            docs = _Docs(self.table, self.rows[start : start + CHUNK], self._texts)
            cells = [self._cells(name, part, docs) for name in self.columns]
            yield list(zip(*cells, strict=True))

    def _cells(self, name: str, part: pa.Array, docs: _Docs) -> list[Any]:
        if name not in self.table.schema.names:
            return [None] * len(part)
        column = self.table.column(name).take(part)
        kind = _kind(name, column.type)
        if kind == "null":
            return [None] * len(part)
        if kind == "time":
            return _iso_times(column)
        if kind == "float":
            return _float_cells(name, column, docs)
        cells: list[Any] = column.to_pylist()
        if name == "status":
            for i, value in enumerate(cells):
                if value == "running":
                    cells[i] = self._shown_status(docs.doc(i))
        return cells


class _Docs:
    """The run documents of one chunk's rows, each read and parsed when first asked for."""

    def __init__(self, table: pa.Table, rows: np.ndarray, texts: Texts) -> None:
        self.table, self.rows, self.texts = table, rows, texts
        self._docs: dict[int, dict[str, Any]] = {}

    def doc(self, i: int) -> dict[str, Any]:
        if i not in self._docs:
            self._docs[i] = json.loads(self.texts(self.table, self.rows[i : i + 1])[0])
        return self._docs[i]


def documents(table: pa.Table, rows: np.ndarray, texts: Texts) -> Iterator[dict[str, Any]]:
    """The run documents of ``rows``, in order, parsed a chunk of :data:`CHUNK` at a time."""
    for start in range(0, len(rows), CHUNK):
        for text in texts(table, rows[start : start + CHUNK]):
            yield json.loads(text)


def _kind(name: str, typ: pa.DataType) -> str | None:
    """How a column stands for its field in the CSV (None: it cannot)."""
    if pa.types.is_null(typ):
        return "null"
    if name in RUN_TEXT:
        return "text" if pa.types.is_string(typ) else None
    if name in RUN_TIMES:
        return "time" if pa.types.is_timestamp(typ) else None
    if name in _FLOATS or name.startswith("metrics."):
        return "float" if typ == pa.float64() else None
    return None


def _nulls(column: pa.ChunkedArray, chosen: pa.Array) -> int:
    return int(column.take(chosen).null_count)


def _iso_times(column: pa.ChunkedArray) -> list[Any]:
    """Times as :func:`iso_utc` writes them (``2025-01-06T11:42:00Z``, microseconds only
    when there are any), through numpy's ISO formatting."""
    micros = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).combine_chunks()
    valid = np.asarray(micros.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    values = np.asarray(micros.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    low, high = np.datetime64("1000-01-01", "us"), np.datetime64("9999-12-31T23:59:59", "us")
    moments = values.astype("datetime64[us]")
    if valid.any() and (moments[valid].min() < low or moments[valid].max() > high):
        return [None if v is None else iso_utc(v) for v in column.to_pylist()]
    whole = values % 1_000_000 == 0
    cells = np.empty(len(values), dtype=object)
    cells[whole] = np.datetime_as_string(moments[whole], unit="s")
    cells[~whole] = np.datetime_as_string(moments[~whole], unit="us")
    cells[~valid] = None
    return [None if text is None else text + "Z" for text in cells.tolist()]


def _float_cells(name: str, column: pa.ChunkedArray, docs: _Docs) -> list[Any]:
    """Finite floats as they are (csv writes their repr), others empty; a whole number as
    its document holds it (``3`` or ``3.0``)."""
    values = column.combine_chunks().to_numpy(zero_copy_only=False)  # nulls come as NaN
    finite = np.isfinite(values)
    cells = values.astype(object)
    cells[~finite] = None
    out: list[Any] = cells.tolist()
    with np.errstate(invalid="ignore"):
        whole = np.flatnonzero(finite & (values == np.floor(values)))
    if whole.size:
        from warehouse.filters.docpath import get_path

        for i in whole.tolist():
            value = get_path(docs.doc(i), name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[i] = value
    return out


def _keys_of_some_run(
    table: pa.Table, rows: np.ndarray, names: list[str], texts: Texts
) -> list[str]:
    """Those of ``names`` (metric columns no chosen run has a value of) that are keys of
    some chosen run's ``metrics`` all the same (a non-finite value: an empty cell). Only
    documents holding a name's last part as a JSON string are parsed, a chunk at a time."""
    left = dict.fromkeys(names)
    for start in range(0, len(rows), CHUNK):
        if not left:
            break
        chunk = texts(table, rows[start : start + CHUNK])
        leaves = {json.dumps(n.rsplit(".", 1)[-1], ensure_ascii=False) for n in left}
        for text in chunk:
            if not any(leaf in text for leaf in leaves):
                continue
            metrics = json.loads(text).get("metrics")
            if isinstance(metrics, dict):
                for split, values in metrics.items():
                    for key in values if isinstance(values, dict) else ():
                        left.pop(f"metrics.{split}.{key}", "")
            if not left:
                break
    return [n for n in names if n not in left]


def _metric_order(names: list[str]) -> list[str]:
    """As ``warehouse query runs`` orders metric columns: by name, then split."""
    rank = {"train": 0, "val": 1, "test": 2}
    return sorted(names, key=lambda n: (n.split(".")[2], rank.get(n.split(".")[1], 3), n))


__all__ = [
    "CHUNK",
    "RUN_TEXT",
    "RUN_TIMES",
    "CsvRows",
    "documents",
    "floats",
    "from_columns",
    "indices",
]
