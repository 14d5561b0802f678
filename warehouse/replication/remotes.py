"""The remote sides of replication and their health: which is down, hung or refusing, for how
long, and what the caller is told (one warning a minute; strict mode raises).

A server found down or hung is left alone for :data:`DOWN_FOR_S`, and a hung one is also
remembered by URL for the whole process (:data:`HUNG`), so each new run does not wait on the
same server again. The shipper asks here before every attempt and reports every outcome here.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from warehouse.errors import (
    ConfigurationError,
    ObjectStoreUnavailable,
    StoreUnavailable,
    WarehouseError,
)

if TYPE_CHECKING:
    from warehouse.objects.base import ObjectStore
    from warehouse.replication.outbox import Entry, Outbox
    from warehouse.stores.base import Store

log = logging.getLogger(__name__)

DOWN_FOR_S = 30.0  # after "unreachable", publish only queues for this long
WARN_EVERY_S = 60.0
HUNG: dict[str, tuple[float, WarehouseError]] = {}
"""Servers that did not answer in time, by URL: (down until, error), shared by every shipper
of the process."""


@dataclass(frozen=True)
class Remote:
    """One remote side: how to open it (lazily), what to call it, where it is."""

    label: str  # "Elasticsearch", "S3": for messages
    url: str  # where it is (no credentials): the key of the process-wide hung memory
    open: Callable[[], Store] | Callable[[], ObjectStore]


def target_of(kind: str) -> str:
    """Which remote an entry kind ships to: ``objects`` or ``store``."""
    return "objects" if kind in ("object", "delete_objects") else "store"


def unavailable(target: str) -> type[StoreUnavailable] | type[ObjectStoreUnavailable]:
    """The error type of a remote that cannot take records."""
    return ObjectStoreUnavailable if target == "objects" else StoreUnavailable


class Remotes:
    """The configured remotes (``store``, ``objects``), opened on first use, and their health."""

    def __init__(self, remotes: dict[str, Remote], outbox: Outbox, *, strict: bool) -> None:
        self.remotes = remotes
        self.outbox = outbox
        self.strict = strict
        self._opened: dict[str, Store | ObjectStore] = {}
        self._lock = threading.Lock()
        self._down_until: dict[str, float] = {}
        self._warned_at: dict[str, float] = {}
        self.last_error: dict[str, WarehouseError] = {}

    # opening --------------------------------------------------------------------------------
    def open(self, target: str) -> Store | ObjectStore:
        with self._lock:
            backend = self._opened.get(target)
            if backend is None:
                remote = self.remotes.get(target)
                if remote is None:
                    what = "files wait for S3" if target == "objects" else "records wait for"
                    raise ConfigurationError(
                        f"{what} {'' if target == 'objects' else 'Elasticsearch '}but none is "
                        "configured; set WAREHOUSE_ES_URL / WAREHOUSE_S3_URL and run "
                        "'warehouse sync' again"
                    )
                backend = self._opened[target] = remote.open()
            return backend

    def store(self) -> Store:
        return cast("Store", self.open("store"))

    def objects(self) -> ObjectStore:
        return cast("ObjectStore", self.open("objects"))

    def close(self) -> None:
        """Close the remote connections (they reopen if used again)."""
        with self._lock:
            opened, self._opened = self._opened, {}
        for backend in opened.values():
            with contextlib.suppress(Exception):
                backend.close()

    # health ---------------------------------------------------------------------------------
    def mark_down(self, target: str, error: WarehouseError, *, hung: bool = False) -> None:
        self._down_until[target] = time.monotonic() + DOWN_FOR_S
        self.last_error[target] = error
        if hung and target in self.remotes:
            HUNG[self.remotes[target].url] = (time.monotonic() + DOWN_FOR_S, error)

    def mark_up(self, target: str) -> None:
        self._down_until.pop(target, None)
        HUNG.pop(self.remotes[target].url if target in self.remotes else target, None)

    def clear(self) -> None:
        """Every remote counts as up again (after a drain that shipped something)."""
        self._down_until.clear()

    def is_down(self, target: str) -> bool:
        now = time.monotonic()
        remote = self.remotes.get(target)
        hung = HUNG.get(remote.url) if remote is not None else None
        if hung is not None and now < hung[0] and now >= self._down_until.get(target, 0.0):
            # another shipper of this process found it hung a moment ago: do not wait again
            self._down_until[target], self.last_error[target] = hung
        return now < self._down_until.get(target, 0.0)

    # what the caller is told ------------------------------------------------------------------
    def warn(self, target: str, error: BaseException | None) -> None:
        """One warning per failure; the same reason again within a minute only at debug level
        (a server that stays down, or refuses every step batch, does not flood the log)."""
        if error is None:
            error = self.last_error.get(target)
        label = self.label(target)
        message = str(error) if error is not None else f"{label} is unreachable"
        now = time.monotonic()
        waiting = self.outbox.count()
        if now - self._warned_at.get(message, -WARN_EVERY_S) < WARN_EVERY_S:
            log.debug("%s (%d record(s) in the outbox)", message, waiting)
            return
        self._warned_at[message] = now
        log.warning(
            "%s — %d record(s) wait in %s; run 'warehouse sync' to ship them",
            message,
            waiting,
            self.outbox.folder,
        )

    def raise_if_strict(self, target: str, error: BaseException | None) -> None:
        # An upload waiting for S3 is no failure even in strict mode: the bytes are in the
        # local object folder and the outbox. Raising would fail the training step that
        # logged them and cost the run its metrics (issue 14, item 8).
        if not self.strict or target == "objects":
            return
        if isinstance(error, WarehouseError):
            raise error
        raise unavailable(target)(
            f"{self.label(target)} is unreachable; the record is kept in the outbox "
            f"({self.outbox.folder}); run 'warehouse sync' when it is back"
        )

    def not_tried(self, target: str, entry: Entry) -> WarehouseError:
        """The reason kept on an entry not tried because its server failed on another one."""
        remote = self.remotes.get(target)
        where = f"{remote.label} at {remote.url}" if remote is not None else target
        return unavailable(target)(
            f"{entry.describe()} was not tried: {where} could not be reached earlier in this "
            "sync; run 'warehouse sync' again once it answers"
        )

    def timed_out(self, target: str, wait_s: float) -> WarehouseError:
        """The remote did not answer within ``wait_s``: hung, for this process."""
        error = unavailable(target)(
            f"{self.label(target)} did not answer within {wait_s:.0f} s; the record waits in "
            f"the outbox ({self.outbox.folder}); run 'warehouse sync' when it answers again"
        )
        self.mark_down(target, error, hung=True)
        return error

    def label(self, target: str) -> str:
        return self.remotes[target].label if target in self.remotes else target


__all__ = ["DOWN_FOR_S", "HUNG", "Remote", "Remotes", "target_of", "unavailable"]
