"""The mapped run catalog (``catalog/runs.arrow``) and its documents read without mapping them.

The catalog's Arrow IPC file is memory-mapped: a column is paged in when a view touches it,
never before. Run documents (``_doc``) are read differently. A view needs a few of them
(a leaderboard's winners, 20 runs of a listing), scattered over a column of 150 MB at 100k
runs; touching them through the mapping maps in the pages around each one, and a kernel
that caches the file in large folios maps up to 2 MiB per document into the process (its
RSS counts them). So :func:`texts` reads each wanted document with ``os.pread`` at its
offset in the file (the column's offsets say where), which copies just its bytes.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import weakref
from pathlib import Path

from warehouse.errors import StoreUnavailable
from warehouse.stores.lazy import np, pa


class MappedFile:
    """A file mapped read-only as one Arrow buffer, and a descriptor to read it by ranges."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY)
        weakref.finalize(self, os.close, self.fd)
        region = mmap.mmap(self.fd, 0, access=mmap.ACCESS_READ)
        if hasattr(mmap, "MADV_NOHUGEPAGE"):  # pages, not 2 MiB at a time
            with contextlib.suppress(OSError):
                region.madvise(mmap.MADV_NOHUGEPAGE)
        self.buffer = pa.py_buffer(region)
        self.start = self.buffer.address
        self.end = self.start + self.buffer.size

    def holds(self, buffer: pa.Buffer | None) -> bool:
        return buffer is not None and self.start <= buffer.address < self.end


def offsets_owned(table: pa.Table) -> pa.Table:
    """``table`` read from a mapped ``runs.arrow``, with the buffers that say *where* values
    lie (offsets of text, binary and list values, dictionary indices) copied into this
    process's memory once the file's CRC-32 was checked; the values stay mapped, read only
    where a view touches them (issue 16). A mapping shows the file as it is now: damaged in
    place under a long-lived reader (bit rot beneath an open ``warehouse ui``, with the same
    inode, size and mtime), a bad offset made that reader read past its buffers and crash,
    while a bad value is only a bad value (and a ``_doc`` text is checked against its own
    CRC-32 when read). The copies are a few bytes per row and column."""
    columns = [
        pa.chunked_array([_offsets_owned(chunk) for chunk in column.chunks], column.type)
        for column in table.columns
    ]
    return pa.Table.from_arrays(columns, schema=table.schema)


def _offsets_owned(array: pa.Array) -> pa.Array:
    kind = array.type
    if array.offset:  # not how IPC reads a file; copied whole rather than reasoned about
        return array.copy_to(pa.default_cpu_memory_manager())
    if pa.types.is_dictionary(kind):
        return pa.DictionaryArray.from_arrays(
            array.indices.copy_to(pa.default_cpu_memory_manager()),
            _offsets_owned(array.dictionary),
        )
    if (
        pa.types.is_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_large_binary(kind)
    ):
        validity, offsets, data = array.buffers()
        return pa.Array.from_buffers(
            kind, len(array), [validity, _copied(offsets), data], array.null_count
        )
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        validity, offsets = array.buffers()[:2]
        values = _offsets_owned(array.values)
        return pa.Array.from_buffers(
            kind, len(array), [validity, _copied(offsets)], array.null_count, children=[values]
        )
    if pa.types.is_fixed_size_list(kind):
        values = _offsets_owned(array.values)
        return pa.Array.from_buffers(
            kind, len(array), [array.buffers()[0]], array.null_count, children=[values]
        )
    if pa.types.is_struct(kind):
        children = [_offsets_owned(array.field(i)) for i in range(kind.num_fields)]
        return pa.Array.from_buffers(
            kind, len(array), [array.buffers()[0]], array.null_count, children=children
        )
    if pa.types.is_nested(kind) or pa.types.is_union(kind):  # unions, views: not ours
        return array.copy_to(pa.default_cpu_memory_manager())
    return array  # fixed-width values and bits: a flipped one is a wrong value, not a crash


def _copied(buffer: pa.Buffer | None) -> pa.Buffer | None:
    return None if buffer is None else pa.py_buffer(buffer.to_pybytes())


def damaged(path: Path, reason: str) -> StoreUnavailable:
    """The error (or warning) for a catalog file whose bytes are not what was written."""
    return StoreUnavailable(
        f"local store: the run catalog file {path} is damaged ({reason}); queries answer from "
        f"the run files meanwhile (slower). Run 'warehouse compact --rebuild' to rebuild it",
        path=str(path),
    )


def _from_run_file(table: pa.Table, row: int, path: Path, runs: Path) -> str:
    """The document of ``row`` read from its run file, its copy in ``path`` being damaged."""
    import logging

    run_id = table.column("run_id")[row].as_py()
    problem = damaged(path, f"the document of run {run_id} is not the one written")
    try:
        text = (runs / f"{run_id}.json").read_text("utf-8")
    except (OSError, UnicodeDecodeError, TypeError):
        raise problem from None
    logging.getLogger(__name__).warning("%s; read %s instead", problem, runs / f"{run_id}.json")
    return text


def indices(rows: np.ndarray) -> pa.Array:
    """Row numbers as an Arrow int64 array, zero-copy (``pa.array`` of a numpy array would
    make pyarrow import pandas to check whether it is a pandas object)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(rows), [None, pa.py_buffer(rows)])


def texts(
    table: pa.Table, rows: np.ndarray, mapped: MappedFile | None, path: Path, runs: Path
) -> list[str]:
    """The ``_doc`` texts of ``table`` at ``rows``: those in ``mapped`` (the file ``path``)
    read with ``os.pread`` and checked against their CRC-32 (``_doc_crc``), the others (runs
    journaled since the compaction, in memory) taken as usual. A text whose bytes are not
    the ones written is read from its run file in ``runs`` instead, with a warning naming
    the damaged file and the remedy (an error when the run file cannot be read either)."""
    from zlib import crc32

    from warehouse.stores.local_table import DOC, DOC_CRC, doc_crc

    column = table.column(DOC)
    crcs = table.column(DOC_CRC) if DOC_CRC in table.schema.names else None
    rows = np.asarray(rows, dtype=np.int64)
    out: list[str] = [""] * len(rows)
    bounds = np.cumsum([0, *(len(c) for c in column.chunks)])
    which = np.searchsorted(bounds, rows, side="right") - 1
    for k in np.unique(which).tolist():
        at = np.flatnonzero(which == k)
        chunk = column.chunk(k)
        local = rows[at] - bounds[k]
        buffers = chunk.buffers()
        if (
            mapped is None
            or not pa.types.is_string(chunk.type)
            or chunk.null_count
            or not mapped.holds(buffers[2])
        ):
            # in memory (journaled runs, or the Parquet copy): checked all the same, since a
            # compaction that folded a damaged text into both files keeps its old CRC-32
            found = chunk.take(indices(local)).to_pylist()
            if crcs is not None:
                expected = crcs.take(indices(rows[at])).to_pylist()
                found = [
                    text
                    if crc is None or (text is not None and doc_crc(text) == crc)
                    else _from_run_file(table, row, path, runs)
                    for text, crc, row in zip(found, expected, rows[at].tolist(), strict=True)
                ]
        else:
            offsets = np.frombuffer(buffers[1], dtype=np.int32)  # a view: only these pages
            begin, end = offsets[local + chunk.offset], offsets[local + chunk.offset + 1]
            where = buffers[2].address - mapped.start
            raw = [
                os.pread(mapped.fd, int(e - b), where + int(b))
                for b, e in zip(begin.tolist(), end.tolist(), strict=True)
            ]
            expected = (
                crcs.take(indices(rows[at])).to_pylist() if crcs is not None else [None] * len(raw)
            )
            found = []
            for data, crc, row in zip(raw, expected, rows[at].tolist(), strict=True):
                text = None
                if crc is None or crc32(data) == crc:
                    with contextlib.suppress(UnicodeDecodeError):
                        text = data.decode("utf-8")
                found.append(text if text is not None else _from_run_file(table, row, path, runs))
        for i, text in zip(at.tolist(), found, strict=True):
            out[i] = text
    return out


def mismatched(table: pa.Table, chunk_rows: int = 4096) -> list[str]:
    """The run ids whose ``_doc`` text is not the one its ``_doc_crc`` was taken of: what a
    compaction must read again from the run files rather than fold into the next catalog
    (it once carried a text damaged in place into both new files). Texts are taken as bytes,
    a slice at a time (a 100k-run catalog never becomes Python strings at once)."""
    from zlib import crc32

    from warehouse.stores.local_table import DOC, DOC_CRC

    if DOC_CRC not in table.schema.names or not table.num_rows:
        return []
    bad: list[str] = []
    for start in range(0, table.num_rows, chunk_rows):
        part = table.slice(start, chunk_rows)
        docs = part.column(DOC).cast(pa.binary()).to_pylist()
        crcs = part.column(DOC_CRC).to_pylist()
        for i, (data, crc) in enumerate(zip(docs, crcs, strict=True)):
            if crc is not None and (data is None or crc32(data) != crc):
                bad.append(part.column("run_id")[i].as_py())
    return bad


__all__ = ["MappedFile", "damaged", "indices", "mismatched", "offsets_owned", "texts"]
