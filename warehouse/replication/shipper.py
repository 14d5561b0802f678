"""The shipper: outbox entries go to the remote store and object store, through their contracts.

The one place where retries and outages are handled:

1. a write adds an outbox entry first (fsync'd: the *write-ahead*), then writes the local copy
   (:class:`~warehouse.replication.store.ReplicatingStore`,
   :class:`~warehouse.replication.objects.ReplicatingObjectStore`), then calls
   :meth:`Shipper.publish`;
2. ``publish`` ships older waiting entries first (for a bounded time), then the new ones, each
   attempt on a helper thread waited for at most :data:`PUBLISH_WAIT_S`: a server that accepts
   connections but never answers holds the caller (the training thread) seconds, not minutes;
3. a server found down or hung is left alone for :data:`_DOWN_FOR_S` (and remembered by URL
   for the whole process), so later records only queue, with one warning a minute;
4. ``warehouse sync`` calls :meth:`Shipper.drain`: every entry, oldest first, exactly as
   ``publish`` ships them. A crash between the entry and the local write is repaired here:
   run and step entries are applied to the local store too (both writes are idempotent).

Shipping is idempotent: runs carry a version (``updated_at``) and an older copy never replaces
a newer one, samples replace their split, steps are keyed ``run_id:seq``, objects are compared
by sha256. Shipping an entry twice, or two processes shipping the same entry, stores it once.
The remotes are used only through the :class:`~warehouse.stores.base.Store` and
:class:`~warehouse.objects.base.ObjectStore` protocols.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from warehouse.errors import (
    BackendUnavailable,
    InvalidRecord,
    NotFound,
    ObjectStoreUnavailable,
    StoreUnavailable,
    WarehouseError,
)
from warehouse.replication.outbox import CORRUPT, Entry, Outbox, SyncReport

if TYPE_CHECKING:
    from warehouse.objects.base import ObjectStore, PutItem
    from warehouse.objects.local import LocalObjectStore
    from warehouse.stores.base import Store
    from warehouse.stores.local import LocalStore

log = logging.getLogger(__name__)

PUBLISH_WAIT_S = 5.0
"""The longest a record's shipping may hold the caller (the training thread); then it waits."""
_DOWN_FOR_S = 30.0  # after "unreachable", publish only queues for this long
_WARN_EVERY_S = 60.0
_OPPORTUNISTIC_BUDGET_S = 2.0
_OBJECT_BATCH = 256  # object entries shipped together (concurrently) by a drain
# servers that did not answer within PUBLISH_WAIT_S, by URL: (down until, error), shared by
# every shipper of the process, so each new run does not wait on the same hung server again
_HUNG: dict[str, tuple[float, WarehouseError]] = {}


@dataclass(frozen=True)
class Remote:
    """One remote side: how to open it (lazily), what to call it, where it is."""

    label: str  # "Elasticsearch", "S3": for messages
    url: str  # where it is (no credentials): the key of the process-wide hung memory
    open: Callable[[], Store] | Callable[[], ObjectStore]


def target_of(kind: str) -> str:
    """Which remote an entry kind ships to: ``objects`` or ``store``."""
    return "objects" if kind in ("object", "delete_objects") else "store"


class Shipper:
    """Ships the entries of one outbox to a remote store and/or a remote object store."""

    def __init__(
        self,
        outbox: Outbox,
        local: LocalStore,
        local_objects: LocalObjectStore,
        *,
        store: Remote | None = None,
        objects: Remote | None = None,
        strict: bool = False,
    ) -> None:
        self.outbox = outbox
        self.local = local
        self.local_objects = local_objects
        self.remotes = {name: r for name, r in (("store", store), ("objects", objects)) if r}
        self.strict = strict
        self._opened: dict[str, Store | ObjectStore] = {}
        self._lock = threading.Lock()
        self._down_until: dict[str, float] = {}
        self._warned_at: dict[str, float] = {}
        self._last_error: dict[str, WarehouseError] = {}
        self._local_seq: dict[str, int] = {}  # during a drain: the last step seq stored locally

    # the writers' call ------------------------------------------------------------------------
    def ships(self, kind: str) -> bool:
        """Whether entries of ``kind`` have a remote to go to."""
        return target_of(kind) in self.remotes

    def remote(self, target: str) -> Store | ObjectStore:
        """The remote store (``store``) or object store (``objects``), opened on first use."""
        return self._open(target)

    def publish(self, entries: Sequence[Entry]) -> None:
        """Ship entries just added (their local write done): older waiting ones first, then
        these, within bounded time; what cannot ship stays in the outbox with one warning."""
        if not entries:
            return
        target = target_of(entries[0].kind)
        if not self._is_down(target) and self.outbox.count() > len(entries):
            self._drain_some(_OPPORTUNISTIC_BUDGET_S)  # older entries first
            entries = [e for e in entries if e.path.exists()]  # not shipped by that drain
            if not entries:
                return
        if self._is_down(target):
            self._warn(target, None)
            self._raise_if_strict(target, self._last_error.get(target))
            return
        error = self._try_within(entries, PUBLISH_WAIT_S)
        if error is not None:
            self._warn(target, error)
            self._raise_if_strict(target, error)

    # warehouse sync ---------------------------------------------------------------------------
    def drain(
        self, progress: Callable[[int, int], None] | None = None, *, wait: bool = True
    ) -> SyncReport | None:
        """Ship every waiting entry, oldest first; never raises per entry.

        Returns None (without waiting) when ``wait`` is false and another process is draining.
        After a remote is found unreachable its remaining entries are not tried again in this
        drain (they are reported with the same reason). ``progress(done, total)`` is called
        as entries are done."""
        report = SyncReport()
        with self.outbox.locked(wait=wait) as mine:
            if not mine:
                return None
            entries = self.outbox.pending()
            self._local_seq.clear()
            down: dict[str, BaseException] = {}
            done = 0
            i = 0
            while i < len(entries):
                group = _next_group(entries, i)
                i += len(group)
                target = target_of(group[0].kind)
                problem = group[0].problem
                if problem is not None:  # no server can take it: its own reason, untouched
                    report.failed.append((group[0], problem))
                elif target in down:
                    for entry in group:
                        skipped = self._not_tried(target, entry)
                        self.outbox.keep(entry, skipped)
                        report.failed.append((entry, str(skipped)))
                else:
                    error = self._try(group, replay=True)
                    if error is None:
                        report.shipped += len(group)
                    else:  # each entry with its own reason (the one kept on it)
                        report.failed.extend(
                            (e, e.last_error or str(error)) for e in group if e.path.exists()
                        )
                        report.shipped += sum(1 for e in group if not e.path.exists())
                        if isinstance(error, BackendUnavailable):
                            down[target] = error
                done += len(group)
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

    def close(self) -> None:
        """Close the remote connections (they reopen if the shipper is used again)."""
        with self._lock:
            opened, self._opened = self._opened, {}
        for backend in opened.values():
            with contextlib.suppress(Exception):
                backend.close()

    # shipping ---------------------------------------------------------------------------------
    def _drain_some(self, budget_s: float) -> None:
        """Ship older entries for at most ``budget_s`` (skipped if another process drains)."""
        deadline = time.monotonic() + budget_s
        with self.outbox.locked(wait=False) as mine:
            if not mine:
                return
            for entry in self.outbox.iter_pending():
                if time.monotonic() > deadline:
                    return
                if entry.problem is not None or entry.last_error_type == "InvalidRecord":
                    continue  # needs a person: `warehouse sync` reports it
                if self._is_down(target_of(entry.kind)):
                    continue
                left = deadline - time.monotonic()
                if isinstance(self._try_within([entry], max(left, 0.05)), BackendUnavailable):
                    return

    def _try_within(self, entries: Sequence[Entry], wait_s: float) -> BaseException | None:
        """:meth:`_try` on a helper thread, waited for at most ``wait_s``. On time-out the
        entries stay in the outbox (the attempt may still finish: shipping twice is harmless)
        and the remote counts as down, so the next records only queue."""
        outcome: list[BaseException | None] = []
        done = threading.Event()

        def attempt() -> None:
            try:
                outcome.append(self._try(entries, replay=False))
            finally:
                done.set()

        threading.Thread(target=attempt, name="warehouse-ship", daemon=True).start()
        if done.wait(wait_s):
            return outcome[0] if outcome else None
        target = target_of(entries[0].kind)
        remote = self.remotes[target]
        cls = ObjectStoreUnavailable if target == "objects" else StoreUnavailable
        error = cls(
            f"{remote.label} did not answer within {wait_s:.0f} s; the record waits in the "
            f"outbox ({self.outbox.folder}); run 'warehouse sync' when it answers again"
        )
        self._mark_down(target, error)
        _HUNG[remote.url] = (time.monotonic() + _DOWN_FOR_S, error)
        return error

    def _try(self, entries: Sequence[Entry], *, replay: bool) -> BaseException | None:
        """Ship entries of one kind; on success delete them, on failure keep them with the
        reason (and the remote counts as down when it is unreachable)."""
        target = target_of(entries[0].kind)
        try:
            failures = self._ship(entries, replay)
        except Exception as exc:
            error = exc if isinstance(exc, WarehouseError) else self._unexpected(entries, exc)
            failures = {entry.path: error for entry in entries}
        if failures:
            first = next(iter(failures.values()))
            if isinstance(first, BackendUnavailable):
                self._mark_down(target, first)
                if getattr(first, "hung", False) and target in self.remotes:
                    # the client's own time-out: as hung as when _try_within gives up
                    _HUNG[self.remotes[target].url] = (time.monotonic() + _DOWN_FOR_S, first)
            for entry in entries:
                if entry.path in failures and entry.path.exists():
                    self.outbox.keep(entry, failures[entry.path])
                elif entry.path not in failures:
                    self.outbox.remove(entry)
            return first
        self._down_until.pop(target, None)
        _HUNG.pop(self.remotes[target].url if target in self.remotes else target, None)
        for entry in entries:
            self.outbox.remove(entry)
        return None

    def _ship(self, entries: Sequence[Entry], replay: bool) -> dict[Path, BaseException]:
        """Ship the entries; the ones that failed, each with its own error (a failure that
        concerns them all is raised)."""
        kind = entries[0].kind
        if kind == "object":
            return self._ship_objects(entries)
        problem = entries[0].problem
        if problem is not None:
            raise InvalidRecord(problem)
        if kind == "delete_objects":
            for entry in entries:
                self.local_objects.delete_prefix(entry.payload["prefix"])  # a replay: idempotent
                self._remote_objects().delete_prefix(entry.payload["prefix"])
                self.outbox.remove(entry)
            return {}
        store = self._remote_store() if "store" in self.remotes else None
        for entry in entries:
            p = entry.payload
            if kind == "run":
                if replay:  # the local write may have failed, or been cut short by a crash
                    self.local.write_runs([p["doc"]])
                if store is not None:
                    store.write_runs([p["doc"]])
            elif kind == "samples":
                if store is not None:
                    self._ship_samples(store, entry)
            elif kind == "delete":
                if replay:
                    self.local.delete_runs(p["run_ids"])
                if store is not None:
                    store.delete_runs(p["run_ids"])
            elif kind == "steps":
                if replay:  # the local append may have failed, or been cut short by a crash
                    self._replay_steps(p["run_id"], p["experiment"], p["steps"])
                if store is not None:
                    store.write_steps(p["run_id"], p["experiment"], p["steps"])
            self.outbox.remove(entry)
        return {}

    def _replay_steps(self, run_id: str, experiment: str, steps: list[dict[str, Any]]) -> None:
        """Append to the local store the steps it lacks (seq numbers grow with each append)."""
        last = self._local_seq.get(run_id)
        if last is None:
            last = self._local_seq[run_id] = self.local.last_seq(run_id)
        missing = [s for s in steps if isinstance(s.get("seq"), int) and int(s["seq"]) > last]
        if missing:
            self.local.write_steps(run_id, experiment, missing)
            self._local_seq[run_id] = max(last, _max_seq(missing))

    def _ship_samples(self, store: Store, entry: Entry) -> None:
        p = entry.payload
        try:
            batches = self.local.sample_batches(p["run_id"], p["split"])
        except NotFound:
            # the process stopped before the local write (the entry goes first): there is
            # nothing to ship, and the local store has nothing either
            log.info("%s were never written locally; nothing to ship", entry.describe())
            return
        store.write_samples(p["run_id"], p["experiment"], p["split"], batches)

    def _ship_objects(self, entries: Sequence[Entry]) -> dict[Path, BaseException]:
        """Upload the entries' objects together; when that fails, one by one, so that each
        entry keeps the reason of its own object (never another run's)."""
        items: list[tuple[Entry, PutItem]] = []
        for entry in entries:
            p = entry.payload
            path = self.local_objects.path_of(p["key"])
            if not path.is_file():
                log.info("object %s was never stored locally; nothing to ship", p["key"])
                self.outbox.remove(entry)
                continue
            items.append((entry, (p["key"], path, p.get("content_type"), p["sha256"])))
        if not items:
            return {}
        remote = self._remote_objects()
        try:
            remote.put_many([item for _, item in items])
            return {}
        except Exception:
            if len(items) == 1:
                raise
        failures: dict[Path, BaseException] = {}
        unreachable = False
        for entry, (key, source, content_type, sha256) in items:
            if unreachable:
                failures[entry.path] = self._not_tried("objects", entry)
                continue
            try:
                remote.put(key, source, content_type=content_type, sha256=sha256)
            except Exception as exc:
                error = exc if isinstance(exc, WarehouseError) else self._unexpected([entry], exc)
                failures[entry.path] = error
                unreachable = isinstance(error, BackendUnavailable)
        return failures

    def _not_tried(self, target: str, entry: Entry) -> BackendUnavailable:
        """The reason kept on an entry not tried because its server failed on another one."""
        remote = self.remotes.get(target)
        where = f"{remote.label} at {remote.url}" if remote is not None else target
        cls = ObjectStoreUnavailable if target == "objects" else StoreUnavailable
        return cls(
            f"{entry.describe()} was not tried: {where} could not be reached earlier in this "
            "sync; run 'warehouse sync' again once it answers"
        )

    # remotes and their health -----------------------------------------------------------------
    def _remote_store(self) -> Store:
        return cast("Store", self._open("store"))

    def _remote_objects(self) -> ObjectStore:
        return cast("ObjectStore", self._open("objects"))

    def _open(self, target: str) -> Store | ObjectStore:
        with self._lock:
            backend = self._opened.get(target)
            if backend is None:
                remote = self.remotes.get(target)
                if remote is None:
                    from warehouse.errors import ConfigurationError

                    what = "files wait for S3" if target == "objects" else "records wait for"
                    raise ConfigurationError(
                        f"{what} {'' if target == 'objects' else 'Elasticsearch '}but none is "
                        "configured; set WAREHOUSE_ES_URL / WAREHOUSE_S3_URL and run "
                        "'warehouse sync' again"
                    )
                backend = self._opened[target] = remote.open()
            return backend

    def _mark_down(self, target: str, error: WarehouseError) -> None:
        self._down_until[target] = time.monotonic() + _DOWN_FOR_S
        self._last_error[target] = error

    def _is_down(self, target: str) -> bool:
        now = time.monotonic()
        remote = self.remotes.get(target)
        hung = _HUNG.get(remote.url) if remote is not None else None
        if hung is not None and now < hung[0] and now >= self._down_until.get(target, 0.0):
            # another shipper of this process found it hung a moment ago: do not wait again
            self._down_until[target], self._last_error[target] = hung
        return now < self._down_until.get(target, 0.0)

    def _warn(self, target: str, error: BaseException | None) -> None:
        """One warning per failure; the same reason again within a minute only at debug level
        (a server that stays down, or refuses every step batch, does not flood the log)."""
        if error is None:
            error = self._last_error.get(target)
        label = self.remotes[target].label if target in self.remotes else target
        message = str(error) if error is not None else f"{label} is unreachable"
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
        # An upload waiting for S3 is no failure even in strict mode: the bytes are in the
        # local object folder and the outbox. Raising would fail the training step that
        # logged them and cost the run its metrics (issue 14, item 8).
        if not self.strict or target == "objects":
            return
        if isinstance(error, WarehouseError):
            raise error
        cls = ObjectStoreUnavailable if target == "objects" else StoreUnavailable
        label = self.remotes[target].label if target in self.remotes else target
        raise cls(
            f"{label} is unreachable; the record is kept in the outbox ({self.outbox.folder}); "
            "run 'warehouse sync' when it is back"
        )

    def _unexpected(self, entries: Sequence[Entry], exc: Exception) -> WarehouseError:
        log.debug("unexpected error shipping %s", entries[0].path, exc_info=exc)
        cls = ObjectStoreUnavailable if entries[0].kind == "object" else StoreUnavailable
        return cls(f"shipping {entries[0].describe()} failed: {type(exc).__name__}: {exc}")


def _next_group(entries: Sequence[Entry], start: int) -> list[Entry]:
    """The entries shipped together from ``start``: a run of object entries (uploaded
    concurrently), else one entry."""
    if entries[start].kind != "object":
        return [entries[start]]
    end = start
    while end < len(entries) and entries[end].kind == "object" and end - start < _OBJECT_BATCH:
        end += 1
    return list(entries[start:end])


def _max_seq(steps: Sequence[dict[str, Any]]) -> int:
    return max((int(s["seq"]) for s in steps if isinstance(s.get("seq"), int)), default=-1)


__all__ = ["PUBLISH_WAIT_S", "Remote", "Shipper", "target_of"]
