"""Durable file writes: a file is replaced whole or not at all, and survives a crash once written.

Every place that must never leave half a file behind (run records, outbox entries, sample
files, the run catalog, objects) writes through this module, and nothing else calls
``os.fsync`` or renames a temporary file into place:

- :func:`atomic_write`: bytes in memory replace a file;
- :func:`replacing`: a block writes a temporary file (streaming, or through another library),
  which then replaces the target: fsync'd, renamed, the folder fsync'd;
- :func:`append`: bytes added at the end of a file under its lock (optionally fsync'd).

A temporary file is named ``.<name>.<pid>.<random>.tmp`` beside its target (same file system,
so the rename is atomic), and is removed when the block fails.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from collections.abc import Iterator
from pathlib import Path


def temporary(path: Path) -> Path:
    """A fresh temporary name beside ``path``."""
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


@contextlib.contextmanager
def replacing(path: Path, *, sync_folder: bool = True) -> Iterator[Path]:
    """A temporary path the block writes whole; then it replaces ``path`` durably.

    On an exception in the block (or in the fsync / rename) the temporary file goes and
    ``path`` is left as it was."""
    tmp = temporary(path)
    try:
        yield tmp
        install(tmp, path, sync_folder=sync_folder)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def install(tmp: Path, path: Path, *, sync_folder: bool = True) -> None:
    """Flush ``tmp`` (already written) to disk and rename it over ``path``."""
    fsync_path(tmp)
    os.replace(tmp, path)
    if sync_folder:
        fsync_dir(path.parent)


def atomic_write(path: Path, data: bytes, *, sync_folder: bool = False) -> None:
    """Replace ``path`` with ``data`` atomically (readers see the old or the new bytes)."""
    with replacing(path, sync_folder=sync_folder) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            write_all(fd, data)
        finally:
            os.close(fd)


def append(path: Path, data: bytes, *, sync: bool) -> None:
    """Add ``data`` at the end of ``path`` (created if missing) in one write under the file's
    exclusive lock, so lines of concurrent writers never interleave; ``sync``: fsync'd."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        write_all(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock


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


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


__all__ = [
    "append",
    "atomic_write",
    "fsync_dir",
    "fsync_path",
    "install",
    "replacing",
    "temporary",
    "write_all",
]
