"""Durable file writes: a file is replaced whole or not at all, and survives a crash once written.

Every place that must never leave half a file behind (run records, outbox entries, the run
catalog) writes through :func:`atomic_write`: a temporary file in the same folder, fsync'd,
renamed over the target, then the folder fsync'd so the rename itself is on disk.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path


def atomic_write(path: Path, data: bytes, *, sync_folder: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically (readers see the old or the new bytes)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    if sync_folder:
        fsync_dir(path.parent)


def fsync_path(path: Path) -> None:
    """Flush a file already written (by another library) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    """Make the entries of ``folder`` (a rename, a new file) durable."""
    with contextlib.suppress(OSError):  # not every filesystem lets a folder be fsync'd
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


__all__ = ["atomic_write", "fsync_dir", "fsync_path", "write_all"]
