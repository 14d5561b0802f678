"""The shipper: outbox entries go to the remote store and object store, through their contracts.

The one place where retries and outages are handled:

1. a write stages an outbox entry first (fsync'd: the *write-ahead*, invisible to shippers),
   writes the local copy, releases the entry, then calls :meth:`Shipper.publish`
   (:class:`~warehouse.replication.store.ReplicatingStore`,
   :class:`~warehouse.replication.objects.ReplicatingObjectStore`);
2. ``publish`` ships older waiting entries first (for a bounded time), then the new ones, each
   attempt on a helper thread waited for at most :data:`PUBLISH_WAIT_S`: a server that accepts
   connections but never answers holds the caller (the training thread) seconds, not minutes;
3. a server found down or hung is left alone for a while (and remembered by URL for the whole
   process), so later records only queue, with one warning a minute;
4. ``warehouse sync`` calls :meth:`Shipper.drain`: every entry, oldest first, exactly as
   ``publish`` ships them.

**Nothing ships before its local write is complete.** Entries become visible only once
written locally; an entry staged by a process that died (an *orphan*) is first written
locally from the entry by whoever ships next (:meth:`Shipper.recover`; both the local run
write and the step append are idempotent), and only then released and shipped.

Shipping is idempotent: runs carry a version (``updated_at``) and an older copy never replaces
a newer one, samples replace their split, steps are keyed ``run_id:seq``, objects are compared
by sha256. Shipping an entry twice, or two processes shipping the same entry, stores it once.
An entry names the contract method it is replayed through (:data:`METHODS`); the remotes and
the local store are used only through the :class:`~warehouse.stores.base.Store` and
:class:`~warehouse.objects.base.ObjectStore` protocols.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.errors import (
    BackendUnavailable,
    InvalidRecord,
    NotFound,
    StoreUnavailable,
    WarehouseError,
)
from warehouse.objects.local import sha256_of
from warehouse.replication.outbox import CORRUPT, Entry, Outbox, SyncReport
from warehouse.replication.remotes import Remote, Remotes, target_of, unavailable
from warehouse.stores.base import StepRange

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.objects.base import ObjectStore, PutItem
    from warehouse.objects.local import LocalObjectStore
    from warehouse.stores.base import Store

log = logging.getLogger(__name__)

PUBLISH_WAIT_S = 5.0
"""The longest a record's shipping may hold the caller (the training thread); then it waits."""
_OPPORTUNISTIC_BUDGET_S = 2.0
_OBJECT_BATCH = 1024  # object entries shipped together (one listing, concurrent puts)

METHODS = {
    "run": "write_runs",
    "samples": "write_samples",
    "steps": "write_steps",
    "delete": "delete_runs",
    "object": "put",
    "delete_objects": "delete_prefix",
}
"""The contract method (of :class:`~warehouse.stores.base.Store` or
:class:`~warehouse.objects.base.ObjectStore`) each kind of entry is replayed through."""


class Shipper:
    """Ships the entries of one outbox to a remote store and/or a remote object store."""

    def __init__(
        self,
        outbox: Outbox,
        local: Store,
        local_objects: LocalObjectStore,
        *,
        store: Remote | None = None,
        objects: Remote | None = None,
        strict: bool = False,
    ) -> None:
        self.outbox = outbox
        self.local = local  # where an entry's local write is completed (the contract only)
        self.local_objects = local_objects
        remotes = {name: r for name, r in (("store", store), ("objects", objects)) if r}
        self.health = Remotes(remotes, outbox, strict=strict)
        self._local_seq: dict[str, int] = {}  # during a drain: the last step seq stored locally

    @property
    def remotes(self) -> dict[str, Remote]:
        return self.health.remotes

    @property
    def strict(self) -> bool:
        return self.health.strict

    # the writers' call ------------------------------------------------------------------------
    def ships(self, kind: str) -> bool:
        """Whether entries of ``kind`` have a remote to go to."""
        return target_of(kind) in self.remotes

    def remote(self, target: str) -> Store | ObjectStore:
        """The remote store (``store``) or object store (``objects``), opened on first use."""
        return self.health.open(target)

    def publish(self, entries: Sequence[Entry]) -> None:
        """Ship entries just released (their local write done): older waiting ones first,
        then these, within bounded time; what cannot ship stays in the outbox with one
        warning."""
        if not entries:
            return
        target = target_of(entries[0].kind)
        if not self.health.is_down(target) and self.outbox.count() > len(entries):
            self._drain_some(_OPPORTUNISTIC_BUDGET_S)  # older entries first
            entries = [e for e in entries if e.path.exists()]  # not shipped by that drain
            if not entries:
                return
        if self.health.is_down(target):
            self.health.warn(target, None)
            self.health.raise_if_strict(target, self.health.last_error.get(target))
            return
        error = self._try_within(entries, PUBLISH_WAIT_S)
        if error is not None:
            self.health.warn(target, error)
            self.health.raise_if_strict(target, error)

    # warehouse sync ---------------------------------------------------------------------------
    def drain(
        self, progress: Callable[[int, int], None] | None = None, *, wait: bool = True
    ) -> SyncReport | None:
        """Complete the local writes of orphaned entries, then ship every waiting entry,
        oldest first; never raises per entry.

        Returns None (without waiting) when ``wait`` is false and another process is draining.
        After a remote is found unreachable its remaining entries are not tried again in this
        drain (they are reported with the same reason). ``progress(done, total)`` is called
        as entries are done."""
        report = SyncReport()
        with self.outbox.locked(wait=wait) as mine:
            if not mine:
                return None
            self._local_seq.clear()
            report.failed.extend(self.recover())
            entries = self.outbox.pending()
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
                elif target not in self.remotes and not group[0].needs_local:
                    self.outbox.remove_many(group)  # written locally; nowhere else to go
                    report.shipped += len(group)
                elif target in down:
                    for entry in group:
                        skipped = self.health.not_tried(target, entry)
                        self.outbox.keep(entry, skipped)
                        report.failed.append((entry, str(skipped)))
                else:
                    error = self._try(group)
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
            self.health.clear()
        return report

    def recover(self) -> list[tuple[Entry, str]]:
        """Orphans (entries staged by a writer that died, or whose local write failed):
        complete their local write from the entry, then release them for shipping. Call it
        holding the drain lock. Returns the entries whose local write failed again."""
        failed: list[tuple[Entry, str]] = []
        for staged in self.outbox.orphans():
            with staged:
                written = []
                for entry in staged.entries:
                    try:
                        if self._write_local(entry):
                            written.append(entry)
                        else:
                            self.outbox.remove(entry)
                    except WarehouseError as exc:  # the local store still cannot take it
                        self.outbox.keep(entry, exc)
                        failed.append((entry, str(exc)))
                staged.release(written)
        return failed

    def close(self) -> None:
        """Close the remote connections (they reopen if the shipper is used again)."""
        self.health.close()

    # shipping ---------------------------------------------------------------------------------
    def _drain_some(self, budget_s: float) -> None:
        """Ship older entries for at most ``budget_s`` (skipped if another process drains),
        after completing the local writes of orphans: nothing ships before it is local."""
        deadline = time.monotonic() + budget_s
        with self.outbox.locked(wait=False) as mine:
            if not mine:
                return
            self._local_seq.clear()
            self.recover()
            for entry in self.outbox.iter_pending():
                if time.monotonic() > deadline:
                    return
                if entry.problem is not None or entry.last_error_type == "InvalidRecord":
                    continue  # needs a person: `warehouse sync` reports it
                if not self.ships(entry.kind) or self.health.is_down(target_of(entry.kind)):
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
                outcome.append(self._try(entries))
            finally:
                done.set()

        threading.Thread(target=attempt, name="warehouse-ship", daemon=True).start()
        if done.wait(wait_s):
            return outcome[0] if outcome else None
        return self.health.timed_out(target_of(entries[0].kind), wait_s)

    def _try(self, entries: Sequence[Entry]) -> BaseException | None:
        """Ship entries of one kind; on success delete them, on failure keep them with the
        reason (and the remote counts as down when it is unreachable)."""
        target = target_of(entries[0].kind)
        try:
            failures = self._ship(entries)
        except Exception as exc:
            error = exc if isinstance(exc, WarehouseError) else self._unexpected(entries, exc)
            failures = {entry.path: error for entry in entries}
        if failures:
            first = next(iter(failures.values()))
            if isinstance(first, BackendUnavailable) and target in self.remotes:
                # a client's own time-out (hung) counts as when _try_within gives up
                self.health.mark_down(target, first, hung=bool(getattr(first, "hung", False)))
            for entry in entries:
                if entry.path in failures and entry.path.exists():
                    self.outbox.keep(entry, failures[entry.path])
            self.outbox.remove_many([e for e in entries if e.path not in failures])
            return first
        if target in self.remotes:
            self.health.mark_up(target)
        self.outbox.remove_many(entries)
        return None

    def _ship(self, entries: Sequence[Entry]) -> dict[Path, BaseException]:
        """Ship the entries (each entry of an older version first written locally); the ones
        that failed, each with its own error (a failure that concerns them all is raised)."""
        problem = entries[0].problem
        if problem is not None:
            raise InvalidRecord(problem)
        waiting = []
        for entry in entries:
            if entry.needs_local and not self._write_local(entry):
                self.outbox.remove(entry)  # nothing of it was stored: nothing to ship
            else:
                waiting.append(entry)
        if not waiting or not self.ships(waiting[0].kind):
            return {}
        if waiting[0].kind == "object":
            return self._ship_objects(waiting)
        for entry in waiting:
            self._send(entry)
            self.outbox.remove(entry)
        return {}

    def _send(self, entry: Entry) -> None:
        """The entry's call of the remote's contract method (:data:`METHODS`)."""
        p = entry.payload
        remote = self.health.open(target_of(entry.kind))
        method = getattr(remote, METHODS[entry.kind])
        if entry.kind == "run":
            method([p["doc"]])
        elif entry.kind == "samples":
            try:
                batches = self.local.sample_batches(p["run_id"], p["split"])
            except NotFound:
                # the local write never completed (the entry is staged first): the local
                # store has no such split, and the remote gets none
                log.info("%s were never written locally; nothing to ship", entry.describe())
                return
            except StoreUnavailable as exc:  # the local copy is damaged: not the remote's fault
                raise InvalidRecord(f"{entry.describe()}: {exc}") from None
            method(p["run_id"], p["experiment"], p["split"], _local(entry, batches))
        elif entry.kind == "steps":
            method(p["run_id"], p["experiment"], p["steps"])
        elif entry.kind == "delete":
            method(p["run_ids"])
        elif entry.kind == "delete_objects":
            method(p["prefix"])

    def _write_local(self, entry: Entry) -> bool:
        """Complete the entry's local write (idempotent); False when the entry names a local
        copy that was never completed (a split, an object), so there is nothing to ship."""
        p = entry.payload
        if entry.kind == "run":
            self.local.write_runs([p["doc"]])
        elif entry.kind == "steps":
            self._replay_steps(p["run_id"], p["experiment"], p["steps"])
        elif entry.kind == "delete":
            self.local.delete_runs(p["run_ids"])
        elif entry.kind == "delete_objects":
            self.local_objects.delete_prefix(p["prefix"])
        elif entry.kind == "object":
            path = self.local_objects.path_of(p["key"])
            if not path.is_file() or sha256_of(path) != p["sha256"]:
                log.info("object %s was never stored locally; nothing to ship", p["key"])
                return False
        return True

    def _replay_steps(self, run_id: str, experiment: str, steps: list[dict[str, Any]]) -> None:
        """Append to the local store the steps it lacks (seq numbers grow with each append)."""
        last = self._local_seq.get(run_id)
        if last is None:
            last = self._local_seq[run_id] = _last_seq(self.local, run_id)
        missing = [s for s in steps if isinstance(s.get("seq"), int) and int(s["seq"]) > last]
        if missing:
            self.local.write_steps(run_id, experiment, missing)
            self._local_seq[run_id] = max(last, _max_seq(missing))

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
        remote = self.health.objects()
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
                failures[entry.path] = self.health.not_tried("objects", entry)
                continue
            try:
                remote.put(key, source, content_type=content_type, sha256=sha256)
            except Exception as exc:
                error = exc if isinstance(exc, WarehouseError) else self._unexpected([entry], exc)
                failures[entry.path] = error
                unreachable = isinstance(error, BackendUnavailable)
        return failures

    def _unexpected(self, entries: Sequence[Entry], exc: Exception) -> WarehouseError:
        log.debug("unexpected error shipping %s", entries[0].path, exc_info=exc)
        cls = unavailable(target_of(entries[0].kind))
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


def _local(entry: Entry, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The local copy's batches; damage found in it while shipping is the entry's problem,
    never a sign that the remote is down."""
    try:
        yield from batches
    except StoreUnavailable as exc:
        raise InvalidRecord(f"{entry.describe()}: {exc}") from None


def _last_seq(store: Store, run_id: str) -> int:
    """The highest step ``seq`` ``store`` holds for ``run_id`` (-1: none), through the
    contract."""
    try:
        seqs = (d.get("seq") for d in store.steps(StepRange(run_id=run_id, fields=("seq",))))
        return max((int(s) for s in seqs if isinstance(s, int)), default=-1)
    except NotFound:
        return -1


def _max_seq(steps: Sequence[dict[str, Any]]) -> int:
    return max((int(s["seq"]) for s in steps if isinstance(s.get("seq"), int)), default=-1)


__all__ = ["METHODS", "PUBLISH_WAIT_S", "Remote", "Shipper", "target_of"]
