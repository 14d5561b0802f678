"""Rows out in Arrow record batches: CSV, JSON lines and Parquet without a Python list of rows.

Every writer here takes an iterable of :class:`pyarrow.RecordBatch` (or, for Parquet, of row
dicts in chunks) and holds one batch at a time, so memory stays flat however many rows go out.

- :func:`write_csv_batches` writes what :func:`warehouse.output.write_csv` writes for the same
  rows, byte for byte (same header, same cells: ``true``/``false``, empty for missing and
  non-finite numbers, ``repr`` of floats, ISO 8601 times, JSON for nested values), but column
  by column: pyarrow.compute builds each column's cells as text
  (:mod:`warehouse.history.csv_columns`) and joins them into the batch's lines in one string.
- :func:`write_jsonl_batches` writes one JSON object per row, as ``warehouse export`` does.
- :class:`ParquetRows` writes row dicts (nested fields as dotted columns) to Parquet a chunk at
  a time, with one schema for the file (columns and types unified over the chunks).

pyarrow is imported inside the functions (``warehouse --help`` never loads it).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    import pyarrow as pa

CHUNK_ROWS = 10_000


# --- CSV ---------------------------------------------------------------------------------------
def write_csv_batches(
    batches: Iterable[pa.RecordBatch],
    out: TextIO,
    *,
    columns: Sequence[str] | None = None,
    empty_header: Sequence[str] | None = None,
    constants: Mapping[str, Any] | None = None,
) -> int:
    """Header + one line per row of ``batches``, a batch at a time; the rows written.

    ``columns``: these, in this order (missing ones are empty); else the first batch's.
    ``constants``: columns whose value is the same on every row (a run id, a split), given
    once rather than stored in every batch. Without rows and columns, ``empty_header`` (if
    given) is the header: as :func:`warehouse.output.write_csv`."""
    from warehouse.output import csv_cell

    writer = csv.writer(out, lineterminator="\n")
    fixed = {k: csv_cell(v) for k, v in (constants or {}).items()}
    names: list[str] | None = list(columns) if columns is not None else None
    if names is not None:
        writer.writerow(names)
    count = 0
    for batch in batches:
        if names is None:
            names = [*batch.schema.names, *(k for k in fixed if k not in batch.schema.names)]
            writer.writerow(names)
        rows = batch.num_rows
        if not rows:
            continue
        out.write(_batch_text(batch, names, fixed))
        count += rows
    if names is None and empty_header:
        writer.writerow(empty_header)
    out.flush()
    return count


def _batch_text(batch: pa.RecordBatch, names: Sequence[str], fixed: Mapping[str, str]) -> str:
    """The batch's CSV lines as one string: each column's cells as text (built by pyarrow:
    :mod:`warehouse.history.csv_columns`), joined by ``,``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from warehouse.history.csv_columns import csv_text, quote_one

    present = set(batch.schema.names)
    parts: list[Any] = []
    for name in names:
        if name in present:
            parts.append(csv_text(batch.column(name)))
        else:
            parts.append(pa.scalar(quote_one(fixed.get(name, "")), pa.string()))
    if len(parts) == 1:  # a lone empty field is written '""' by csv.writer (a blank line else)
        lone = parts[0]
        parts = [
            pc.if_else(pc.equal(lone, ""), '""', lone)
            if isinstance(lone, pa.Array)
            else pa.scalar(lone.as_py() or '""', pa.string())
        ]
    if not any(isinstance(part, pa.Array) for part in parts):
        line: str = ",".join(str(part.as_py()) for part in parts)
        return (line + "\n") * int(batch.num_rows)
    lines = pc.binary_join_element_wise(*parts, ",")
    lines = pc.binary_join_element_wise(lines, pa.scalar("", pa.string()), "\n")

    _, offset_buffer, data = lines.buffers()
    offsets = np.frombuffer(offset_buffer, np.int32, len(lines) + 1, lines.offset * 4)
    start, end = int(offsets[0]), int(offsets[-1])
    text: str = memoryview(data)[start:end].tobytes().decode("utf-8")
    return text


# --- JSON lines --------------------------------------------------------------------------------
def jsonl_line(row: Mapping[str, Any]) -> str:
    """One row as a JSON line (non-finite → null, datetimes → ISO 8601), as ``export`` writes."""
    from warehouse.values import json_safe

    return json.dumps(json_safe(row), ensure_ascii=False, separators=(",", ":")) + "\n"


def write_jsonl_batches(batches: Iterable[pa.RecordBatch], out: TextIO) -> int:
    """One JSON object per row of ``batches``, a batch at a time; the rows written."""
    count = 0
    for batch in batches:
        out.writelines(map(jsonl_line, batch.to_pylist()))
        count += batch.num_rows
    return count


def write_jsonl_rows(rows: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    """One JSON object per row dict, as they come; the rows written."""
    count = 0
    for row in rows:
        out.write(jsonl_line(row))
        count += 1
    return count


# --- Parquet from row dicts --------------------------------------------------------------------
def chunks(rows: Iterable[Any], size: int = CHUNK_ROWS) -> Iterator[list[Any]]:
    """``rows`` in lists of at most ``size``."""
    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _flat_columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    from warehouse.filters.docpath import flatten

    flat = [flatten(row) for row in rows]
    names = dict.fromkeys(k for row in flat for k in row)
    return {name: [None if (v := row.get(name)) == {} else v for row in flat] for name in names}


def _array(values: list[Any], kind: pa.DataType | None = None) -> pa.Array:
    """As :func:`warehouse.query.api._column`: mixed kinds become text (``str`` of each)."""
    import pyarrow as pa

    if kind is not None and pa.types.is_string(kind):
        try:
            array = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            array = None
        if array is None or not (pa.types.is_string(array.type) or pa.types.is_null(array.type)):
            return pa.array([None if v is None else str(v) for v in values], pa.string())
        return array.cast(kind)
    try:
        array = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())
    return array if kind is None or array.type == kind else array.cast(kind)


def _unify(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    import pyarrow as pa

    if a == b or pa.types.is_null(b):
        return a
    if pa.types.is_null(a):
        return b
    try:
        return (
            pa.unify_schemas(
                [pa.schema([("x", a)]), pa.schema([("x", b)])], promote_options="permissive"
            )
            .field("x")
            .type
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return pa.string()


def write_parquet_rows(
    rows: Callable[[], Iterable[Mapping[str, Any]]],
    path: Path,
    *,
    chunk_rows: int = CHUNK_ROWS,
) -> int:
    """Row dicts (nested fields as dotted columns) to one Parquet file, a chunk at a time.

    ``rows`` is called twice (it must give the same rows each time): the first pass learns the
    columns (in order of first appearance) and their types over every chunk, the second writes
    each chunk cast to that one schema. The file reads back equal to
    ``Result(rows).to_arrow()``: a column whose chunks disagree on a kind (a number here, text
    there) is text, ``str`` of each value. Returns the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kinds: dict[str, pa.DataType] = {}
    for chunk in chunks(rows(), chunk_rows):
        for name, values in _flat_columns(chunk).items():
            kind = _array(values).type
            kinds[name] = _unify(kinds[name], kind) if name in kinds else kind
    if not kinds:  # no rows: an empty file with no columns, as pq.write_table would give
        pq.write_table(pa.table({}), path)
        return 0
    schema = pa.schema(list(kinds.items()))
    count = 0
    with pq.ParquetWriter(path, schema, write_page_checksum=True) as writer:
        for chunk in chunks(rows(), chunk_rows):
            columns = _flat_columns(chunk)
            arrays = [
                _array(columns[name], kind) if name in columns else pa.nulls(len(chunk), kind)
                for name, kind in kinds.items()
            ]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
            count += len(chunk)
    return count


__all__ = [
    "CHUNK_ROWS",
    "chunks",
    "jsonl_line",
    "write_csv_batches",
    "write_jsonl_batches",
    "write_jsonl_rows",
    "write_parquet_rows",
]
