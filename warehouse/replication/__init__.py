"""Durability: every record is written locally first, then shipped on through one outbox.

    replication/outbox.py    the queue: one fsync'd JSON-line file per waiting record
    replication/shipper.py   ships entries to the remote Store / ObjectStore (their contracts
                             only): bounded waits, outages, ``warehouse sync``
                             and ReplicatingStore: the Store contract, entry -> local -> ship
    replication/remotes.py   the remotes' health: down, hung, warnings, strict mode
    replication/objects.py   ReplicatingObjectStore: the same for artifacts and outputs

:func:`open_recording` is what a recorder writes through: the local store and object folder,
replicated to the Elasticsearch and S3 the settings name. Nothing here imports back from the
stores' or object stores' packages beyond their contracts and local backends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from warehouse.replication.objects import ReplicatingObjectStore
from warehouse.replication.outbox import Outbox
from warehouse.replication.shipper import Remote, ReplicatingStore, Shipper

if TYPE_CHECKING:
    from warehouse.objects.base import ObjectStore
    from warehouse.objects.local import LocalObjectStore
    from warehouse.settings import Settings
    from warehouse.stores.base import Store
    from warehouse.stores.local import LocalStore


@dataclass
class Recording:
    """Where a recorder writes: a store and an object store (local first), and the shipper
    that takes their records on to Elasticsearch / S3 (None when records stay local)."""

    store: Store
    objects: ObjectStore
    shipper: Shipper

    def close(self) -> None:
        self.store.close()
        self.objects.close()
        self.shipper.close()


def open_recording(settings: Settings) -> Recording:
    """The configured recording: everything local, plus replication to the Elasticsearch
    and/or S3 that ``settings`` name. Offline: no server is reached until something ships."""

    shipper = open_shipper(settings)
    store: Store = ReplicatingStore(shipper.local, shipper)
    objects: ObjectStore = shipper.local_objects
    if "objects" in shipper.remotes:
        from warehouse.objects.s3 import S3ObjectStore

        remote = S3ObjectStore.from_settings(settings)  # offline: for the URIs records keep
        objects = ReplicatingObjectStore(shipper.local_objects, remote, shipper)
    return Recording(store, objects, shipper)


def open_shipper(settings: Settings) -> Shipper:
    """The shipper of the warehouse folder's outbox towards the configured remotes (with none
    it only writes locally what the local store could not take at first)."""

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
    local, local_objects = _locals(settings)
    outbox = Outbox(local.home.outbox, prepare=local.home.ensure)
    return Shipper(
        outbox,
        local,
        local_objects,
        store=remotes.get("store"),
        objects=remotes.get("objects"),
        strict=settings.strict,
    )


def _locals(settings: Settings) -> tuple[LocalStore, LocalObjectStore]:
    from warehouse.home import Home
    from warehouse.objects.local import LocalObjectStore
    from warehouse.stores.local import LocalStore

    home = Home.from_settings(settings)
    return LocalStore(home), LocalObjectStore(home.objects, prepare=home.ensure)


__all__ = [
    "Outbox",
    "Recording",
    "ReplicatingObjectStore",
    "ReplicatingStore",
    "Shipper",
    "open_recording",
    "open_shipper",
]
