"""Sample files of the local store: streaming Parquet writes, a read cache, fast top-k sorts.

One file per run and split, ``samples/<run_id>/<split>.parquet``. Writes stream record
batches into a tmp file that replaces the old one, so a reader never sees half a split and 1M
rows never exist as Python objects. ``run_id``/``experiment``/``split``/``recorded_at`` are
stored dictionary-encoded (one value per file). Reads keep recently used files in memory as
Arrow tables (keyed by their stat) with per-column float sort keys, so "the 100 worst samples"
of a 100k-row file is a numpy partition plus a sort of the few rows that can make the top.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from warehouse.errors import InvalidRecord, QuerySyntaxError, StoreUnavailable
from warehouse.files import install
from warehouse.filters import lucene
from warehouse.stores.base import SampleQuery
from warehouse.stores.lazy import np, pa, pc, pq
from warehouse.stores.local_query import arrow_kinds
from warehouse.stores.row_digest import FOOTER_KEY, RowDigest

log = logging.getLogger(__name__)

CHUNK = 4096  # rows turned into dicts at a time while streaming
WRITE_OPTIONS: dict[str, Any] = {"compression": "snappy", "write_page_checksum": True}
"""How the local store writes Parquet: every page carries a CRC-32 checked on read."""


def open_parquet(path: Path) -> pq.ParquetFile:
    """A Parquet file of the store, opened so that each page's checksum is verified as it is
    read, and whose footer's two schemas (Parquet's and the Arrow schema stored beside it)
    agree: a flipped byte raises :func:`damaged` naming the file instead of reading garbage."""
    try:
        source = pq.ParquetFile(path, page_checksum_verification=True)
        _check_schemas(source)
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise damaged(path, exc) from exc
    return source


def read_parquet(path: Path, columns: list[str] | None = None) -> pa.Table:
    """The whole file (or ``columns``) read through :func:`open_parquet`."""
    source = open_parquet(path)
    try:
        table = source.read(columns=columns)
        table.validate(full=True)  # e.g. a dictionary index a flipped page header let through
    except Exception as exc:
        raise damaged(path, exc) from exc
    if table.num_rows != source.metadata.num_rows:
        raise damaged(path, ValueError(f"{table.num_rows} rows read of {source.metadata.num_rows}"))
    return table


def iter_parquet(
    path: Path,
    batch_size: int,
    columns: list[str] | None = None,
    source: pq.ParquetFile | None = None,
) -> Iterator[pa.RecordBatch]:
    """The file's batches through :func:`open_parquet` (or ``source``, the file it opened);
    damage found mid-way raises too."""
    source = source if source is not None else open_parquet(path)
    batches = source.iter_batches(batch_size=batch_size, columns=columns)
    rows = 0
    while True:
        try:
            batch = next(batches)
            batch.validate(full=True)
        except StopIteration:
            break
        except Exception as exc:
            raise damaged(path, exc) from exc
        rows += batch.num_rows
        yield batch
    if rows != source.metadata.num_rows:
        raise damaged(path, ValueError(f"{rows} rows read of {source.metadata.num_rows}"))


def check_present(run_file: Path, folder: Path, split: str | None) -> None:
    """Raise when a split the run document counts rows of (``split``, or any) has no file in
    ``folder``: a deleted samples file is an error naming it, never an empty answer."""
    import json

    try:
        counts = json.loads(run_file.read_bytes()).get("sample_counts") or {}
    except (OSError, ValueError, AttributeError):
        return  # no readable run document: nothing says what should be there
    for name, rows in sorted(counts.items()):
        path = folder / f"{name}.parquet"
        if (split is None or name == split) and isinstance(rows, int) and not path.is_file():
            raise StoreUnavailable(
                f"local store: the samples file {path} is missing, though run {folder.name} "
                f"says it has {rows:,} {name} rows; run 'warehouse sync --verify' to take "
                "Elasticsearch's copy back (when there is one), or log the split again",
                path=str(path),
            )


def split_digests(
    path: Path, shared: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None
) -> tuple[str | None, RowDigest, RowDigest]:
    """The rows' digest recorded in the file's footer when it was written (None: a file
    written without one), the digest of the rows it holds now, and that of the rows as
    ``shared`` rewrites them (its links as pushed), all in one read that checks every
    page's CRC (damage raises :func:`damaged`)."""
    source = open_parquet(path)
    footer = (source.metadata.metadata or {}).get(FOOTER_KEY)
    plain, as_shared = RowDigest(), RowDigest()
    for batch in iter_parquet(path, 65_536, None, source):
        plain.add(batch)
        as_shared.add(batch if shared is None else shared(batch))
    return (footer.decode() if footer else None), plain, as_shared


def damaged(path: Path, exc: BaseException) -> StoreUnavailable:
    """The error for a file whose bytes are not what was written."""
    if isinstance(exc, OSError) and exc.errno is not None:  # EIO, EACCES ...: not the bytes
        return StoreUnavailable(
            f"local store: cannot read {path}: {exc.strerror or exc}", path=str(path)
        )
    return StoreUnavailable(
        f"local store: {path} is damaged ({type(exc).__name__}: {exc}); nothing is answered "
        "from it. Record that split again (log_samples), or restore the file from a backup",
        path=str(path),
    )


def _check_schemas(source: pq.ParquetFile) -> None:
    """The footer has no checksum: its counts and its two schemas must agree instead."""
    import base64

    footer = source.metadata
    groups = [footer.row_group(i) for i in range(footer.num_row_groups)]
    if footer.num_rows != sum(g.num_rows for g in groups):
        raise ValueError("the row count disagrees with its row groups': its footer was changed")
    flat = [
        i for i in range(footer.num_columns) if footer.schema.column(i).max_repetition_level == 0
    ]
    for group in groups:
        if any(group.column(i).num_values != group.num_rows for i in flat):
            raise ValueError("a column's value count disagrees with its row group's row count")
    meta = footer.metadata or {}
    stored = meta.get(b"ARROW:schema")
    if stored is None:
        return  # written by another tool: only the page checksums protect it
    arrow = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(stored)))
    if not arrow.remove_metadata().equals(source.schema_arrow.remove_metadata()):
        raise ValueError(
            "the file's Parquet schema and its Arrow schema disagree: its footer was changed"
        )


class SampleFile:
    """A sample file in memory, with sort keys computed once per column and order."""

    def __init__(self, key: tuple[int, int, int], table: pa.Table) -> None:
        self.key, self.table = key, table
        self._sort_keys: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]] = {}

    def sort_key(self, column: str, desc: bool) -> tuple[np.ndarray, np.ndarray]:
        """``(key, missing)``: ascending float keys (missing = +inf) and the missing mask."""
        cached = self._sort_keys.get((column, desc))
        if cached is None:
            cached = self._sort_keys[(column, desc)] = sort_key(self.table, column, desc)
        return cached


def sort_key(table: pa.Table, column: str, desc: bool) -> tuple[np.ndarray, np.ndarray]:
    """Any sortable column as float keys in which ascending order is the wanted order:
    numbers and booleans as themselves, dates as their epoch value, text as its rank."""
    n = table.num_rows
    if column not in table.schema.names:
        return np.full(n, np.inf), np.ones(n, dtype=bool)
    col = table.column(column).combine_chunks()
    typ = col.type
    if pa.types.is_floating(typ) or pa.types.is_integer(typ) or pa.types.is_boolean(typ):
        values = col.cast(pa.float64()).to_numpy(zero_copy_only=False)
    elif pa.types.is_timestamp(typ) or pa.types.is_date(typ) or pa.types.is_duration(typ):
        values = col.cast(pa.int64()).cast(pa.float64()).to_numpy(zero_copy_only=False)
    elif pa.types.is_list(typ) or pa.types.is_struct(typ) or pa.types.is_map(typ):
        raise QuerySyntaxError(f"cannot sort samples by {column}: it holds {typ} values")
    else:  # text: rank of each distinct value
        encoded = col if pa.types.is_dictionary(typ) else col.dictionary_encode()
        ranks = np.empty(len(encoded.dictionary), dtype=np.float64)
        ranks[pc.sort_indices(encoded.dictionary).to_numpy()] = np.arange(len(ranks))
        codes = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
        values = ranks[codes] if len(ranks) else np.zeros(n)
        values[encoded.is_null().to_numpy(zero_copy_only=False)] = np.nan
    missing = np.isnan(values)
    key = -values if desc else values.copy()
    key[missing] = np.inf
    return key, missing


class SampleCache:
    """Recently read sample files, least recently used dropped past ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._files: OrderedDict[Path, SampleFile] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, path: Path) -> SampleFile | None:
        st = os.stat(path)
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            cached = self._files.get(path)
            if cached is not None and cached.key == key:
                self._files.move_to_end(path)
                return cached
        table = read_parquet(path).combine_chunks()
        entry = SampleFile(key, table)
        with self._lock:
            self._files[path] = entry
            while sum(f.table.nbytes for f in self._files.values()) > self.max_bytes:
                self._files.popitem(last=False)
        return entry

    def clear(self) -> None:
        with self._lock:
            self._files.clear()


def order_samples(
    files: list[SampleFile],
    table: pa.Table,
    rows: np.ndarray | None,
    query: SampleQuery,
    limit: int | None,
) -> np.ndarray:
    """Row numbers of ``table`` (``rows`` of it, None = all) in sort order, missing last,
    ties by sample_id then split; only the rows that can reach the top are fully sorted."""
    column = query.sort
    assert column is not None
    kinds = arrow_kinds(table.schema)
    if column not in kinds:
        raise lucene.unknown_field(column, kinds, "sample column")
    desc = query.order == "desc"
    if len(files) == 1:
        key, missing = files[0].sort_key(column, desc)
    else:
        key, missing = sort_key(table, column, desc)
    if rows is not None:
        key, missing = key[rows], missing[rows]
    end = None if limit is None else query.offset + limit
    if end is not None and end < len(key):
        kth = np.partition(key, end - 1)[end - 1]
        pick = np.flatnonzero(key <= kth)
    else:
        pick = np.arange(len(key))
    at = pick if rows is None else rows[pick]
    sub = pa.table(
        {
            "m": missing[pick],
            "v": np.where(missing[pick], 0.0, key[pick]),
            "sample_id": table.column("sample_id").take(at),
            "split": _decoded(table.column("split").take(at)),
        }
    )
    spec = [(name, "ascending", "at_end") for name in ("m", "v", "sample_id", "split")]
    ordered: np.ndarray = at[pc.sort_indices(sub, spec).to_numpy()][query.offset : end]
    return ordered


def stream_rows(paths: list[Path], offset: int, limit: int | None) -> Iterator[dict[str, Any]]:
    """Rows of the files in stored order, batch by batch (never all in Python at once)."""
    skip, left = offset, limit
    for path in paths:
        for batch in iter_parquet(path, CHUNK):
            if left == 0:
                return
            if skip >= batch.num_rows:
                skip -= batch.num_rows
                continue
            batch = batch.slice(skip, left)
            skip = 0
            if left is not None:
                left -= batch.num_rows
            yield from rows_of(batch)


def emit_rows(table: pa.Table, rows: np.ndarray) -> Iterator[dict[str, Any]]:
    for start in range(0, len(rows), CHUNK):
        yield from rows_of(table.take(rows[start : start + CHUNK]))


def rows_of(data: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    """Rows as dicts, column by column (several times faster than ``to_pylist`` on
    dictionary-encoded columns, which hold the same value in every row here)."""
    columns: list[list[Any]] = []
    for column in data.columns:
        if pa.types.is_dictionary(column.type):
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
            values = column.dictionary.to_pylist()
            if len(values) == 1 and column.null_count == 0:
                columns.append(values * len(column))
                continue
            column = column.dictionary_decode()
        columns.append(column.to_pylist())
    names = data.schema.names
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


class SampleWriter:
    """Streams batches into a tmp Parquet file; a batch with new columns or wider types
    rewrites what was written so far under the widened schema (rare, still streaming)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.tmp: Path | None = None
        self.writer: pq.ParquetWriter | None = None
        self.schema: pa.Schema | None = None
        self.rows = 0
        self.digest = RowDigest()  # the rows' content, recorded in the footer

    def write(self, batch: pa.RecordBatch) -> None:
        if self.writer is None or self.schema is None:
            self._open(batch.schema)
        elif batch.schema != self.schema:
            try:
                batch = _conform(batch, self.schema)
            except (pa.ArrowException, KeyError):
                self._widen(batch.schema)
                batch = _conform(batch, self.schema)
        assert self.writer is not None
        self.writer.write_batch(batch)
        self.digest.add(batch)
        self.rows += batch.num_rows

    def finish(self, target: Path) -> int:
        """Close the file, record the rows' digest in its footer, put it in place durably."""
        assert self.writer is not None
        assert self.tmp is not None
        self.writer.add_key_value_metadata({FOOTER_KEY: self.digest.hexdigest().encode()})
        self.writer.close()
        self.writer = None
        install(self.tmp, target)
        self.tmp = None
        return self.rows

    def discard(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)
            self.tmp = None

    def _open(self, schema: pa.Schema) -> None:
        self.tmp = self.folder / f".{uuid.uuid4().hex}.parquet.tmp"
        self.writer = pq.ParquetWriter(self.tmp, schema, **WRITE_OPTIONS)
        self.schema = schema

    def _widen(self, other: pa.Schema) -> None:
        assert self.schema is not None
        assert self.writer is not None
        assert self.tmp is not None
        try:
            schema = pa.unify_schemas([self.schema, other], promote_options="permissive")
        except pa.ArrowException:
            known = {f.name: f for f in self.schema}
            for f in other:
                if f.name not in known or known[f.name].type != f.type:
                    known[f.name] = pa.field(f.name, pa.string() if f.name in known else f.type)
            schema = pa.schema(list(known.values()))
        old = self.tmp
        self.writer.close()
        self._open(schema)
        assert self.writer is not None
        self.digest = RowDigest()
        for batch in iter_parquet(old, 65_536):
            conformed = _conform(batch, schema)
            self.writer.write_batch(conformed)
            self.digest.add(conformed)
        old.unlink()


def prepare_batch(
    batch: pa.RecordBatch, consts: dict[str, str], recorded_at: str, split: str
) -> pa.RecordBatch:
    """The stored form: run_id/experiment/split (dictionary-encoded) first, sample_id as text,
    output_uri and recorded_at always present."""
    names = batch.schema.names
    if "sample_id" not in names:
        raise InvalidRecord(
            f"samples of split {split!r} have no 'sample_id' column (columns: "
            f"{', '.join(names)}); add one that identifies each sample"
        )
    n = batch.num_rows
    cols: dict[str, pa.Array] = {k: _constant(v, n) for k, v in consts.items()}
    cols["sample_id"] = batch.column("sample_id").cast(pa.string())
    for name in names:
        if name not in cols:
            cols[name] = batch.column(name)
    cols.setdefault("output_uri", pa.nulls(n, pa.string()))
    cols.setdefault("recorded_at", _constant(recorded_at, n))
    return pa.RecordBatch.from_pydict(cols)


def _conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    extra = set(batch.schema.names) - set(schema.names)
    if extra:
        raise KeyError(f"new columns {sorted(extra)}")
    n = batch.num_rows
    arrays = [
        batch.column(f.name).cast(f.type) if f.name in batch.schema.names else pa.nulls(n, f.type)
        for f in schema
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _constant(value: str, n: int) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value]))


def _decoded(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column
