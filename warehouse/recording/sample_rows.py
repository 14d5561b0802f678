"""Per-sample results as Arrow record batches: what ``log_samples`` accepts, made uniform.

``log_samples`` takes a pandas DataFrame, a pyarrow Table or RecordBatch, or any iterable of
mappings (a generator of dicts streams: rows are taken :data:`BATCH_ROWS` at a time, so a
million rows never exist as Python objects at once). Every store then receives record batches
with a string ``sample_id`` column and missing values where a number was NaN or infinite (JSON
has no NaN: every store answers the same).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from warehouse.capture.limits import clean_text
from warehouse.errors import InvalidRecord
from warehouse.models import normalise_name

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)
BATCH_ROWS = 65_536


def normalise_sample_column(name: str) -> str:
    """Sample column names follow the metric-name rule (letters, digits, ``_``, ``-``)."""
    return normalise_name(name)


def iter_batches(rows: Any, cleaned: set[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Any supported rows container as a stream of record batches. Text UTF-8 cannot store
    (a lone surrogate character) becomes U+FFFD; the columns where it did go in ``cleaned``."""
    import pyarrow as pa

    if isinstance(rows, pa.RecordBatch):
        yield rows
        return
    if isinstance(rows, pa.Table):
        yield from rows.to_batches(max_chunksize=BATCH_ROWS)
        return
    if type(rows).__module__.startswith("pandas") and hasattr(rows, "to_dict"):
        try:
            table = pa.Table.from_pandas(rows, preserve_index=False)
        except UnicodeEncodeError:
            rows = rows.apply(lambda column: column.map(_clean_value))
            table = pa.Table.from_pandas(rows, preserve_index=False)
            _note(cleaned, [str(c) for c in rows.columns if rows[c].dtype == object])
        yield from table.to_batches(max_chunksize=BATCH_ROWS)
        return
    if isinstance(rows, Mapping | str | bytes):
        raise InvalidRecord(
            "log_samples takes rows (a DataFrame, an Arrow table or an iterable of mappings), "
            f"not a {type(rows).__name__}"
        )
    source = iter(rows)
    while chunk := list(itertools.islice(source, BATCH_ROWS)):
        if not all(type(row) is dict for row in chunk):  # the ABC check only when needed
            for row in chunk:
                if not isinstance(row, Mapping):
                    raise InvalidRecord(f"a sample row must be a mapping, not {type(row).__name__}")
        yield batch_from_rows(chunk, cleaned)


def batch_from_rows(
    rows: list[Mapping[str, Any]], cleaned: set[str] | None = None
) -> pa.RecordBatch:
    """Rows as one batch with every column any row has (first-seen order); a row without a
    column gets a null there. (Arrow's ``from_pylist`` takes the first row's keys only, and
    silently dropped a column the first row lacked.)

    The common case, every row with the same keys, skips collecting the keys of every
    row (one key-set comparison per row instead)."""
    import pyarrow as pa

    keys = rows[0].keys() if rows else None
    if keys is not None and all(row.keys() == keys for row in rows):
        data = {name: [row[name] for row in rows] for name in keys}
    else:
        names = list(dict.fromkeys(key for row in rows for key in row))
        data = {name: [row.get(name) for row in rows] for name in names}
    try:
        try:
            return pa.RecordBatch.from_pydict(data)
        except UnicodeEncodeError:  # a lone surrogate: never a reason to fail the run
            bad = [n for n, v in data.items() if any(map(_unstorable, v))]
            for name in bad:
                data[name] = [_clean_value(v) for v in data[name]]
            _note(cleaned, bad)
            return pa.RecordBatch.from_pydict(data)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InvalidRecord(f"sample rows have inconsistent column types: {exc}") from None


def _unstorable(value: Any) -> bool:
    return isinstance(value, str) and clean_text(value) != value


def _clean_value(value: Any) -> Any:
    return clean_text(value) if isinstance(value, str) else value


def _note(cleaned: set[str] | None, columns: list[str]) -> None:
    log.warning(
        "sample values of column(s) %s held characters UTF-8 cannot store; they are recorded "
        "with U+FFFD instead",
        ", ".join(columns),
    )
    if cleaned is not None:
        cleaned.update(columns)


def nan_to_null(batch: pa.RecordBatch) -> pa.RecordBatch:
    """NaN/±inf sample values become missing, so every store answers the same (JSON has no NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = list(batch.columns)
    changed = False
    for i, column in enumerate(columns):
        if pa.types.is_floating(column.type) and column.null_count < len(column):
            bad = pc.invert(pc.is_finite(column))
            if pc.any(bad).as_py():
                columns[i] = pc.if_else(bad, pa.scalar(None, column.type), column)
                changed = True
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema) if changed else batch


def with_output_uris(batch: pa.RecordBatch, outputs: Mapping[str, str]) -> pa.RecordBatch:
    import pyarrow as pa

    ids = batch.column("sample_id").to_pylist()
    names = batch.schema.names
    existing = (
        batch.column("output_uri").to_pylist() if "output_uri" in names else [None] * len(ids)
    )
    uris = pa.array(
        [outputs.get(sid, old) for sid, old in zip(ids, existing, strict=True)], type=pa.string()
    )
    if "output_uri" in names:
        return batch.set_column(names.index("output_uri"), "output_uri", uris)
    return batch.append_column("output_uri", uris)


__all__ = [
    "BATCH_ROWS",
    "batch_from_rows",
    "iter_batches",
    "nan_to_null",
    "normalise_sample_column",
    "with_output_uris",
]
