"""The durable outbox, and the replicator that ships records from it to Elasticsearch and S3.

Every record is written to the local store first (``recorder.py``); when a remote store or
object store is configured, the :class:`Replicator` then

1. appends an outbox entry (``<home>/outbox/<time>-<pid>-<random>.json``: one JSON line,
   written to a temporary file, fsync'd and renamed into place, so a crash leaves the entry
   whole or absent, and 8 processes never touch the same file),
2. tries to ship it now; on success the entry is deleted, on failure it stays with the
   reason and one warning says how to sync,
3. ships older entries first, opportunistically and for a bounded time, on the next call.

``warehouse sync`` calls :meth:`Replicator.drain`. Shipping is idempotent: runs are indexed by
``run_id`` with the entry's creation time as an external version (a late retry never
overwrites a newer copy), samples replace their split, steps are created by ``run_id:seq``,
objects are keyed and compared by sha256. So shipping an entry twice never duplicates a
record, and losing the race between two processes is harmless. Entries hold JSON only
(never pickle); samples are not copied: the entry names the split, whose rows ship from the
local store's Parquet file (``samples/<run_id>/<split>.parquet``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.errors import (
    BackendUnavailable,
    ConfigurationError,
    InvalidRecord,
    ObjectStoreUnavailable,
    StoreUnavailable,
    WarehouseError,
)

if TYPE_CHECKING:
    from warehouse.objects.base import ObjectStore
    from warehouse.settings import Settings
    from warehouse.stores.elastic import ElasticStore

log = logging.getLogger(__name__)

KINDS = ("run", "samples", "steps", "object")
CORRUPT = "corrupt"  # an entry file that does not parse (also its folder under outbox/)
UNREADABLE = "unreadable"  # an entry file that could not be read this time
_OPPORTUNISTIC_BUDGET_S = 2.0
# servers that did not answer within PUBLISH_WAIT_S, by URL: (down until, error), shared by
# every replicator of the process, so each new run does not wait on the same hung server again
_HUNG: dict[str, tuple[float, WarehouseError]] = {}
PUBLISH_WAIT_S = 5.0
"""The longest a record's shipping may hold the caller (the training thread); then it waits."""
_DOWN_FOR_S = 30.0  # after "unreachable", publish only queues for this long
_WARN_EVERY_S = 60.0
_SAMPLE_BATCH_ROWS = 16_384


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

    @property
    def name(self) -> str:
        return self.path.name

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
        if self.kind in (CORRUPT, UNREADABLE):
            return f"{self.kind} entry {self.path.name}"
        return f"object {p.get('key')}"

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": 1,
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

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def add(self, kind: str, payload: dict[str, Any]) -> Entry:
        """Durably store a new entry (fsync'd file, then fsync'd folder) and return it."""
        if kind not in KINDS:
            raise ValueError(f"unknown outbox entry kind {kind!r}")
        self.folder.mkdir(parents=True, exist_ok=True)
        now = time.time_ns()
        name = f"{now:020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
        entry = Entry(self.folder / name, kind, now, _json_safe(payload))
        self._write(entry)
        return entry

    def pending(self) -> list[Entry]:
        """Every entry, oldest first; unreadable files come back as failed ``corrupt`` entries."""
        return list(self.iter_pending())

    def iter_pending(self) -> Iterator[Entry]:
        """The entries oldest first, each read only when reached."""
        try:
            names = sorted(
                n for n in os.listdir(self.folder) if n.endswith(".json") and n[0] != "."
            )
        except FileNotFoundError:
            return
        for name in names:
            entry = self.load(self.folder / name)
            if entry is not None:
                yield entry

    def count(self) -> int:
        try:
            return sum(1 for n in os.listdir(self.folder) if n.endswith(".json") and n[0] != ".")
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
        """Hold the outbox's drain lock; yields False (without waiting) if another holds it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            import fcntl
        except ImportError:  # no flock (Windows): drains may overlap, which stays correct
            yield True
            return
        fd = os.open(self.folder / ".drain.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)

    def _write(self, entry: Entry) -> None:
        tmp = self.folder / f".{entry.name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as out:
                out.write(entry.to_json() + "\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, entry.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        _fsync_dir(self.folder)


class Replicator:
    """Ships locally written records to Elasticsearch and S3 through the outbox."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: ElasticStore | None = None,
        objects: ObjectStore | None = None,
    ) -> None:
        self.settings = settings
        self.home = settings.resolved_home
        self.outbox = Outbox(self.home / "outbox")
        self._store = store
        self._objects = objects
        self._lock = threading.Lock()
        self._down_until: dict[str, float] = {}
        self._warned_at: dict[str, float] = {}
        self._last_error: dict[str, WarehouseError] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> Replicator | None:
        """The replicator for ``settings``; None when records stay local (no ES, no S3)."""
        if settings.store_engine == "local" and not settings.s3_url:
            return None
        return cls(settings)

    # the recorder's calls -----------------------------------------------------------------
    @property
    def ships_records(self) -> bool:
        """Whether records go to Elasticsearch (with S3 alone, only objects are shipped)."""
        return self.settings.store_engine == "elasticsearch"

    def publish_run(self, doc: dict[str, Any]) -> None:
        """Queue and ship a run document already written to the local store."""
        if self.ships_records:
            self._publish("run", {"doc": doc})

    def publish_samples(self, run_id: str, experiment: str, split: str) -> None:
        """Queue and ship a split whose rows are in the local store."""
        if self.ships_records:
            self._publish("samples", {"run_id": run_id, "experiment": experiment, "split": split})

    def publish_steps(self, run_id: str, experiment: str, steps: list[dict[str, Any]]) -> None:
        """Queue and ship steps already appended to the local steps file."""
        if self.ships_records:
            self._publish("steps", {"run_id": run_id, "experiment": experiment, "steps": steps})

    def publish_object(
        self, key: str, local_path: Path, content_type: str | None, sha256: str
    ) -> None:
        """Queue and upload an object already stored in the local objects folder."""
        self._publish(
            "object",
            {"key": key, "path": str(local_path), "content_type": content_type, "sha256": sha256},
        )

    def close(self) -> None:
        """Close the connections (they reopen if the replicator is used again)."""
        with self._lock:
            store, objects, self._store, self._objects = self._store, self._objects, None, None
        for backend in (store, objects):
            if backend is not None:
                with contextlib.suppress(Exception):
                    backend.close()

    # draining -----------------------------------------------------------------------------
    def drain(self, progress: Callable[[int, int], None] | None = None) -> SyncReport:
        """Ship every waiting entry, oldest first (``warehouse sync``); never raises per entry.

        After a server is found unreachable, its remaining entries are not tried again in
        this drain (they are reported with the same reason). ``progress(done, total)`` is
        called after each entry.
        """
        report = SyncReport()
        with self.outbox.locked(wait=True):
            entries = self.outbox.pending()
            down: dict[str, BaseException] = {}
            for done, entry in enumerate(entries, 1):
                target = _target(entry.kind)
                if target in down:
                    self.outbox.keep(entry, down[target])
                    report.failed.append((entry, str(down[target])))
                else:
                    error = self._try(entry)
                    if error is None:
                        report.shipped += 1
                    else:
                        report.failed.append((entry, str(error)))
                        if isinstance(error, BackendUnavailable):
                            down[target] = error
                if progress is not None:
                    progress(done, len(entries))
            seen = {e.path for e, _ in report.failed}
            for path in self.outbox.corrupt():
                if path not in seen:
                    reason = f"corrupt outbox entry set aside in {path}; inspect it, then delete it"
                    report.failed.append((Entry(path, CORRUPT, 0, {}, 0, reason, CORRUPT), reason))
        if report.shipped:
            self._down_until.clear()
        return report

    def _drain_some(self, budget_s: float) -> None:
        """Ship older entries for at most ``budget_s`` (skipped if another process drains)."""
        deadline = time.monotonic() + budget_s
        with self.outbox.locked(wait=False) as mine:
            if not mine:
                return
            for entry in self.outbox.iter_pending():
                if time.monotonic() > deadline:
                    return
                if entry.kind in (CORRUPT, UNREADABLE) or entry.last_error_type == "InvalidRecord":
                    continue  # needs a person: `warehouse sync` reports it
                if self._is_down(_target(entry.kind)):
                    continue
                left = deadline - time.monotonic()
                error = self._try_within(entry, max(left, 0.05))
                if isinstance(error, BackendUnavailable):
                    return

    # internals ----------------------------------------------------------------------------
    def _publish(self, kind: str, payload: dict[str, Any]) -> None:
        entry = self.outbox.add(kind, payload)
        target = _target(kind)
        if not self._is_down(target) and self.outbox.count() > 1:
            self._drain_some(_OPPORTUNISTIC_BUDGET_S)  # older entries first
            if not entry.path.exists():
                return  # shipped by that drain
        if self._is_down(target):
            self._warn(target, None)
            self._raise_if_strict(target, self._last_error.get(target))
            return
        error = self._try_within(entry, PUBLISH_WAIT_S)
        if error is not None:
            self._warn(target, error)
            self._raise_if_strict(target, error)

    def _try_within(self, entry: Entry, wait_s: float) -> BaseException | None:
        """:meth:`_try` on a helper thread, waited for at most ``wait_s``: a server that
        accepts connections but never answers cannot hold the training thread for the
        client's timeouts and retries (40 s and more). On time-out the entry stays in the
        outbox (the attempt may still finish: shipping twice is harmless) and the target
        counts as down, so the next records only queue."""
        outcome: list[BaseException | None] = []
        done = threading.Event()

        def attempt() -> None:
            try:
                outcome.append(self._try(entry))
            finally:
                done.set()

        threading.Thread(target=attempt, name="warehouse-ship", daemon=True).start()
        if done.wait(wait_s):
            return outcome[0] if outcome else None
        target = _target(entry.kind)
        cls = ObjectStoreUnavailable if target == "S3" else StoreUnavailable
        error = cls(
            f"{target} did not answer within {wait_s:.0f} s; the record waits in the outbox "
            f"({self.outbox.folder}); run 'warehouse sync' when it answers again"
        )
        self._down_until[target] = time.monotonic() + _DOWN_FOR_S
        self._last_error[target] = error
        _HUNG[self._destination(target)] = (time.monotonic() + _DOWN_FOR_S, error)
        return error

    def _destination(self, target: str) -> str:
        return (self.settings.s3_url if target == "S3" else self.settings.es_url) or target

    def _try(self, entry: Entry) -> BaseException | None:
        """Ship one entry; on success delete it, on failure keep it with the reason."""
        try:
            self._ship(entry)
        except Exception as exc:
            error = exc if isinstance(exc, WarehouseError) else _unexpected(entry, exc)
            if isinstance(error, BackendUnavailable):
                self._down_until[_target(entry.kind)] = time.monotonic() + _DOWN_FOR_S
                self._last_error[_target(entry.kind)] = error
            self.outbox.keep(entry, error)
            return error
        self._down_until.pop(_target(entry.kind), None)
        _HUNG.pop(self._destination(_target(entry.kind)), None)
        self.outbox.remove(entry)
        return None

    def _ship(self, entry: Entry) -> None:
        p = entry.payload
        if entry.kind == "run":
            self._elastic().write_runs([p["doc"]], versions=[entry.created_ns])
        elif entry.kind == "samples":
            path = self.home / "samples" / p["run_id"] / f"{p['split']}.parquet"
            self._elastic().write_samples(
                p["run_id"], p["experiment"], p["split"], _parquet_batches(path)
            )
        elif entry.kind == "steps":
            self._elastic().write_steps(p["run_id"], p["experiment"], p["steps"])
        elif entry.kind == "object":
            self._object_store().put(
                p["key"], Path(p["path"]), content_type=p.get("content_type"), sha256=p["sha256"]
            )
        else:
            raise InvalidRecord(entry.last_error or f"outbox entry {entry.path} is unreadable")

    def _elastic(self) -> ElasticStore:
        with self._lock:
            if self._store is None:
                if self.settings.store_engine != "elasticsearch":
                    raise ConfigurationError(
                        "records wait for Elasticsearch but no Elasticsearch is configured; "
                        "set WAREHOUSE_ES_URL and run 'warehouse sync' again"
                    )
                from warehouse.stores.elastic import ElasticStore

                self._store = ElasticStore.from_settings(self.settings)
            return self._store

    def _object_store(self) -> ObjectStore:
        with self._lock:
            if self._objects is None:
                if not self.settings.s3_url:
                    raise ConfigurationError(
                        "files wait for S3 but no S3 is configured; set WAREHOUSE_S3_URL and "
                        "run 'warehouse sync' again"
                    )
                from warehouse.objects.s3 import S3ObjectStore

                self._objects = S3ObjectStore.from_settings(self.settings)
            return self._objects

    def _is_down(self, target: str) -> bool:
        now = time.monotonic()
        hung = _HUNG.get(self._destination(target))
        if hung is not None and now < hung[0] and now >= self._down_until.get(target, 0.0):
            # another recorder of this process found it hung a moment ago: do not wait again
            self._down_until[target], self._last_error[target] = hung
        return now < self._down_until.get(target, 0.0)

    def _warn(self, target: str, error: BaseException | None) -> None:
        """One warning per failure; the same reason again within a minute only at debug level
        (a server that stays down, or refuses every step batch, does not flood the log)."""
        if error is None:
            error = self._last_error.get(target)
        message = str(error) if error is not None else f"{target} is unreachable"
        now = time.monotonic()
        waiting = self.outbox.count()
        if now - self._warned_at.get(message, -_WARN_EVERY_S) < _WARN_EVERY_S:
            log.debug("%s (%d record(s) in the outbox)", message, waiting)
            return
        self._warned_at[message] = now
        log.warning(
            "%s — %d record(s) wait in %s; run 'warehouse sync' to ship them",
            message,
            waiting,
            self.outbox.folder,
        )

    def _raise_if_strict(self, target: str, error: BaseException | None) -> None:
        if not self.settings.strict:
            return
        if isinstance(error, WarehouseError):
            raise error
        cls = ObjectStoreUnavailable if target == "S3" else StoreUnavailable
        raise cls(
            f"{target} is unreachable; the record is kept in the outbox ({self.outbox.folder}); "
            "run 'warehouse sync' when it is back"
        )


def _target(kind: str) -> str:
    return "S3" if kind == "object" else "Elasticsearch"


def _unexpected(entry: Entry, exc: Exception) -> WarehouseError:
    log.debug("unexpected error shipping %s", entry.path, exc_info=exc)
    cls = ObjectStoreUnavailable if entry.kind == "object" else StoreUnavailable
    return cls(f"shipping {entry.describe()} failed: {type(exc).__name__}: {exc}")


def _parquet_batches(path: Path) -> Iterator[Any]:
    """The rows of a local sample file, batch by batch (NotFound-like error if gone)."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise InvalidRecord(
            f"the local sample file {path} is gone, so its split cannot be shipped; record the "
            "samples again or delete this outbox entry"
        )
    yield from pq.ParquetFile(path).iter_batches(batch_size=_SAMPLE_BATCH_ROWS)


def _json_safe(value: Any) -> Any:
    """Payloads as JSON holds them: non-finite floats become None, datetimes ISO strings."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.isoformat().replace("+00:00", "Z")
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a folder be fsync'd
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = ["Entry", "Outbox", "Replicator", "SyncReport"]
