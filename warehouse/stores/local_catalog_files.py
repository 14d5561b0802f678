"""The run catalog's files: what is on disk, how each file is checked, locked and replaced.

::

    catalog/runs.parquet   the catalog table (``warehouse_generation`` in its schema metadata)
    catalog/runs.arrow     the same table, uncompressed Arrow IPC, memory-mapped by readers
    catalog/manifest.json  per generation, each file's size and CRC-32 (itself checksummed)
    catalog/journal        ``<run_id> <crc32>`` per run written since the last compaction
    catalog/lock           flock'd: shared by readers loading, exclusive by writers journaling
                           and by compaction noting and installing what it folds
    catalog/compact.lock   held by the one background compaction running; it also records
                           failed compactions, so writers back off before starting another

**A damaged file never answers.** A file is used only when its CRC-32 is the one its
manifest recorded when it was written; ``runs.arrow``'s is checked when it is mapped, leaving
out the bytes of the ``_doc`` column, whose every document carries its own CRC-32 (checked as
it is read: a listing pays for the documents it shows, not for all of them). Each journal
line carries its id's CRC-32. A mismatch is reported by path with the remedy
(:func:`damaged`): readers then answer from ``runs.parquet`` or the run files, writers
rebuild. The manifest keeps the previous generation too, so a compaction killed between
its renames leaves files that can still be checked.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warehouse.errors import StoreUnavailable, WarehouseError
from warehouse.files import append, atomic_write, install, replacing
from warehouse.stores.lazy import pa, pq
from warehouse.stores.local_docs import MappedFile, damaged, offsets_owned
from warehouse.stores.local_table import DOC, build_table

log = logging.getLogger(__name__)

CATALOG_VERSION = b"2"  # 2: _doc_crc, params past the typed limit kept out of the columns
GENERATION = b"warehouse_generation"  # the same in runs.parquet and runs.arrow
LISTED = b"warehouse_runs_listed"  # the stat of runs/ taken before the listing it holds
MANIFEST = "manifest.json"
COMPACT_LOCK = "compact.lock"
BACKOFF_MAX_S = 600.0  # the longest a failing compaction waits before the next try
RUN_ID = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,199}")  # as run file names allow
StatKey = tuple[int, int, int] | None
_CHUNK = 1 << 20
_CHILD = (sys.executable, "-P", "-m", "warehouse.stores.local_compaction")


@dataclass
class Base:
    """The stored catalog table as read, and where it came from."""

    table: pa.Table
    key: StatKey  # the stat of runs.parquet
    mapped: MappedFile | None = None  # runs.arrow, when the table is mapped from it
    built_ns: int = 0  # when its compaction started: runs written since are journaled
    current: bool = True  # of this version of the catalog (else rebuilt at compaction)


@dataclass
class Pending:
    """A new generation written beside the live files, to be installed."""

    generation: str
    arrow: Path
    parquet: Path
    files: dict[str, Any]  # each file's checksum, and built_ns


@dataclass
class Journal:
    """The journal's complete lines as read: the ids, and what was read of it."""

    ino: int | None
    size: int
    run_ids: list[str]
    damaged: int = 0


class CatalogFiles:
    """The files of one warehouse folder's catalog (see the module docstring)."""

    def __init__(self, home: Path) -> None:
        self.runs = home / "runs"
        self.dir = home / "catalog"
        self.parquet = self.dir / "runs.parquet"
        self.arrow = self.dir / "runs.arrow"
        self.journal = self.dir / "journal"
        self.manifest = self.dir / MANIFEST
        self._verified: dict[tuple[str, StatKey], bool] = {}  # checksums checked, by stat

    # locks ------------------------------------------------------------------------------------
    @contextmanager
    def locked(self, *, shared: bool) -> Iterator[None]:
        """The catalog's flock: shared for readers (who never create the file: where it does
        not exist, no writer ever held it), exclusive for writers."""
        try:
            if shared:
                raise FileNotFoundError
            fd = os.open(self.dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:  # a reader, or read-only, no permission, a full disk ...
            try:
                fd = os.open(self.dir / "lock", os.O_RDONLY)
            except OSError:
                yield
                return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def stat_key(self) -> tuple[StatKey, StatKey, StatKey]:
        """What a reader's cached table depends on: the base, the journal and ``runs/``."""
        return (stat(self.parquet), stat(self.journal), stat(self.runs))

    # the base ---------------------------------------------------------------------------------
    def read_base(self) -> Base | None:
        """The stored table, checked: ``runs.arrow`` mapped when the manifest vouches for its
        generation, else ``runs.parquet`` read. None when there is none; when neither can be
        used, :func:`damaged` names the file."""
        key = stat(self.parquet)
        if key is None:
            return None
        manifest = self._manifest()
        if manifest is None:
            return self._unchecked(key)
        problem: StoreUnavailable | None = None
        found: tuple[pa.Table, MappedFile | None, dict[str, Any]] | None
        try:
            found = self._arrow(manifest)
        except StoreUnavailable as exc:
            problem, found = exc, None
        if found is None:
            found = self._parquet(manifest)
            if problem is not None:
                log.warning("%s; answering from %s", problem, self.parquet)
        table, mapped, entry = found
        version = (table.schema.metadata or {}).get(b"warehouse_catalog")
        built = int(entry.get("built_ns", 0))
        return Base(table, key, mapped, built, version == CATALOG_VERSION)

    def _arrow(
        self, manifest: dict[str, Any]
    ) -> tuple[pa.Table, MappedFile, dict[str, Any]] | None:
        try:
            mapped = MappedFile(self.arrow)
        except FileNotFoundError:
            return None
        try:
            with pa.ipc.open_file(pa.BufferReader(mapped.buffer)) as reader:
                generation = _generation(reader.schema)
                entry = manifest.get(generation)
                if entry is None:
                    return None  # an older file, or one the manifest does not vouch for
                self._check(self.arrow, entry.get("runs.arrow"), mapped.fd)
                table = offsets_owned(reader.read_all())
            table.validate()  # sizes and offsets of the buffers, not their values
        except StoreUnavailable:
            raise
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise damaged(self.arrow, f"{type(exc).__name__}: {exc}") from None
        if "run_id" not in table.schema.names:
            raise damaged(self.arrow, "not a run catalog")
        return table, mapped, entry

    def _parquet(self, manifest: dict[str, Any]) -> tuple[pa.Table, None, dict[str, Any]]:
        from warehouse.stores.local_samples import read_parquet

        try:
            fd = os.open(self.parquet, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                # the generation whose checksums the file matches (its footer is not trusted)
                entry = next(
                    (
                        e
                        for e in manifest.values()
                        if isinstance(e, dict)
                        and self._matches(self.parquet, e.get("runs.parquet"), fd, size)
                    ),
                    None,
                )
            finally:
                os.close(fd)
            if entry is None:
                raise damaged(self.parquet, "its CRC-32 is none of those recorded in the manifest")
            table = read_parquet(self.parquet)
        except StoreUnavailable:
            raise
        except (pa.ArrowException, OSError, WarehouseError) as exc:
            raise damaged(self.parquet, str(exc)) from None
        if "run_id" not in table.schema.names:
            raise damaged(self.parquet, "not a run catalog")
        return table.combine_chunks(), None, entry

    def _unchecked(self, key: StatKey) -> Base | None:
        """A catalog written before manifests: the same generation rule, unchecked (the next
        compaction writes it again, with checksums)."""
        from warehouse.stores.local_samples import read_parquet

        try:
            schema = pq.read_schema(self.parquet)
            generation = _generation(schema)
            mapped = MappedFile(self.arrow)
            with pa.ipc.open_file(pa.BufferReader(mapped.buffer)) as reader:
                if _generation(reader.schema) == generation:
                    return Base(reader.read_all(), key, mapped, 0, False)
        except FileNotFoundError:
            pass
        except Exception as exc:  # any damage: the Parquet file, else a rebuild
            log.info("run catalog %s is unreadable (%s)", self.arrow, exc)
        try:
            table = read_parquet(self.parquet)
        except FileNotFoundError:
            return None
        except (pa.ArrowException, OSError, WarehouseError) as exc:
            raise damaged(self.parquet, str(exc)) from None
        return Base(table.combine_chunks(), key, None, 0, False)

    def _check(self, path: Path, expected: dict[str, Any] | None, fd: int) -> None:
        """Raise :func:`damaged` unless the file's CRC-32 is the one recorded (checked once
        per process for a given stat of the file)."""
        if expected is None:
            raise damaged(path, f"no checksum of it in {self.manifest}")
        key = (str(path), stat(path))
        if self._verified.get(key):
            return
        size = os.fstat(fd).st_size
        if size != expected.get("size"):
            raise damaged(path, f"{size:,} bytes where {expected.get('size'):,} were written")
        skip = expected.get("skip") or [size, size]
        if crc_of(fd, size, (int(skip[0]), int(skip[1]))) != expected.get("crc32"):
            raise damaged(path, "its CRC-32 is not the one recorded when it was written")
        self._verified[key] = True

    def _matches(self, path: Path, expected: dict[str, Any] | None, fd: int, size: int) -> bool:
        if not isinstance(expected, dict) or expected.get("size") != size:
            return False
        try:
            self._check(path, expected, fd)
        except StoreUnavailable:
            return False
        return True

    def _manifest(self) -> dict[str, Any] | None:
        """``{generation: {file: {size, crc32, skip}, built_ns}}``; None when there is none
        (a catalog of an earlier version: used unchecked until the next compaction)."""
        try:
            data = json.loads(self.manifest.read_bytes())
            body = data["generations"]
            if data.get("crc32") != zlib.crc32(_canonical(body)):
                raise ValueError("its own CRC-32 does not match")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise damaged(self.manifest, f"{type(exc).__name__}: {exc}") from None
        return dict(body)

    # writing a generation ---------------------------------------------------------------------
    def write(self, table: pa.Table | None, meta: dict[bytes, bytes], built_ns: int) -> Pending:
        """``table`` written and synced as new Arrow and Parquet files beside the live ones,
        their checksums taken; :meth:`install` puts them in place."""
        generation = uuid.uuid4().hex
        table = stamped(table, {**meta, GENERATION: generation.encode()})
        stem = f"{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        tmp_arrow, tmp = self.dir / f".arrow.{stem}", self.dir / f".runs.{stem}"
        try:
            with (
                pa.OSFile(str(tmp_arrow), "wb") as sink,
                pa.ipc.new_file(sink, table.schema) as writer,
            ):
                writer.write_table(table, max_chunksize=max(1, table.num_rows))  # mapped
            pq.write_table(table, tmp, compression="snappy", write_page_checksum=True)
            files = {
                "runs.arrow": _checksum(tmp_arrow, _doc_bytes(tmp_arrow)),
                "runs.parquet": _checksum(tmp, None),
                "built_ns": built_ns,
            }
        except BaseException:
            for path in (tmp_arrow, tmp):
                path.unlink(missing_ok=True)
            raise
        return Pending(generation, tmp_arrow, tmp, files)

    def install(self, pending: Pending) -> None:
        """Under the exclusive lock: the manifest first (keeping the previous generation's
        checksums), then ``runs.arrow``, then ``runs.parquet``."""
        generations: dict[str, Any] = {}
        with contextlib.suppress(StoreUnavailable):
            generations = self._manifest() or {}
        try:
            current = pq.read_schema(self.parquet).metadata.get(GENERATION, b"").decode()
        except Exception:  # none, or damaged: nothing to keep
            current = ""
        body = {pending.generation: pending.files}
        if current in generations:
            body[current] = generations[current]
        data = {"generations": body, "crc32": zlib.crc32(_canonical(body))}
        atomic_write(self.manifest, json.dumps(data, indent=1).encode() + b"\n")
        install(pending.arrow, self.arrow, sync_folder=False)
        install(pending.parquet, self.parquet)

    def discard(self, pending: Pending | None) -> None:
        if pending is not None:
            for path in (pending.arrow, pending.parquet):
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)

    # the journal ------------------------------------------------------------------------------
    def append(self, run_ids: Sequence[str]) -> None:
        """Journal run ids (each line with its CRC-32), synced."""
        lines = "".join(f"{r} {zlib.crc32(r.encode()):08x}\n" for r in run_ids).encode()
        append(self.journal, lines, sync=True)

    def lines(self) -> int:
        try:
            return self.journal.read_bytes().count(b"\n")
        except FileNotFoundError:
            return 0

    def read_journal(self, ino: int | None = None, offset: int = 0) -> Journal:
        """The complete lines after ``offset`` (from the start when the journal is another
        file than ``ino``, or shorter)."""
        try:
            with open(self.journal, "rb") as journal:
                st = os.fstat(journal.fileno())
                if st.st_ino != ino or st.st_size < offset:
                    offset = 0
                journal.seek(offset)
                data = journal.read()
        except FileNotFoundError:
            return Journal(None, 0, [])
        complete = data[: data.rfind(b"\n") + 1]
        ids: list[str] = []
        # appends are whole lines under the exclusive lock this reader excludes: bytes after
        # the last newline are a damaged line, not one being written
        bad = int(len(complete) < len(data))
        for line in complete.decode("utf-8", errors="replace").splitlines():
            run_id = _journaled(line)
            if run_id is None:
                bad += line.strip() != ""
            else:
                ids.append(run_id)
        return Journal(st.st_ino, offset + len(complete), list(dict.fromkeys(ids)), bad)

    def cut_journal(self, folded: int) -> None:
        """Replace the journal by its lines after the first ``folded`` bytes (a new file, so a
        crash leaves the old journal whole: its folded lines are read again, harmlessly)."""
        with open(self.journal, "rb") as old:
            old.seek(folded)
            rest = old.read()
        if not rest:
            os.truncate(self.journal, 0)
            return
        with replacing(self.journal) as tmp:
            tmp.write_bytes(rest)


def _generation(schema: pa.Schema) -> str:
    return ((schema.metadata or {}).get(GENERATION) or b"").decode("ascii", "replace")


def _journaled(line: str) -> str | None:
    """The run id a journal line names (None: a damaged line). Lines of an earlier version
    hold the id alone."""
    parts = line.split()
    if len(parts) == 2 and RUN_ID.fullmatch(parts[0]):
        return parts[0] if parts[1] == f"{zlib.crc32(parts[0].encode()):08x}" else None
    if len(parts) == 1 and RUN_ID.fullmatch(parts[0]):
        return parts[0]
    return None


def stamped(table: pa.Table | None, meta: dict[bytes, bytes]) -> pa.Table:
    """``table`` (None: no run) in one chunk, with the catalog's schema metadata."""
    if table is None:
        table = build_table([])
    return table.combine_chunks().replace_schema_metadata(
        {b"warehouse_catalog": CATALOG_VERSION, **meta}
    )


def crc_of(fd: int, size: int, skip: tuple[int, int] = (0, 0)) -> int:
    """The CRC-32 of a file's bytes less the range ``skip``, read with ``pread`` (no page of
    it is mapped into this process)."""
    crc = 0
    for start, end in ((0, skip[0]), (skip[1], size)) if skip[0] < skip[1] else ((0, size),):
        at = start
        while at < end:
            chunk = os.pread(fd, min(_CHUNK, end - at), at)
            if not chunk:
                break
            crc = zlib.crc32(chunk, crc)
            at += len(chunk)
    return crc


def _checksum(path: Path, skip: tuple[int, int] | None) -> dict[str, Any]:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        entry: dict[str, Any] = {"size": size, "crc32": crc_of(fd, size, skip or (0, 0))}
    finally:
        os.close(fd)
    if skip is not None:
        entry["skip"] = list(skip)
    return entry


def _doc_bytes(path: Path) -> tuple[int, int] | None:
    """Where the ``_doc`` texts lie in an Arrow file (one chunk): left out of its CRC-32."""
    mapped = MappedFile(path)
    with pa.ipc.open_file(pa.BufferReader(mapped.buffer)) as reader:
        table = reader.read_all()
    if DOC not in table.schema.names or not table.num_rows:
        return None
    chunk = table.column(DOC).chunk(0)
    data = chunk.buffers()[2]
    if data is None or not mapped.holds(data):
        return None
    start = data.address - mapped.start
    return start, start + data.size


def _canonical(body: Any) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def stat(path: Path) -> StatKey:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


# the background compaction ----------------------------------------------------------------------
def start_compaction(catalog_dir: Path) -> bool:
    """Start a background compaction (``warehouse.stores.local_compaction``) of the catalog
    in ``catalog_dir`` unless one runs, or the last ones failed a moment ago (it then waits
    1, 2, 4 ... up to :data:`BACKOFF_MAX_S` seconds after each failure). Never fails: a
    failure to start is logged (debug) and the journal stays as it is."""
    failures, at = _failures(catalog_dir)
    if failures and time.time() < at + min(2.0**failures, BACKOFF_MAX_S):
        return False
    try:
        fd = os.open(catalog_dir / COMPACT_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        log.debug("cannot open %s (%s); not compacting", catalog_dir / COMPACT_LOCK, exc)
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a compaction runs already
        subprocess.Popen(
            # -P: the user's current folder is not on the child's path (a module there named
            # like a library's would be imported instead of it)
            [*_CHILD, str(catalog_dir.parent), str(fd)],
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


def note_compaction(catalog_dir: Path, fd: int | None, ok: bool) -> None:
    """Record in ``compact.lock`` (held as ``fd``) whether the compaction succeeded: the
    writers' back-off reads it."""
    failures, _ = _failures(catalog_dir)
    record = b"" if ok else json.dumps({"failures": failures + 1, "at": time.time()}).encode()
    with contextlib.suppress(OSError):
        target = fd if fd is not None else os.open(catalog_dir / COMPACT_LOCK, os.O_RDWR)
        try:
            os.ftruncate(target, 0)
            os.pwrite(target, record, 0)
        finally:
            if fd is None:
                os.close(target)


def _failures(catalog_dir: Path) -> tuple[int, float]:
    try:
        record = json.loads((catalog_dir / COMPACT_LOCK).read_bytes() or b"{}")
        return int(record.get("failures", 0)), float(record.get("at", 0.0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0, 0.0


def wait_compaction(catalog_dir: Path) -> None:
    """Return once no background compaction of ``catalog_dir`` runs (tests, benchmarks)."""
    try:
        fd = os.open(catalog_dir / COMPACT_LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    finally:
        os.close(fd)


__all__ = [
    "CATALOG_VERSION",
    "COMPACT_LOCK",
    "GENERATION",
    "LISTED",
    "RUN_ID",
    "Base",
    "CatalogFiles",
    "Journal",
    "Pending",
    "crc_of",
    "damaged",
    "note_compaction",
    "stamped",
    "start_compaction",
    "stat",
    "wait_compaction",
]
