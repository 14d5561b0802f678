"""The local store's run catalog: every run document flattened to typed columns, kept fast.

The truth is ``runs/<run_id>.json``. Reading 10,000 of those takes most of a second, so
queries read a compacted index in ``catalog/`` (its files, and how each is checked, are in
:mod:`~warehouse.stores.local_catalog_files`; the table's columns in
:mod:`~warehouse.stores.local_table`): ``runs.arrow`` memory-mapped, so a view pays only for
the columns it touches, plus the runs journaled since the last compaction. The merged table
is cached, keyed by the stat of ``runs.parquet``, the journal and ``runs/``: a warm query
costs three ``os.stat`` calls, and after a write only the new journal lines are read.

**Readers never write and never block each other.** A reader takes the catalog's lock
shared (writers take it exclusively, briefly: to journal a run, or to install a compaction),
so any number of queries run at once, on a read-only folder too. A reader that finds no
catalog, a stale one or a damaged one builds what it needs in memory from the run files,
and says which file is damaged and how to mend it; it never stores anything.

**The journal stays short.** A writer whose journal line crosses ``compact_after`` starts a
compaction in a detached background process (:mod:`~warehouse.stores.local_compaction`; one
at a time, backing off after failures) and never waits for it. Should the journal still reach
twice that (compactions failing, or not keeping up), the writer compacts itself, so no query
ever reads an unbounded journal. A compaction runs in three phases (:meth:`RunCatalog.compact`):
it notes the base and the journal under the writers' lock, builds the new files without it,
and installs them under it, unless someone compacted meanwhile; a crash at any point leaves
a readable catalog.

The run files are the truth, and the catalog is checked against them whenever it is loaded:
the names in ``runs/`` (one directory listing) must be the catalog's run ids. A run file the
catalog lacks (a lost or damaged journal line) is read and added, a run whose file is gone is
dropped, with a warning; compaction does the same check first, so it never drops a run that
is in ``runs/``. Compaction records the stat of ``runs/`` it took before listing it; a reader
that finds ``runs/`` with that stat skips the listing (100k runs: ~150 ms saved). Run files
changed in place by hand are seen after ``LocalStore.compact(rebuild=True)``.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warehouse.errors import StoreUnavailable, WarehouseError
from warehouse.stores.lazy import np, pa
from warehouse.stores.local_catalog_files import (
    LISTED,
    Base,
    CatalogFiles,
    Journal,
    Pending,
    StatKey,
    start_compaction,
    stat,
)
from warehouse.stores.local_docs import mismatched, texts
from warehouse.stores.local_table import DOC, build_table, flatten_run, merge

log = logging.getLogger(__name__)

JOURNAL_CAP = 2
"""The journal never holds more than ``JOURNAL_CAP * compact_after`` lines after a write."""
_JOURNAL_LAG_S = 10.0  # a run file this fresh may be one whose writer is journaling it now
_RESCAN_SLACK_NS = 2_000_000_000  # clocks of file times and of time.time_ns() may differ


@dataclass
class Fold:
    """What one compaction folds (noted by :meth:`RunCatalog.fold_begin`)."""

    base_key: StatKey  # the stat of runs.parquet it starts from
    base: Base | None  # that base, read (None: none, damaged or outdated: rebuild)
    journal: Journal  # the journal's complete lines folded
    built_ns: int  # when it began: a run written since is in the journal
    pending: Pending | None = None  # the new files, written by fold_build


@dataclass
class _Rows:
    """A base table plus the rows read from run files since (None: file gone or corrupt)."""

    base: pa.Table | None = None
    delta: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    unreadable: set[str] = field(default_factory=set)  # run files found damaged
    listed: StatKey = None  # the stat of runs/ taken before listing it


class RunCatalog:
    """The merged, cached run table of one warehouse folder (see the module docstring)."""

    def __init__(self, home: Path, compact_after: int = 500) -> None:
        self.files = CatalogFiles(home)
        self.runs_dir = self.files.runs
        self.dir = self.files.dir
        self.compact_after = compact_after
        self._mutex = threading.Lock()
        self._key: tuple[StatKey, StatKey, StatKey] | None = None
        self._table: pa.Table | None = None
        self._base: Base | None = None
        self._base_key: StatKey = None
        self._rows = _Rows()
        self._journal_ino: int | None = None
        self._offset = 0

    # writers ------------------------------------------------------------------------------
    def record(self, run_ids: Sequence[str]) -> None:
        """Journal the ids of run files just written; keep the journal short (see the module
        docstring): the writer waits for nothing unless compactions fall behind."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with self._mutex, self.files.locked(shared=False):
            self.files.append(run_ids)
            lines = self.files.lines()
        if lines >= JOURNAL_CAP * self.compact_after:
            try:
                self.compact()
            except (OSError, WarehouseError, pa.ArrowException) as exc:  # the run is written
                log.warning("cannot compact the run catalog in %s (%s)", self.dir, exc)
        elif lines >= self.compact_after:
            start_compaction(self.dir)

    def compact(self, rebuild: bool = False) -> bool:
        """Fold the journal into the catalog now (``rebuild``: rescan every run file), in
        the three phases of the module docstring; True once installed (a compaction that
        overtook this one is waited for and this one tried again, twice)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for _ in range(3):
            fold = self.fold_begin(rebuild=rebuild)
            try:
                self.fold_build(fold)
                if self.fold_install(fold):
                    return True
            finally:
                self.files.discard(fold.pending)
        return False

    def fold_begin(self, *, rebuild: bool = False) -> Fold:
        """Under the writers' lock: note the base and the journal's complete lines."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with self.files.locked(shared=False):
            key = stat(self.files.parquet)
            base = None
            if not rebuild and key is not None:
                try:
                    base = self.files.read_base()
                except StoreUnavailable as exc:
                    log.warning("%s; rebuilding it from %s", exc, self.runs_dir)
                if base is not None and not base.current:
                    base = None  # of an earlier version: rebuilt whole
            journal = self.files.read_journal()
            began = time.time_ns()
        return Fold(key, base, journal, began)

    def fold_build(self, fold: Fold) -> None:
        """Without a lock: the new table, written beside the live files."""
        if fold.base is None or fold.journal.damaged:
            rows = self._all_rows()
        else:
            rows = _Rows(fold.base.table)
            for run_id in [*mismatched(fold.base.table), *fold.journal.run_ids]:
                rows.delta[run_id] = self._read_run(run_id)  # a damaged text: its run file
            self._reconcile(rows)  # never compact away a run that is in runs/
        meta = {}
        if rows.listed is not None and not rows.unreadable:
            meta[LISTED] = json.dumps(rows.listed).encode()
        fold.pending = self.files.write(merge(rows.base, rows.delta), meta, fold.built_ns)

    def fold_install(self, fold: Fold) -> bool:
        """Under the writers' lock: put the new files in place and cut the folded lines from
        the journal, unless the base or the journal changed hands since :meth:`fold_begin`."""
        assert fold.pending is not None
        with self.files.locked(shared=False):
            try:
                st = os.stat(self.files.journal)
                ino, size = st.st_ino, st.st_size
            except FileNotFoundError:
                ino, size = None, 0
            journal = fold.journal
            if stat(self.files.parquet) != fold.base_key or (
                journal.ino is not None and (ino != journal.ino or size < journal.size)
            ):
                log.info("the run catalog in %s was compacted meanwhile; dropping", self.dir)
                return False
            self.files.install(fold.pending)
            fold.pending = None
            if journal.size:
                self.files.cut_journal(journal.size)
        return True

    # readers ------------------------------------------------------------------------------
    def table(self) -> pa.Table | None:
        """Every run as one row (None when the warehouse holds no run yet). Never writes."""
        key = self.files.stat_key()
        if key == self._key:
            return self._table
        with self._mutex:
            if not self.dir.exists() and not _has_json(self.runs_dir):
                return None
            with self.files.locked(shared=True):
                self._load()
                self._key = self.files.stat_key()
            return self._table

    def texts(self, table: pa.Table, rows: np.ndarray) -> list[str]:
        """The ``_doc`` texts of ``table`` at ``rows``, read from the mapped file with
        ``pread`` and checked (:func:`~warehouse.stores.local_docs.texts`)."""
        mapped = self._base.mapped if self._base is not None else None
        return texts(table, rows, mapped, self.files.arrow, self.runs_dir)

    def version(self) -> tuple[StatKey, StatKey, StatKey]:
        """What changes whenever a run file is written, replaced or removed, or a compaction
        installs a new base: the stat of ``runs.parquet``, the journal (every write appends to
        it) and ``runs/`` (three ``os.stat`` calls, nothing read)."""
        return self.files.stat_key()

    def clear(self) -> None:
        """Forget the in-memory table (the files stay)."""
        with self._mutex:
            self._key, self._table, self._base, self._base_key = None, None, None, None
            self._rows, self._offset, self._journal_ino = _Rows(), 0, None

    # internals (readers: called with the shared lock held) --------------------------------
    def _load(self) -> None:
        base_key = stat(self.files.parquet)
        if base_key is None or base_key != self._base_key:
            try:
                base = self.files.read_base()
            except StoreUnavailable as exc:
                log.warning("%s", exc)
                base = None
            if base is None and (base_key is not None or _has_json(self.runs_dir)):
                self._in_memory()
                return
            self._base, self._base_key = base, base_key
            self._rows = _Rows(base.table if base is not None else None)
            self._offset, self._journal_ino = 0, None
        journal = self.files.read_journal(self._journal_ino, self._offset)
        if journal.ino != self._journal_ino or self._offset > journal.size:
            self._rows.delta = {}  # another journal file: read it whole (read_journal did)
        self._journal_ino, self._offset = journal.ino, journal.size
        for run_id in journal.run_ids:
            self._rows.delta[run_id] = self._read_run(run_id)
        if journal.damaged:
            self._rescan(journal.damaged)
        self._reconcile(self._rows)
        self._table = merge(self._rows.base, self._rows.delta)

    def _in_memory(self) -> None:
        """No usable stored catalog: every run file read, kept in memory (never stored: a
        reader does not write; the next compaction stores one)."""
        journal = self.files.read_journal()
        self._rows = self._all_rows()
        self._base, self._base_key = None, None
        self._journal_ino, self._offset = journal.ino, journal.size
        self._table = merge(self._rows.base, self._rows.delta)

    def _rescan(self, damaged: int) -> None:
        """Damaged journal lines name runs no one can tell: every run file written since the
        base was built is read again."""
        since = (self._base.built_ns if self._base is not None else 0) - _RESCAN_SLACK_NS
        found = 0
        try:
            with os.scandir(self.runs_dir) as entries:
                for entry in entries:
                    if entry.name.endswith(".json") and entry.stat().st_mtime_ns >= since:
                        run_id = entry.name[: -len(".json")]
                        self._rows.delta[run_id] = self._read_run(run_id)
                        found += 1
        except FileNotFoundError:
            pass  # no run file at all: the journal named none that is there
        log.warning(
            "skipped %d damaged line(s) of the run journal %s; the %d run file(s) written "
            "since the last compaction were read instead. Run 'warehouse compact' to fold "
            "them and drop the damaged lines",
            damaged,
            self.files.journal,
            found,
        )

    def _reconcile(self, rows: _Rows) -> None:
        """Make ``rows`` hold exactly the runs of ``runs/`` (the truth): run files it lacks
        are read into the delta, runs whose file is gone are dropped from it. Skipped while
        ``runs/`` has the stat the base's compaction recorded before listing it."""
        listed = stat(self.runs_dir)
        rows.listed = listed
        if listed is not None and listed == _listed_key(rows.base):
            return
        files = _run_ids(self.runs_dir)
        known = {r for r, row in rows.delta.items() if row is not None}
        if rows.base is not None and rows.base.num_rows:
            known.update(r for r in rows.base.column("run_id").to_pylist() if r not in rows.delta)
        missing = files - known - rows.unreadable
        gone = known - files
        if not missing and not gone:
            return
        found = 0
        settled = time.time() - _JOURNAL_LAG_S
        for run_id in sorted(missing):
            row = self._read_run(run_id)
            if row is None:
                rows.unreadable.add(run_id)
            elif _mtime(self.runs_dir / f"{run_id}.json") < settled:
                found += 1  # not a run whose writer is about to journal it
            rows.delta[run_id] = row
        for run_id in gone:
            rows.delta[run_id] = None
        if found or gone:
            log.warning(
                "the run catalog in %s disagreed with %s: %d run file(s) it lacked were "
                "added and %d run(s) whose file is gone were dropped (a lost or damaged "
                "journal?); queries answer from the run files",
                self.dir,
                self.runs_dir,
                found,
                len(gone),
            )

    def _all_rows(self) -> _Rows:
        """Every run file read (a rebuild)."""
        rows = _Rows(listed=stat(self.runs_dir))
        read = []
        for run_id in sorted(_run_ids(self.runs_dir)):
            row = self._read_run(run_id)
            if row is None:
                rows.unreadable.add(run_id)
            else:
                read.append(row)
        log.info("read the run catalog of %s from %d run files", self.runs_dir, len(read))
        rows.base = build_table(read)
        return rows

    def _read_run(self, run_id: str) -> dict[str, Any] | None:
        path = self.runs_dir / f"{run_id}.json"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:  # EACCES, a folder named like a run ...
            log.warning("skipping unreadable run file %s (%s); fix or delete it", path, exc)
            return None
        try:
            doc = json.loads(text)
            if not isinstance(doc, dict) or doc.get("run_id") != run_id:
                raise ValueError(f"not the run document of {run_id!r}")
            if not isinstance(doc.get("experiment"), str):
                raise ValueError("no experiment name")
        except ValueError as exc:
            log.warning("skipping corrupt run file %s (%s); fix or delete it", path, exc)
            return None
        return flatten_run(doc, text)


def _listed_key(base: pa.Table | None) -> StatKey:
    """The stat of ``runs/`` recorded in ``base`` by the compaction that wrote it."""
    text = (base.schema.metadata or {}).get(LISTED) if base is not None else None
    try:
        ino, mtime, size = json.loads(text) if text else (None, None, None)
    except (ValueError, TypeError):
        return None
    if isinstance(ino, int) and isinstance(mtime, int) and isinstance(size, int):
        return (ino, mtime, size)
    return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _run_ids(folder: Path) -> set[str]:
    """The run ids of the run files in ``folder`` (one directory listing)."""
    try:
        with os.scandir(folder) as entries:
            return {
                e.name[: -len(".json")]
                for e in entries
                if e.name.endswith(".json") and not e.name.startswith(".")
            }
    except (FileNotFoundError, NotADirectoryError):
        return set()


def _has_json(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return any(e.name.endswith(".json") and not e.name.startswith(".") for e in entries)
    except FileNotFoundError:
        return False


__all__ = ["DOC", "JOURNAL_CAP", "Fold", "RunCatalog"]
