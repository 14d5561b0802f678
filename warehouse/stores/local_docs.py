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


def indices(rows: np.ndarray) -> pa.Array:
    """Row numbers as an Arrow int64 array, zero-copy (``pa.array`` of a numpy array would
    make pyarrow import pandas to check whether it is a pandas object)."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(rows), [None, pa.py_buffer(rows)])


def texts(column: pa.ChunkedArray, rows: np.ndarray, mapped: MappedFile | None) -> list[str]:
    """The strings of ``column`` at ``rows``: those in ``mapped`` read with ``os.pread``,
    the others (runs journaled since the compaction, in memory) taken as usual."""
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
            found = chunk.take(indices(local)).to_pylist()
        else:
            offsets = np.frombuffer(buffers[1], dtype=np.int32)  # a view: only these pages
            begin, end = offsets[local + chunk.offset], offsets[local + chunk.offset + 1]
            where = buffers[2].address - mapped.start
            found = [
                os.pread(mapped.fd, int(e - b), where + int(b)).decode("utf-8")
                for b, e in zip(begin.tolist(), end.tolist(), strict=True)
            ]
        for i, text in zip(at.tolist(), found, strict=True):
            out[i] = text
    return out


__all__ = ["MappedFile", "indices", "texts"]
