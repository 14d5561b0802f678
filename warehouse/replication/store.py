"""ReplicatingStore: the local store, whose every write is also staged in the outbox and shipped.

It *is* the local store (reads come from it unchanged, so nothing is forwarded by hand); each
write goes, in this order:

1. with a remote to ship to: the outbox entry is staged (fsync'd, invisible to shippers,
   see :mod:`~warehouse.replication.outbox`);
2. the local write (the truth);
3. the entry is released and :meth:`Shipper.publish` ships it within a bounded wait.

With no remote for a kind of record (a local-only warehouse, or steps with S3 alone), no
entry is written at all: the local write is the whole record. Only a local write that fails
for a reason outside the record (a full disk) leaves an entry, staged and unlocked, whose
local write the next shipper or ``warehouse sync`` completes; the run goes on meanwhile
(strict mode raises). Run documents are fitted to the record limits
(:func:`~warehouse.capture.limits.fit_run`) before anything is written; the content digest a
document carries (stamped by the run when it saves itself, :mod:`~warehouse.stores.doc_digest`)
is renewed if fitting changed it, so every copy carries the digest of what was written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from warehouse.capture.limits import fit_run
from warehouse.errors import StoreUnavailable, WarehouseError
from warehouse.stores.doc_digest import FIELD, stamp
from warehouse.stores.local import LocalStore
from warehouse.values import json_safe

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.home import Home
    from warehouse.replication.outbox import Outbox
    from warehouse.replication.shipper import Shipper

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class ReplicatingStore(LocalStore):
    """The local store in ``home``, replicated through ``outbox`` by ``shipper`` (None:
    nothing to replicate to; the outbox then only keeps what the local store refused)."""

    def __init__(
        self, home: Home, outbox: Outbox, shipper: Shipper | None, *, strict: bool = False
    ) -> None:
        super().__init__(home)
        self.outbox = outbox
        self.shipper = shipper
        self.strict = strict

    def write_runs(self, docs: Sequence[dict[str, Any]]) -> None:
        ready = [_fitted(doc) for doc in docs]
        payloads = [{"doc": doc} for doc in ready]
        self._durably("run", payloads, lambda: LocalStore.write_runs(self, ready), keep=True)

    def write_samples(
        self, run_id: str, experiment: str, split: str, batches: Iterable[pa.RecordBatch]
    ) -> int:
        payload = {"run_id": run_id, "experiment": experiment, "split": split}
        count = self._durably(
            "samples",
            [payload],
            lambda: LocalStore.write_samples(self, run_id, experiment, split, batches),
            keep=False,  # the rows are not in the entry: a failed write cannot wait
        )
        assert count is not None
        return count

    def write_steps(self, run_id: str, experiment: str, steps: Sequence[dict[str, Any]]) -> None:
        if not steps:
            return
        payload = {"run_id": run_id, "experiment": experiment, "steps": list(steps)}
        self._durably(
            "steps",
            [payload],
            lambda: LocalStore.write_steps(self, run_id, experiment, steps),
            keep=True,
        )

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """The deletion is staged first, the runs' waiting writes leave the outbox (so nothing
        comes back when it drains), then the local copy goes and the deletion ships."""
        if not run_ids:
            return 0
        ids = list(run_ids)

        def delete() -> int:
            self.outbox.purge(ids)
            return LocalStore.delete_runs(self, ids)

        count = self._durably("delete", [{"run_ids": ids}], delete, keep=True)
        return count or 0

    def close(self) -> None:
        if self.shipper is not None:
            self.shipper.close()
        super().close()

    # the durable path ---------------------------------------------------------------------
    def _durably(
        self, kind: str, payloads: list[dict[str, Any]], write: Callable[[], _T], *, keep: bool
    ) -> _T | None:
        """``write`` (the local write) in the order of the module docstring; None when it
        failed and its entries wait in the outbox (``keep``) for the local store."""
        if self.shipper is None or not self.shipper.ships(kind):
            try:
                return write()
            except StoreUnavailable as exc:
                if not keep:
                    raise
                self._wait_for_local(exc, [self._orphan(kind, p, exc) for p in payloads])
                return None
        staged = self.outbox.stage([(kind, payload) for payload in payloads])
        try:
            result = write()
        except StoreUnavailable as exc:
            if not keep:
                staged.abandon()
                raise
            for entry in staged.entries:
                self.outbox.keep(entry, exc)
            staged.close()  # orphans now: their local write is completed before they ship
            self._wait_for_local(exc, staged.entries)
            return None
        except WarehouseError:  # refused (InvalidRecord ...): nothing was stored
            staged.abandon()
            raise
        except BaseException:
            # cut short (Ctrl-C, SIGTERM, a bug): the record may be stored or not; its
            # entries stay staged, and the next shipper writes them locally, then ships them
            staged.close()
            raise
        self.shipper.publish(staged.release())
        return result

    def _orphan(self, kind: str, payload: dict[str, Any], error: StoreUnavailable) -> Any:
        try:
            entry = self.outbox.add(kind, payload, local_done=False)
            self.outbox.keep(entry, error)
        except OSError:
            raise error from None  # the outbox cannot take it either: say what failed first
        return entry

    def _wait_for_local(self, exc: StoreUnavailable, entries: Sequence[object]) -> None:
        log.warning(
            "%s — %d record(s) kept in the outbox (%s); run 'warehouse sync' once the local "
            "store can be written",
            exc,
            len(entries),
            self.outbox.folder,
        )
        if self.strict:
            raise exc


def _fitted(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` held to the record limits; a digest it carries is made that of what is kept."""
    fitted = fit_run(json_safe(doc))
    if fitted != doc and FIELD in doc:
        return stamp(fitted)
    return fitted


__all__ = ["ReplicatingStore"]
