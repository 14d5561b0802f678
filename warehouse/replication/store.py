"""ReplicatingStore: the store contract made durable: outbox entry, local write, then ship.

A write adds its outbox entry (fsync'd) *before* it writes the local store; then the shipper
(:class:`~warehouse.replication.shipper.Shipper`) ships it to the remote store through the
remote's protocol methods. So a record is never in the local store without an entry that will
take it to the remote, whatever moment the process dies at; and a remote that is down, slow or
hung costs the caller a bounded wait at most, while the records wait in the outbox for
``warehouse sync``. Reads come from the local store, the durable copy this process wrote.

The same path serves a warehouse with no remote: when the local store cannot write (a folder
it cannot create, an I/O error), a run or its steps stay in the outbox entry (they carry their
data) and ``warehouse sync`` writes them locally once the fault is fixed. Samples cannot wait
that way (their rows are streamed, not copied): their failure reaches the caller.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Self

from warehouse.errors import StoreUnavailable, WarehouseError
from warehouse.stores.base import (
    CountQuery,
    ExperimentBest,
    Group,
    GroupQuery,
    RankQuery,
    RunQuery,
    SampleQuery,
    StepRange,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.replication.outbox import Entry
    from warehouse.replication.shipper import Shipper
    from warehouse.stores.local import LocalStore


log = logging.getLogger(__name__)

FAILPOINT_ENV = "WAREHOUSE_TEST_FAILPOINT"
"""Tests only: ``after-outbox:N`` or ``after-local:N`` makes the process kill itself
(SIGKILL) the N-th time a write passes that point (between the outbox entry and the local
write, or between the local write and shipping), to prove no crash loses a record."""
_passes: dict[str, int] = {}


def failpoint(name: str) -> None:
    """Die here, at once and without cleanup, when the test asked for this point."""
    wanted = os.environ.get(FAILPOINT_ENV)
    if not wanted or not wanted.startswith(name):
        return
    point, _, nth = wanted.partition(":")
    if point != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if _passes[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)


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


__all__ = ["ReplicatingStore"]
