"""The shipper: outbox entries go to the remote store and object store, through their contracts.

The one place where retries and outages are handled:

1. a write adds an outbox entry first (fsync'd: the *write-ahead*), then writes the local copy
   (:class:`ReplicatingStore`, below,
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

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from warehouse.errors import (
    BackendUnavailable,
    InvalidRecord,
    NotFound,
    StoreUnavailable,
    WarehouseError,
)
from warehouse.replication.outbox import CORRUPT, Entry, Outbox, SyncReport, failpoint
from warehouse.replication.remotes import Remote, Remotes, target_of, unavailable
from warehouse.stores.base import (
    CountQuery,
    ExperimentBest,
    Group,
    GroupQuery,
    RankQuery,
    RunQuery,
    SampleQuery,
    StepRange,
    Timeline,
    TimelineQuery,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.objects.base import ObjectStore, PutItem
    from warehouse.objects.local import LocalObjectStore
    from warehouse.stores.base import Store
    from warehouse.stores.local import LocalStore

log = logging.getLogger(__name__)

PUBLISH_WAIT_S = 5.0
"""The longest a record's shipping may hold the caller (the training thread); then it waits."""
_OPPORTUNISTIC_BUDGET_S = 2.0
_OBJECT_BATCH = 1024  # object entries shipped together (one listing, concurrent puts)


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
        """Ship entries just added (their local write done): older waiting ones first, then
        these, within bounded time; what cannot ship stays in the outbox with one warning."""
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
                        skipped = self.health.not_tried(target, entry)
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
            self.health.clear()
        return report

    def close(self) -> None:
        """Close the remote connections (they reopen if the shipper is used again)."""
        self.health.close()

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
                if self.health.is_down(target_of(entry.kind)):
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
        return self.health.timed_out(target_of(entries[0].kind), wait_s)

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
                # a client's own time-out (hung) counts as when _try_within gives up
                self.health.mark_down(target, first, hung=bool(getattr(first, "hung", False)))
            for entry in entries:
                if entry.path in failures and entry.path.exists():
                    self.outbox.keep(entry, failures[entry.path])
            self.outbox.remove_many([e for e in entries if e.path not in failures])
            return first
        self.health.mark_up(target)
        self.outbox.remove_many(entries)
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
                self.health.objects().delete_prefix(entry.payload["prefix"])
                self.outbox.remove(entry)
            return {}
        store = self.health.store() if "store" in self.remotes else None
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


# --- the writers' side: the Store contract made durable ---------------------------------------


class ReplicatingStore:
    """``local`` written first and read back; every write shipped on by ``shipper``."""

    def __init__(self, local: LocalStore, shipper: Shipper) -> None:
        self.local = local
        self.shipper = shipper

    # writes: entry, local write, ship ---------------------------------------------------------
    def write_runs(self, docs: Sequence[dict[str, Any]]) -> None:
        entries = [self.shipper.outbox.add("run", {"doc": doc}) for doc in docs]
        if self._local(entries, lambda: self.local.write_runs(docs), keep=True):
            self._ship(entries)

    def write_samples(
        self, run_id: str, experiment: str, split: str, batches: Iterable[pa.RecordBatch]
    ) -> int:
        entry = self.shipper.outbox.add(
            "samples", {"run_id": run_id, "experiment": experiment, "split": split}
        )
        count: list[int] = []
        self._local(
            [entry],
            lambda: count.append(self.local.write_samples(run_id, experiment, split, batches)),
            keep=False,
        )
        self._ship([entry])
        return count[0]

    def write_steps(self, run_id: str, experiment: str, steps: Sequence[dict[str, Any]]) -> None:
        if not steps:
            return
        if not self.shipper.ships("steps"):
            # Nothing to ship them to: the local append is the whole record. An entry first
            # would cost a JSON encoding and two fsyncs per batch (~10 us of CPU a step) to
            # guard a window the batch was exposed to anyway while it waited in memory. Only
            # an append that fails leaves an entry (below), for 'warehouse sync' to write.
            try:
                self.local.write_steps(run_id, experiment, steps)
                return
            except StoreUnavailable:
                pass
        entry = self.shipper.outbox.add(
            "steps", {"run_id": run_id, "experiment": experiment, "steps": list(steps)}
        )
        if self._local(
            [entry], lambda: self.local.write_steps(run_id, experiment, steps), keep=True
        ):
            self._ship([entry])

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """The deletion goes in the outbox first, the runs' waiting writes leave it (so nothing
        comes back when it drains), then the local copy goes and the deletion ships."""
        if not run_ids:
            return 0
        entry = self.shipper.outbox.add("delete", {"run_ids": list(run_ids)})
        self.shipper.outbox.purge(run_ids)
        count = self.local.delete_runs(run_ids)
        self._ship([entry])
        return count

    def _local(self, entries: list[Entry], write: Callable[[], object], *, keep: bool) -> bool:
        """The local write: True when done. A refused record takes its entries with it (there
        is nothing to ship); with ``keep``, entries whose write failed for a reason outside the
        record (I/O) stay in the outbox, which then holds the only copy (False). A write cut
        short by anything else (Ctrl-C, SIGTERM, a bug) may have stored the record: its
        entries stay, and ship (or write locally) at the next sync, idempotently."""
        failpoint("after-outbox")
        try:
            write()
        except StoreUnavailable as exc:
            if not keep:
                self._discard(entries)
                raise
            for entry in entries:
                self.shipper.outbox.keep(entry, exc)
            log.warning(
                "%s — kept in the outbox (%s); run 'warehouse sync' once the local store can "
                "be written",
                exc,
                self.shipper.outbox.folder,
            )
            if self.shipper.strict:
                raise
            return False
        except WarehouseError:  # refused (InvalidRecord ...): nothing was stored
            self._discard(entries)
            raise
        failpoint("after-local")
        return True

    def _ship(self, entries: list[Entry]) -> None:
        if self.shipper.ships(entries[0].kind):
            self.shipper.publish(entries)
        else:  # no remote to take it: the local write was all there was to do
            self._discard(entries)

    def _discard(self, entries: list[Entry]) -> None:
        for entry in entries:
            self.shipper.outbox.remove(entry)

    # reads: the local copy --------------------------------------------------------------------
    def search_runs(self, query: RunQuery) -> list[dict[str, Any]]:
        return self.local.search_runs(query)

    def best_per_experiment(self, query: RankQuery) -> list[ExperimentBest]:
        return self.local.best_per_experiment(query)

    def count_by(self, query: CountQuery) -> dict[str, int]:
        return self.local.count_by(query)

    def timeline(self, query: TimelineQuery) -> Timeline:
        return self.local.timeline(query)

    def version(self) -> Hashable:
        return self.local.version()

    def search_samples(self, query: SampleQuery) -> Iterator[dict[str, Any]]:
        return self.local.search_samples(query)

    def sample_batches(
        self, run_id: str, split: str, columns: Sequence[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        return self.local.sample_batches(run_id, split, columns)

    def group_samples(self, query: GroupQuery) -> list[Group]:
        return self.local.group_samples(query)

    def steps(self, query: StepRange) -> Iterator[dict[str, Any]]:
        return self.local.steps(query)

    def close(self) -> None:
        self.shipper.close()
        self.local.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


__all__ = ["PUBLISH_WAIT_S", "Remote", "ReplicatingStore", "Shipper", "target_of"]
