"""The outbox: one durable queue of records waiting for the remote store or object store.

Each entry is a file ``<home>/outbox/<time>-<pid>-<random>.json`` holding one JSON line:
written to a temporary file, fsync'd and renamed into place (then the folder fsync'd), so a
crash leaves an entry whole or absent, and any number of processes add entries at once without
touching the same file. Entries sort by creation time: the oldest ship first.

**The local store is the truth: no entry ships before its local write is complete** (issue 25).
A writer *stages* its entries first (:meth:`Outbox.stage`): they are written durably as
``<time>-<pid>-<random>.<group>.staged``, invisible to every shipper, while the writer holds
the flock of ``.<group>.lock``. Once the local write is done the writer releases them
(renamed to ``.json``): from then on anyone may ship them. A writer that dies in between
leaves its staged entries unlocked (the kernel drops a dead process's locks): they are
*orphans*, and whoever ships next (:meth:`Outbox.orphans`, under the drain lock) first
completes their local write from the entry (idempotent: the local store keeps the newest
version of a run and the first copy of a step), then releases them. A local write that fails
(a full disk) leaves its entries staged and unlocked at once, for the same path.

Kinds: ``run`` (the run document), ``samples`` (names a split whose rows are in the local
store), ``steps`` (the step documents), ``object`` (names an object in the local object store),
``delete`` (run ids whose records go) and ``delete_objects`` (a key prefix whose objects go).
Entries hold JSON only, never pickle. What ships them, and when, is
:class:`warehouse.replication.shipper.Shipper`; this module only keeps the queue.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warehouse.files import atomic_write, fsync_dir
from warehouse.values import json_safe

log = logging.getLogger(__name__)

KINDS = ("run", "samples", "steps", "object", "delete", "delete_objects")
CORRUPT = "corrupt"  # an entry file that does not parse (also its folder under outbox/)
UNREADABLE = "unreadable"  # an entry file that could not be read this time
LOCK_NAME = ".drain.lock"
STAGED = ".staged"  # suffix of an entry whose local write is not known to be complete
VERSION = 2  # entries written since staging; version 1 entries may lack their local copy
STALE_S = 600.0  # a temporary file this old is a dead writer's, never to be renamed
REMOVE_THREADS = 8  # shipped entries removed at once (see Outbox.remove_many)


@dataclass
class Entry:
    """One record waiting to be shipped."""

    path: Path
    kind: str
    created_ns: int
    payload: dict[str, Any]
    attempts: int = 0
    last_error: str | None = None
    last_error_type: str | None = None
    version: int = VERSION

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def staged(self) -> bool:
        """Whether its local write is not known to be complete (not yet released)."""
        return self.path.name.endswith(STAGED)

    @property
    def needs_local(self) -> bool:
        """Whether its local copy must be written (again) before it ships: staged, or from a
        version that shipped entries before writing them locally."""
        return self.staged or self.version < VERSION

    @property
    def problem(self) -> str | None:
        """Why the entry cannot be shipped by anyone, whatever the servers do (None: it can)."""
        if self.kind in (CORRUPT, UNREADABLE):
            return self.last_error or f"{self.kind} outbox entry {self.path}"
        if self.kind not in KINDS:
            return (
                f"outbox entry {self.path} has an unknown kind {self.kind!r} (written by another "
                "version of results-warehouse?); ship it with that version, or delete it"
            )
        return None

    def describe(self) -> str:
        """``run 3f2a… (experiment resnet)`` — what the entry holds, for people."""
        p = self.payload
        if self.kind == "run":
            doc = p.get("doc", {})
            return f"run {doc.get('run_id')} ({doc.get('experiment')}, {doc.get('status')})"
        if self.kind == "samples":
            return f"samples of run {p.get('run_id')} split {p.get('split')}"
        if self.kind == "steps":
            return f"{len(p.get('steps', []))} step(s) of run {p.get('run_id')}"
        if self.kind == "delete":
            return f"deletion of {len(p.get('run_ids', []))} run(s)"
        if self.kind == "delete_objects":
            return f"deletion of the objects under {p.get('prefix')}"
        if self.kind in (CORRUPT, UNREADABLE):
            return f"{self.kind} entry {self.path.name}"
        if self.kind == "object":
            return f"object {p.get('key')}"
        return f"entry {self.path.name} of unknown kind {self.kind!r}"

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "kind": self.kind,
                "created_ns": self.created_ns,
                "attempts": self.attempts,
                "last_error": self.last_error,
                "last_error_type": self.last_error_type,
                "payload": self.payload,
            },
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        )


@dataclass
class SyncReport:
    """What a drain did: entries shipped, and those still waiting with their reasons."""

    shipped: int = 0
    failed: list[tuple[Entry, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.failed


class Outbox:
    """The folder of waiting entries (safe for many processes at once)."""

    def __init__(self, folder: Path, prepare: Callable[[], object] | None = None) -> None:
        self.folder = folder
        self._prepare = prepare  # creates the warehouse folder the right way, first

    def add(self, kind: str, payload: dict[str, Any], *, local_done: bool = True) -> Entry:
        """Durably store a new entry (fsync'd file, then fsync'd folder) and return it.

        ``local_done``: its local copy is written (it may ship at once); else it is left as
        an orphan, whose local write the next shipper completes first."""
        entry = self._new(
            kind, payload, f".{uuid.uuid4().hex[:12]}{STAGED}" if not local_done else ".json"
        )
        self._write(entry, sync_folder=True)
        return entry

    def stage(self, items: Sequence[tuple[str, dict[str, Any]]]) -> Staged:
        """Entries written durably but invisible to shippers until :meth:`Staged.release`
        (after the local write); see the module docstring."""
        group = uuid.uuid4().hex[:12]
        self._ready()
        fd = os.open(self.folder / f".{group}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            entries = [self._new(kind, payload, f".{group}{STAGED}") for kind, payload in items]
            for entry in entries:
                self._write(entry, sync_folder=False)
            fsync_dir(self.folder)
        except BaseException:
            os.close(fd)
            raise
        return Staged(self, group, fd, entries)

    def orphans(self) -> Iterator[Staged]:
        """Staged entries whose writer is gone (its lock is free), grouped as staged, each
        group locked by this process until released; oldest first."""
        try:
            listed = os.listdir(self.folder)
        except FileNotFoundError:
            return
        names = sorted(n for n in listed if n.endswith(STAGED) and n[0] != ".")
        groups: dict[str, list[str]] = {}
        for name in names:
            groups.setdefault(name[: -len(STAGED)].rpartition(".")[2], []).append(name)
        self._tidy(listed, set(groups))
        for group, members in groups.items():
            try:
                fd = os.open(self.folder / f".{group}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                continue  # a read-only outbox: nothing can be recovered from here
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue  # its writer is alive, writing the local copy now
            entries = [e for e in (self.load(self.folder / n) for n in members) if e is not None]
            yield Staged(
                self, group, fd, [e for e in entries if e.kind not in (CORRUPT, UNREADABLE)]
            )

    def _tidy(self, names: list[str], staged: set[str]) -> None:
        """What writers killed at a bad moment leave: a temporary file never renamed into an
        entry (its write-ahead never completed, so its record never began: nothing is lost),
        a group's lock whose entries are all released. Only files no one holds, and
        temporary files older than :data:`STALE_S`."""
        now = time.time()
        for name in names:
            path = self.folder / name
            if name.startswith(".") and name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    if now - path.stat().st_mtime > STALE_S:
                        path.unlink()
            elif name.startswith(".") and name.endswith(".lock") and name != LOCK_NAME:
                if name[1 : -len(".lock")] in staged:
                    continue
                with contextlib.suppress(OSError):
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its writer is gone
                        path.unlink()
                    finally:
                        os.close(fd)

    def _new(self, kind: str, payload: dict[str, Any], suffix: str) -> Entry:
        if kind not in KINDS:
            raise ValueError(f"unknown outbox entry kind {kind!r}")
        self._ready()
        now = time.time_ns()
        name = f"{now:020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}{suffix}"
        return Entry(self.folder / name, kind, now, json_safe(payload))

    def _ready(self) -> None:
        if self._prepare is not None:
            self._prepare()
        self.folder.mkdir(parents=True, exist_ok=True)

    def pending(self, *, staged: bool = False) -> list[Entry]:
        """Every entry, oldest first; unreadable files come back as failed ``corrupt`` entries.
        ``staged``: also those whose local write is not known to be complete (for people:
        they wait too, but only :meth:`orphans` may release them)."""
        return list(self.iter_pending(staged=staged))

    def iter_pending(self, *, staged: bool = False) -> Iterator[Entry]:
        """The entries oldest first, each read only when reached."""
        suffixes = (".json", STAGED) if staged else (".json",)
        try:
            names = sorted(
                n for n in os.listdir(self.folder) if n.endswith(suffixes) and n[0] != "."
            )
        except FileNotFoundError:
            return
        for name in names:
            entry = self.load(self.folder / name)
            if entry is not None:
                yield entry

    def purge(self, run_ids: Iterable[str]) -> int:
        """Remove the waiting writes of these runs (documents, samples, steps, objects), so
        that a deleted run cannot come back when the outbox drains, nor when an orphan's
        local write is completed; returns how many."""
        wanted = set(run_ids)
        removed = 0
        for entry in self.iter_pending():
            if _owner(entry, wanted) in wanted:
                self.remove(entry)
                removed += 1
        for staged in self.orphans():
            with staged:
                for entry in staged.entries:
                    if _owner(entry, wanted) in wanted:
                        self.remove(entry)
                        removed += 1
        return removed

    def count(self) -> int:
        """Entries waiting: released ones and staged ones (being written, or orphans)."""
        try:
            return sum(
                1 for n in os.listdir(self.folder) if n[0] != "." and n.endswith((".json", STAGED))
            )
        except FileNotFoundError:
            return 0

    def load(self, path: Path) -> Entry | None:
        """The entry in ``path`` (None when another process just shipped it)."""
        try:
            data = json.loads(path.read_text("utf-8"))
            return Entry(
                path,
                str(data["kind"]),
                int(data["created_ns"]),
                dict(data["payload"]),
                int(data.get("attempts", 0)),
                data.get("last_error"),
                data.get("last_error_type"),
                int(data.get("version", 1)),
            )
        except FileNotFoundError:
            return None
        except OSError as exc:  # maybe passing (EIO, EACCES): the file stays exactly as it is
            reason = f"cannot read outbox entry {path} ({exc}); it is left untouched"
            log.warning("%s", reason)
            return Entry(path, UNREADABLE, 0, {}, 0, reason, UNREADABLE)
        except (ValueError, KeyError, TypeError) as exc:  # torn or edited: keep its bytes aside
            moved = self._quarantine(path)
            reason = (
                f"corrupt outbox entry ({type(exc).__name__}: {exc}), moved with its bytes to "
                f"{moved}; inspect it, then delete it"
            )
            log.warning("%s", reason)
            return Entry(moved, CORRUPT, 0, {}, 0, reason, CORRUPT)

    def corrupt(self) -> list[Path]:
        """Entries set aside as unparseable (``outbox/corrupt/``), for people to look at."""
        try:
            return sorted((self.folder / CORRUPT).iterdir())
        except FileNotFoundError:
            return []

    def remove(self, entry: Entry) -> None:
        with contextlib.suppress(FileNotFoundError):
            entry.path.unlink()

    def remove_many(self, entries: Sequence[Entry]) -> None:
        """Remove shipped entries; many at once from a few threads (an unlink can wait
        milliseconds on a busy file system's journal: 1,000 one by one took 1.5 s)."""
        if len(entries) < REMOVE_THREADS * 4:
            for entry in entries:
                self.remove(entry)
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(REMOVE_THREADS, thread_name_prefix="outbox-remove") as pool:
            list(pool.map(self.remove, entries))

    def keep(self, entry: Entry, error: BaseException) -> None:
        """Record a failed attempt on the entry (atomically, unless it was shipped meanwhile).
        An entry that could not be read is never rewritten: that would replace its bytes."""
        entry.attempts += 1
        entry.last_error = entry.last_error if entry.kind in (CORRUPT, UNREADABLE) else str(error)
        entry.last_error_type = type(error).__name__
        if entry.kind not in (CORRUPT, UNREADABLE) and entry.path.exists():
            self._write(entry)

    def _quarantine(self, path: Path) -> Path:
        target = self.folder / CORRUPT / path.name
        try:
            target.parent.mkdir(exist_ok=True)
            os.replace(path, target)
        except OSError:
            return path  # cannot move it: it stays where it is, still never rewritten
        return target

    @contextlib.contextmanager
    def locked(self, *, wait: bool) -> Iterator[bool]:
        """Hold the outbox's drain lock; yields False (without waiting) if another holds it.

        The holder writes who it is into the lock file (:meth:`holder` reads it), so a second
        ``warehouse sync`` can say who it waits for."""
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            import fcntl
        except ImportError:  # no flock (Windows): drains may overlap, which stays correct
            yield True
            return
        fd = os.open(self.folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(me).encode(), 0)
            yield True
        finally:
            os.close(fd)

    def holder(self) -> str | None:
        """Who holds the drain lock, for people: ``pid 4242 on host-a since 12:03:01 UTC``."""
        try:
            info = json.loads((self.folder / LOCK_NAME).read_text("utf-8") or "{}")
        except (OSError, ValueError):
            return None
        if not isinstance(info, dict) or "pid" not in info:
            return None
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(info.get("since", 0))))
        return f"pid {info['pid']} on {info.get('host', '?')} since {since}"

    def _write(self, entry: Entry, *, sync_folder: bool = True) -> None:
        atomic_write(entry.path, (entry.to_json() + "\n").encode("utf-8"), sync_folder=sync_folder)


class Staged:
    """Entries staged together under one lock (see :meth:`Outbox.stage`)."""

    def __init__(self, outbox: Outbox, group: str, fd: int, entries: list[Entry]) -> None:
        self.outbox = outbox
        self.group = group
        self.entries = entries
        self._fd: int | None = fd

    def release(self, entries: Sequence[Entry] | None = None) -> list[Entry]:
        """The local write is complete: the entries (default: all) become visible to
        shippers (renamed); the lock goes once none stays staged."""
        released = []
        for entry in self.entries if entries is None else entries:
            target = entry.path.with_name(entry.path.name.split(".", 1)[0] + ".json")
            try:
                os.replace(entry.path, target)
            except FileNotFoundError:
                continue  # purged, or released by another process meanwhile
            entry.path = target
            released.append(entry)
        self.close()
        return released

    def abandon(self) -> None:
        """Nothing was stored locally (a refused record): the entries go."""
        for entry in self.entries:
            self.outbox.remove(entry)
        self.close()

    def close(self) -> None:
        """Unlock, leaving what is still staged to be recovered as an orphan."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            if not any(e.path.exists() and e.staged for e in self.entries):
                (self.outbox.folder / f".{self.group}.lock").unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> Staged:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _owner(entry: Entry, wanted: set[str]) -> str | None:
    """The run an entry writes (None: a deletion, or no run of ``wanted``)."""
    p = entry.payload
    if entry.kind == "run":
        return (p.get("doc") or {}).get("run_id")
    if entry.kind in ("samples", "steps"):
        return p.get("run_id")
    if entry.kind == "object":
        return next((r for r in wanted if f"/{r}/" in str(p.get("key", ""))), None)
    return None


__all__ = ["CORRUPT", "KINDS", "STAGED", "UNREADABLE", "Entry", "Outbox", "Staged", "SyncReport"]
