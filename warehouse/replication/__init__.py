"""Durability: every record is written locally first, then shipped on through one outbox.

    replication/outbox.py    the queue: one fsync'd JSON-line file per waiting record, staged
                             (invisible) until its local write is complete
    replication/store.py     ReplicatingStore: the local store whose writes also stage, release
                             and ship an entry
    replication/objects.py   ReplicatingObjectStore: the same for artifacts and outputs
    replication/shipper.py   ships entries to the remote Store / ObjectStore (their contracts
                             only), completing orphans' local writes first; ``warehouse sync``
    replication/remotes.py   the remotes' health: down, hung, warnings, strict mode
    replication/verify.py    ``warehouse sync --verify``: both sides compared by content

:func:`open_recording` is what a recorder writes through: the local store and object folder,
replicated to the Elasticsearch and S3 the settings name. Nothing here imports back from the
stores' or object stores' packages beyond their contracts and local backends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse.replication.objects import ReplicatingObjectStore
from warehouse.replication.outbox import Outbox
from warehouse.replication.shipper import Remote, Shipper
from warehouse.replication.store import ReplicatingStore

if TYPE_CHECKING:
    from warehouse.home import Home
    from warehouse.objects.base import ObjectStore
    from warehouse.objects.local import LocalObjectStore
    from warehouse.settings import Settings
    from warehouse.stores.base import Store


@dataclass
class Recording:
    """Where a recorder writes: a store and an object store (local first), the outbox, and
    the shipper that takes their records on to Elasticsearch / S3 (None when records stay
    local: then no outbox entry is written unless the local store refuses a write)."""

    store: Store
    objects: ObjectStore
    outbox: Outbox
    shipper: Shipper | None

    def close(self) -> None:
        self.store.close()
        self.objects.close()
        if self.shipper is not None:
            self.shipper.close()


def open_recording(settings: Settings) -> Recording:
    """The configured recording: everything local, plus replication to the Elasticsearch
    and/or S3 that ``settings`` name. Offline: no server is reached until something ships."""
    home, local_objects = _locals(settings)
    outbox = Outbox(home.outbox, prepare=home.ensure)
    shipper = open_shipper(settings) if _remotes(settings) else None
    store = ReplicatingStore(home, outbox, shipper, strict=settings.strict)
    objects: ObjectStore = local_objects
    if shipper is not None and "objects" in shipper.remotes:
        from warehouse.objects.s3 import S3ObjectStore

        remote = S3ObjectStore.from_settings(settings)  # offline: for the URIs records keep
        objects = ReplicatingObjectStore(local_objects, remote, shipper)
    return Recording(store, objects, outbox, shipper)


def open_shipper(settings: Settings) -> Shipper:
    """The shipper of the warehouse folder's outbox towards the configured remotes (with none
    it only completes the local writes the local store could not take at first)."""
    from warehouse.stores.local import LocalStore

    remotes = _remotes(settings)
    home, local_objects = _locals(settings)
    return Shipper(
        Outbox(home.outbox, prepare=home.ensure),
        LocalStore(home),
        local_objects,
        store=remotes.get("store"),
        objects=remotes.get("objects"),
        strict=settings.strict,
    )


def _remotes(settings: Settings) -> dict[str, Remote]:
    remotes: dict[str, Remote] = {}
    if settings.store_engine == "elasticsearch":

        def elastic() -> Store:
            from warehouse.stores.elastic import ElasticStore

            return ElasticStore.from_settings(settings)

        remotes["store"] = Remote("Elasticsearch", settings.es_url or "", elastic)
    if settings.s3_url:

        def s3() -> ObjectStore:
            from warehouse.objects.s3 import S3ObjectStore

            return S3ObjectStore.from_settings(settings)

        remotes["objects"] = Remote("S3", settings.s3_url, s3)
    return remotes


def _locals(settings: Settings) -> tuple[Home, LocalObjectStore]:
    from warehouse.home import Home
    from warehouse.objects.local import LocalObjectStore

    home = Home.from_settings(settings)
    return home, LocalObjectStore(home.objects, prepare=home.ensure)


__all__ = [
    "Outbox",
    "Recording",
    "ReplicatingObjectStore",
    "ReplicatingStore",
    "Shipper",
    "open_recording",
    "open_shipper",
]
