"""Compaction of the local run catalog off the writer's path (issue 16).

A writer whose journal line crosses ``compact_after`` no longer compacts inline: it starts
this module as a detached process (:func:`start`) and returns. At most one such compaction
runs at a time: the writer takes ``catalog/compact.lock`` without waiting (taken: one runs
already, nothing to do) and hands the locked descriptor to the child, which holds it until
it exits (a SIGKILL'd child releases it too).

The compaction holds the writers' lock (``catalog/lock``) only twice, briefly:

1. :func:`begin` notes what it folds: the base it starts from (its stat) and the journal's
   inode and the length of its complete lines, and reads those lines.
2. :func:`build` (no lock) reads the journaled runs, checks the catalog against ``runs/``
   and writes the new ``runs.arrow`` and ``runs.parquet`` beside the live ones.
3. :func:`install` (lock) checks that nobody replaced the base or the journal meanwhile
   (else the result is dropped: someone compacted), renames the two files into place and
   drops the folded lines from the journal, keeping every line appended since step 1 (they
   are copied to a new journal file that replaces the old one).

Every state in between is a readable catalog: until the renames readers see the old base
plus the whole journal; after them, the new base plus a journal that still names the folded
runs until it is cut (reading them again is harmless). A crash leaves at most the two
``.compact.tmp`` files, overwritten by the next compaction.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.files import fsync_path, write_all
from warehouse.stores.lazy import pa, pq

if TYPE_CHECKING:
    from warehouse.stores.local_catalog import RunCatalog, _StatKey

log = logging.getLogger(__name__)

LOCK = "compact.lock"


@dataclass
class Fold:
    """What one compaction folds (noted by :func:`begin`)."""

    base_key: _StatKey  # the stat of runs.parquet it starts from
    base: pa.Table | None  # that base, read (None: none or unreadable, so rebuild)
    journal_ino: int | None  # the journal's inode (None: no journal)
    journal_size: int  # bytes of complete lines folded
    run_ids: list[str] = field(default_factory=list)  # the ids those lines name
    tmp_arrow: Path | None = None  # the new files, written by build()
    tmp_parquet: Path | None = None
    generation: bytes | None = None


def start(catalog_dir: Path) -> bool:
    """Start a background compaction of the catalog in ``catalog_dir`` unless one runs.
    Never fails: a failure to start is logged (debug) and the journal stays as it is."""
    try:
        fd = os.open(catalog_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        log.debug("cannot open %s (%s); not compacting", catalog_dir / LOCK, exc)
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a compaction runs already
        home = catalog_dir.parent
        subprocess.Popen(
            [sys.executable, "-m", __name__, str(home), str(fd)],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            pass_fds=(fd,),  # the child holds the lock (the same open file) until it exits
        )
        return True
    except Exception as exc:  # never fail the writer
        log.debug("cannot start a compaction of %s (%s)", catalog_dir, exc)
        return False
    finally:
        os.close(fd)  # the lock stays held while the child keeps its copy open


def wait(catalog_dir: Path) -> None:
    """Return once no background compaction of ``catalog_dir`` runs (tests, benchmarks)."""
    try:
        fd = os.open(catalog_dir / LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)


def compact(catalog: RunCatalog) -> bool:
    """One compaction in three phases (see the module docstring); True when installed."""
    fold = begin(catalog)
    try:
        build(catalog, fold)
        return install(catalog, fold)
    finally:
        discard(fold)


def begin(catalog: RunCatalog) -> Fold:
    """Under the writers' lock: note the base and the journal's complete lines."""
    with catalog._locked():
        base_key = _stat(catalog.path)
        base = catalog._read_catalog() if base_key is not None else None
        try:
            with open(catalog.journal, "rb") as journal:
                ino = os.fstat(journal.fileno()).st_ino
                data = journal.read()
        except FileNotFoundError:
            ino, data = None, b""
    complete = data[: data.rfind(b"\n") + 1]
    ids = list(dict.fromkeys(complete.decode("utf-8", errors="replace").split()))
    return Fold(base_key, base, ino, len(complete), ids)


def build(catalog: RunCatalog, fold: Fold) -> None:
    """Without a lock: the new catalog table, written to ``.compact.tmp`` files."""
    from warehouse.stores import local_catalog as lc

    table: pa.Table | None
    if fold.base is None:
        table = catalog._build_all()  # no readable base: every run file
    else:
        catalog._set_base(fold.base)
        catalog._base_key = fold.base_key
        for run_id in fold.run_ids:
            if lc._RUN_ID.fullmatch(run_id):
                catalog._delta[run_id] = catalog._read_run(run_id)
        catalog._reconcile()  # never compact away a run that is in runs/
        table = lc._merge(catalog._base, catalog._delta)
    fold.tmp_arrow = catalog.dir / ".arrow.compact.tmp"
    fold.tmp_parquet = catalog.dir / ".runs.compact.tmp"
    fold.generation = store_tmp(catalog, table, fold.tmp_arrow, fold.tmp_parquet)


def install(catalog: RunCatalog, fold: Fold) -> bool:
    """Under the writers' lock: put the new files in place and cut the folded lines from
    the journal, unless the base or the journal changed hands since :func:`begin`."""
    assert fold.tmp_arrow is not None
    assert fold.tmp_parquet is not None
    with catalog._locked():
        try:
            st = os.stat(catalog.journal)
            ino, size = st.st_ino, st.st_size
        except FileNotFoundError:
            ino, size = None, 0
        if _stat(catalog.path) != fold.base_key or (
            fold.journal_ino is not None and (ino != fold.journal_ino or size < fold.journal_size)
        ):
            log.info("the run catalog in %s was compacted meanwhile; dropping", catalog.dir)
            return False
        os.replace(fold.tmp_arrow, catalog.arrow_path)
        os.replace(fold.tmp_parquet, catalog.path)
        if fold.journal_size:
            _cut_journal(catalog.journal, fold.journal_size)
    return True


def discard(fold: Fold) -> None:
    for path in (fold.tmp_arrow, fold.tmp_parquet):
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)


def stamped(catalog: RunCatalog, table: pa.Table | None, generation: bytes = b"") -> pa.Table:
    """``table`` (None: no run) in one chunk, with the catalog's schema metadata."""
    from warehouse.stores import local_catalog as lc

    if table is None:
        table = lc.build_table([])
    meta = {b"warehouse_catalog": lc.CATALOG_VERSION, lc.GENERATION: generation}
    if catalog._listed is not None and not catalog._unreadable:
        meta[lc.LISTED] = json.dumps(catalog._listed).encode()
    return table.combine_chunks().replace_schema_metadata(meta)


def store_tmp(catalog: RunCatalog, table: pa.Table | None, tmp_arrow: Path, tmp: Path) -> bytes:
    """``table`` written and synced as the Arrow and Parquet files ``tmp_arrow`` and ``tmp``
    of a new generation (returned); renaming them into place is the caller's."""
    generation = uuid.uuid4().hex.encode()
    table = stamped(catalog, table, generation)
    with pa.OSFile(str(tmp_arrow), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=max(1, table.num_rows))  # mapped: uncompressed
    fsync_path(tmp_arrow)
    pq.write_table(table, tmp, compression="snappy", write_page_checksum=True)
    fsync_path(tmp)
    return generation


def _cut_journal(journal: Path, folded: int) -> None:
    """Replace the journal by its lines after the first ``folded`` bytes (a new file, so a
    crash leaves the old journal whole: its folded lines are read again, harmlessly)."""
    with open(journal, "rb") as old:
        old.seek(folded)
        rest = old.read()
    if not rest:
        os.truncate(journal, 0)
        return
    tmp = journal.with_name(".journal.compact.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, rest)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, journal)
    fsync_path(journal.parent)


def _stat(path: Path) -> Any:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def main(argv: list[str]) -> int:
    """``python -m warehouse.stores.local_compaction HOME [LOCK_FD]``: one compaction."""
    from warehouse.stores.local_catalog import RunCatalog

    catalog = RunCatalog(Path(argv[0]))
    try:
        compact(catalog)
    except Exception:  # the journal still holds the runs; the next crossing tries again
        log.debug("background compaction of %s failed", catalog.dir, exc_info=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
