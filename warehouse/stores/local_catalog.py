"""The local store's run catalog: every run document flattened to typed columns, kept fast.

The truth is ``runs/<run_id>.json``. Reading 10,000 of those takes most of a second, so
queries read a compacted index in ``catalog/``::

    runs.parquet   one row per run: dotted columns (metrics.val.acc, params.model.C, ...)
                   plus ``_doc``, the run's JSON text as stored
    runs.arrow     the same table as an uncompressed Arrow IPC file, written beside it at
                   each compaction (same ``warehouse_generation`` in both schemas' metadata)
    journal        ids of runs written since the last compaction, one per line, append-only
    lock           flock'd exclusively by writers appending to the journal, by compaction
                   (briefly, see below) and by a reader loading, so no one sees half a change
    compact.lock   held by the one background compaction running (``local_compaction.py``)

A reader memory-maps ``runs.arrow`` (when its generation is that of ``runs.parquet``; else
it reads the Parquet file) plus the journaled run files, and keeps the merged table, keyed
by the stat of ``runs.parquet``, the journal and ``runs/``. Mapped, a column costs memory and
time only when a view touches it: a leaderboard reads four columns and the documents of its
winners, never the other columns nor the other runs' ``_doc``. Runs journaled since the last
compaction replace their rows as zero-copy slices of the mapped table plus a small table of
the new rows. A warm query costs three ``os.stat`` calls, and after a write only the new
journal lines are read. Compaction (rewrite ``runs.arrow`` and ``runs.parquet``, drop the
folded journal lines) runs on demand (``compact()``, inline), and in a detached background
process once the journal passes ``compact_after`` entries: the writer never waits for it,
and it holds the lock only to note what it folds and to install the result
(:mod:`~warehouse.stores.local_compaction`). A catalog
written before ``runs.arrow`` existed is read from Parquet until the next compaction. A
missing, unreadable or outdated catalog is rebuilt from ``runs/*.json``; run files changed
in place by hand are seen after ``LocalStore.compact(rebuild=True)``.

The run files are the truth, and the catalog is checked against them whenever it is loaded:
the names in ``runs/`` (one directory listing) must be the catalog's run ids. A run file the
catalog lacks (a lost or truncated journal) is read and added, a run whose file is gone is
dropped, with a warning; compaction does the same check first, so it never drops a run that
is in ``runs/``. Compaction records the stat of ``runs/`` it took before listing it; a reader
that finds ``runs/`` with that stat skips the listing (nothing was added, removed or replaced
since; 100k runs: ~150 ms saved). A run file created within the same tick of the file
system's clock as that stat, by a writer that then died before journaling it, is found at
the next change of ``runs/``.

Reading never needs to write: a reader that finds no catalog, or a stale one, builds it in
memory, and stores it for the next reader only if it can (a full disk, a read-only folder
or no permission leave the files as they are, and the query is answered all the same).

Column types are unified over all runs: a column whose values are all numbers is DOUBLE, all
booleans BOOLEAN, otherwise text; ``tags``/``invalid_metrics``/``overrides`` are lists of
text; ``started_at``/``ended_at``/``heartbeat_at``/``git.committed_at`` are UTC timestamps.
``config``, ``environment``, ``artifacts`` and ``error.traceback`` are kept only in ``_doc``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from warehouse.errors import WarehouseError
from warehouse.files import write_all
from warehouse.stores import local_compaction
from warehouse.stores.lazy import np, pa, pc, pq
from warehouse.stores.local_docs import MappedFile, texts
from warehouse.stores.local_samples import read_parquet
from warehouse.values import parse_time

log = logging.getLogger(__name__)

CATALOG_VERSION = b"1"
GENERATION = b"warehouse_generation"  # the same in runs.parquet and runs.arrow
LISTED = b"warehouse_runs_listed"  # the stat of runs/ taken before the listing it holds
DOC = "_doc"
LISTS = frozenset({"tags", "invalid_metrics", "overrides"})
TIMESTAMPS = frozenset({"started_at", "ended_at", "heartbeat_at", "git.committed_at"})
_SKIP = frozenset({"config", "environment", "artifacts", "error.traceback"})
_StatKey = tuple[int, int, int] | None
_Key = tuple[_StatKey, _StatKey, _StatKey]
_JOURNAL_LAG_S = 10.0  # a run file this fresh may be one whose writer is journaling it now


class RunCatalog:
    """The merged, cached run table of one warehouse folder (see the module docstring)."""

    def __init__(self, home: Path, compact_after: int = 500) -> None:
        self.runs_dir = home / "runs"
        self.dir = home / "catalog"
        self.path = self.dir / "runs.parquet"
        self.arrow_path = self.dir / "runs.arrow"
        self.journal = self.dir / "journal"
        self.compact_after = compact_after
        self._mutex = threading.Lock()
        self._key: _Key | None = None
        self._table: pa.Table | None = None
        self._base: pa.Table | None = None
        self._base_key: _StatKey = None
        self._journal_ino: int | None = None
        self._offset = 0
        self._delta: dict[str, dict[str, Any] | None] = {}
        self._unreadable: set[str] = set()  # run files found damaged at the last load
        self._listed: _StatKey = None  # stat of runs/ before the last listing of it
        self._mapped: MappedFile | None = None  # runs.arrow, once mapped

    # writers ------------------------------------------------------------------------------
    def record(self, run_ids: Sequence[str]) -> None:
        """Journal the ids of run files just written; when the journal is long, start a
        compaction in the background (:mod:`~warehouse.stores.local_compaction`): the
        writer never waits for one."""
        self.dir.mkdir(parents=True, exist_ok=True)
        data = "".join(f"{run_id}\n" for run_id in run_ids).encode()
        with self._mutex, self._locked():
            fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            long = self.journal.read_bytes().count(b"\n") >= self.compact_after
        if long:
            local_compaction.start(self.dir)

    def compact(self, rebuild: bool = False) -> None:
        """Fold the journal into ``runs.parquet`` now (``rebuild``: rescan every run file)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with self._mutex, self._locked():
            if rebuild:
                self._rebuild_locked(persist=True)
            else:
                self._compact_locked()

    # readers ------------------------------------------------------------------------------
    def table(self) -> pa.Table | None:
        """Every run as one row (None when the warehouse holds no run yet). Never needs to
        write: see the module docstring."""
        key = self._stat_key()
        if key == self._key:
            return self._table
        with self._mutex:
            if not self.dir.exists() and not _has_json(self.runs_dir):
                return None
            with self._locked(create=False):
                self._load_locked()
                self._key = self._stat_key()
            return self._table

    def texts(self, column: pa.ChunkedArray, rows: np.ndarray) -> list[str]:
        """``column`` (``_doc``) at ``rows``, read from the file, not through the mapping
        (:mod:`~warehouse.stores.local_docs`)."""
        return texts(column, rows, self._mapped)

    def version(self) -> tuple[_StatKey, _StatKey]:
        """What changes whenever a run file is written, replaced or removed: the stat of the
        journal (every write appends to it) and of ``runs/`` (two ``os.stat`` calls, nothing
        read). Folding the journal changes it too (a compaction, or the first reader of a
        warehouse without a catalog storing the one it built)."""
        return (_stat(self.journal), _stat(self.runs_dir))

    def _stat_key(self) -> _Key:
        return (_stat(self.path), _stat(self.journal), _stat(self.runs_dir))

    def clear(self) -> None:
        """Forget the in-memory table (the files stay)."""
        with self._mutex:
            self._key, self._table, self._base, self._base_key = None, None, None, None
            self._delta, self._offset, self._journal_ino = {}, 0, None

    # internals (all called with the flock held) -------------------------------------------
    def _load_locked(self) -> None:
        base_key = _stat(self.path)
        if base_key is None or base_key != self._base_key:
            base = self._read_catalog() if base_key is not None else None
            if base is None and (base_key is not None or _has_json(self.runs_dir)):
                self._rebuild_locked(persist=False)
                return
            self._set_base(base)
        self._read_journal_tail()
        self._reconcile()
        self._table = _merge(self._base, self._delta)

    def _reconcile(self) -> None:
        """Make the catalog hold exactly the runs of ``runs/`` (the truth): run files it
        lacks are read into the delta, runs whose file is gone are dropped from it.

        A compaction records the stat of ``runs/`` it took before listing it: while ``runs/``
        still has that stat (no file added, removed or replaced since), the listing would
        say what the catalog holds, and is skipped (100k runs: ~150 ms)."""
        listed = _stat(self.runs_dir)
        if listed is not None and listed == _listed_key(self._base):
            self._listed = listed
            return
        self._listed = listed
        files = _run_ids(self.runs_dir)
        known = {r for r, row in self._delta.items() if row is not None}
        if self._base is not None and self._base.num_rows:
            base_ids = self._base.column("run_id").to_pylist()
            known.update(r for r in base_ids if r not in self._delta)
        missing = files - known - self._unreadable
        gone = known - files
        if not missing and not gone:
            return
        found = 0
        settled = time.time() - _JOURNAL_LAG_S
        for run_id in sorted(missing):
            row = self._read_run(run_id)
            if row is None:
                self._unreadable.add(run_id)
            elif _mtime(self.runs_dir / f"{run_id}.json") < settled:
                found += 1  # not a run whose writer is about to journal it
            self._delta[run_id] = row
        for run_id in gone:
            self._delta[run_id] = None
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

    def _set_base(self, base: pa.Table | None) -> None:
        self._base, self._base_key = base, _stat(self.path)
        self._delta, self._offset, self._journal_ino = {}, 0, None

    def _read_journal_tail(self) -> None:
        try:
            with open(self.journal, "rb") as journal:
                st = os.fstat(journal.fileno())
                if st.st_ino != self._journal_ino or st.st_size < self._offset:
                    self._delta, self._offset, self._journal_ino = {}, 0, st.st_ino
                journal.seek(self._offset)
                data = journal.read()
        except FileNotFoundError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        damaged = 0
        for run_id in dict.fromkeys(complete.decode("utf-8", errors="replace").split()):
            if _RUN_ID.fullmatch(run_id):
                self._delta[run_id] = self._read_run(run_id)
            else:
                damaged += 1
        if damaged:
            log.warning(
                "skipped %d damaged line(s) of the run journal %s; the runs they named are "
                "found again by 'warehouse compact --rebuild'",
                damaged,
                self.journal,
            )

    def _compact_locked(self) -> None:
        if _stat(self.path) is None or self._base_key != _stat(self.path):
            base = self._read_catalog() if _stat(self.path) is not None else None
            if base is None:
                self._rebuild_locked(persist=True)
                return
            self._set_base(base)
        self._read_journal_tail()
        self._reconcile()  # never compact away a run that is in runs/
        self._write_locked(_merge(self._base, self._delta), persist=True)

    def _rebuild_locked(self, *, persist: bool) -> None:
        self._write_locked(self._build_all(), persist=persist)

    def _build_all(self) -> pa.Table:
        """The catalog table read from every run file."""
        rows: list[dict[str, Any]] = []
        self._unreadable = set()
        self._listed = _stat(self.runs_dir)
        for run_id in sorted(_run_ids(self.runs_dir)):
            row = self._read_run(run_id)
            if row is None:
                self._unreadable.add(run_id)
            else:
                rows.append(row)
        log.info("rebuilt the run catalog of %s from %d run files", self.runs_dir, len(rows))
        return build_table(rows)

    def _write_locked(self, table: pa.Table | None, *, persist: bool) -> None:
        """Store ``table`` as the catalog and empty the journal (``runs.arrow``, then
        ``runs.parquet``: a reader between the two finds different generations and reads
        the Parquet file); the inline compaction of ``compact()`` and of readers.
        ``persist=False`` (a reader): if it cannot be stored, for whatever reason, it is kept
        in memory and the query goes on."""
        stem = f"{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        tmp, tmp_arrow = self.dir / f".runs.{stem}", self.dir / f".arrow.{stem}"
        try:
            if persist:
                self.dir.mkdir(parents=True, exist_ok=True)
            generation = local_compaction.store_tmp(self, table, tmp_arrow, tmp)
            os.replace(tmp_arrow, self.arrow_path)
            os.replace(tmp, self.path)
        except OSError as exc:
            if persist and not _read_only(exc):
                raise
            log.warning("cannot store the run catalog in %s (%s); kept in memory", self.dir, exc)
            self._base, self._delta = local_compaction.stamped(self, table), {}
            self._base_key = None  # another process may store it: read it then
            self._table = self._base
            return
        finally:
            for path in (tmp, tmp_arrow):
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)
        if self.journal.exists():
            os.truncate(self.journal, 0)
        mapped = self._open_arrow(generation)  # the pages, not a copy of them, stay
        self._set_base(
            mapped if mapped is not None else local_compaction.stamped(self, table, generation)
        )
        self._table = self._base
        self._key = self._stat_key()

    def _read_catalog(self) -> pa.Table | None:
        """The stored catalog: ``runs.arrow`` mapped when it is of the generation of
        ``runs.parquet`` (whose footer alone is read then), else the Parquet file read."""
        try:
            schema = pq.read_schema(self.path)
        except FileNotFoundError:
            return None
        except Exception as exc:  # a damaged footer fails in many ways
            log.warning("run catalog %s is unreadable (%s); rebuilding it", self.path, exc)
            return None
        meta = schema.metadata or {}
        if meta.get(b"warehouse_catalog") != CATALOG_VERSION or "run_id" not in schema.names:
            log.info("run catalog %s is from another version; rebuilding it", self.path)
            return None
        generation = meta.get(GENERATION)
        mapped = self._open_arrow(generation) if generation else None
        if mapped is not None:
            return mapped
        try:
            table = read_parquet(self.path)
        except FileNotFoundError:
            return None
        except (pa.ArrowException, OSError, WarehouseError) as exc:
            log.warning("run catalog %s is unreadable (%s); rebuilding it", self.path, exc)
            return None
        meta = table.schema.metadata or {}
        if meta.get(b"warehouse_catalog") != CATALOG_VERSION or "run_id" not in table.schema.names:
            log.info("run catalog %s is from another version; rebuilding it", self.path)
            return None
        return table.combine_chunks()

    def _open_arrow(self, generation: bytes | None) -> pa.Table | None:
        """``runs.arrow`` memory-mapped (no byte of a column is read before it is used), or
        None when it is missing, damaged or of another generation than ``generation``."""
        try:
            mapped = MappedFile(self.arrow_path)
            with pa.ipc.open_file(pa.BufferReader(mapped.buffer)) as reader:
                meta = reader.schema.metadata or {}
                if generation is None or meta.get(GENERATION) != generation:
                    return None
                table = reader.read_all()
            table.validate()  # sizes and offsets of the buffers, not their values
            self._mapped = mapped
        except FileNotFoundError:
            return None
        except (pa.ArrowException, OSError, ValueError) as exc:
            log.info(
                "run catalog %s is unreadable (%s); reading the Parquet file", self.arrow_path, exc
            )
            return None
        return table if "run_id" in table.schema.names else None

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

    @contextmanager
    def _locked(self, *, create: bool = True) -> Iterator[None]:
        """The catalog's flock. Writers create the lock file; a reader (``create=False``)
        only opens it: where it does not exist, no writer ever held it."""
        try:
            if not create:
                raise FileNotFoundError
            fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:  # a reader, or read-only, no permission, a full disk ...
            try:
                fd = os.open(self.dir / "lock", os.O_RDONLY)
            except OSError:
                yield
                return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock


_RUN_ID = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,199}")  # as run file names allow


def flatten_run(doc: dict[str, Any], text: str) -> dict[str, Any]:
    """One run document as ``{dotted.column: scalar}`` plus ``_doc`` (its JSON text)."""
    row: dict[str, Any] = {DOC: text}
    _walk(doc, "", row)
    return row


def _walk(node: dict[str, Any], prefix: str, row: dict[str, Any]) -> None:
    for key, value in node.items():
        name = f"{prefix}{key}"
        if name in _SKIP:
            continue
        if isinstance(value, dict):
            _walk(value, f"{name}.", row)
        elif isinstance(value, list):
            if name in LISTS:
                row[name] = [_text(v) for v in value if v is not None]
        else:
            row[name] = value


def build_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Rows of flattened runs as one table, each column's type unified over the rows."""
    names: dict[str, None] = {"run_id": None, DOC: None}
    for row in rows:
        names.update(dict.fromkeys(row))
    return pa.table({name: _column(name, [r.get(name) for r in rows]) for name in names})


def _column(name: str, values: list[Any]) -> pa.Array:
    if name in (DOC, "run_id"):
        return pa.array(values, pa.string())
    if name in LISTS:
        return pa.array([v if isinstance(v, list) else None for v in values], pa.list_(pa.string()))
    if name in TIMESTAMPS:
        return pa.array([parse_time(v) for v in values], pa.timestamp("us", tz="UTC"))
    present = [v for v in values if v is not None]
    if not present:
        return pa.nulls(len(values))
    if all(isinstance(v, bool) for v in present):
        return pa.array(values, pa.bool_())
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pa.array([_finite(v) for v in values], pa.float64())
    return pa.array([None if v is None else _text(v) for v in values], pa.string())


def _merge(base: pa.Table | None, delta: dict[str, dict[str, Any] | None]) -> pa.Table | None:
    """``base`` with the journaled runs replaced (or removed: None = file gone or corrupt).
    The rows of ``base`` that stay are zero-copy slices of it: a mapped catalog stays mapped."""
    if not delta:
        return base
    parts = []
    if base is not None and base.num_rows:
        changed = pa.array(list(delta), pa.string())
        hit = pc.is_in(base.column("run_id"), value_set=changed)
        holes = np.flatnonzero(hit.to_numpy(zero_copy_only=False))
        start = 0
        for row in holes.tolist():
            if row > start:
                parts.append(base.slice(start, row - start))
            start = row + 1
        if start < base.num_rows:
            parts.append(base.slice(start))
    rows = [row for row in delta.values() if row is not None]
    if rows:
        parts.append(build_table(rows))
    return _concat(parts) if parts else build_table([])


def _concat(tables: list[pa.Table]) -> pa.Table:
    """Tables stacked; a column typed differently in two tables becomes text."""
    if len(tables) == 1:
        return tables[0]
    types: dict[str, pa.DataType] = {}
    for table in tables:
        for f in table.schema:
            seen = types.get(f.name)
            if seen is None or pa.types.is_null(seen):
                types[f.name] = f.type
            elif seen != f.type and not pa.types.is_null(f.type):
                types[f.name] = pa.string()
    aligned = []
    for table in tables:
        names = table.schema.names
        columns = {
            name: (
                (
                    table.column(name)
                    if table.schema.field(name).type == typ
                    else table.column(name).cast(typ)
                )
                if name in names
                else pa.nulls(table.num_rows, typ)
            )
            for name, typ in types.items()
        }
        aligned.append(pa.table(columns))
    return pa.concat_tables(aligned)


def _listed_key(base: pa.Table | None) -> _StatKey:
    """The stat of ``runs/`` recorded in ``base`` by the compaction that wrote it."""
    text = (base.schema.metadata or {}).get(LISTED) if base is not None else None
    try:
        ino, mtime, size = json.loads(text) if text else (None, None, None)
    except (ValueError, TypeError):
        return None
    if isinstance(ino, int) and isinstance(mtime, int) and isinstance(size, int):
        return (ino, mtime, size)
    return None


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value if isinstance(value, str) else json.dumps(value)


def _stat(path: Path) -> _StatKey:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _read_only(exc: OSError) -> bool:
    """Whether ``exc`` says the warehouse may be read but not written."""
    return isinstance(exc, PermissionError) or exc.errno == errno.EROFS


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
