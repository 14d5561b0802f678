"""ReplicatingObjectStore: artifacts and outputs in the local folder first, then in S3.

As :class:`~warehouse.replication.store.ReplicatingStore` does for records: ``put`` stages an
outbox entry, stores the bytes in the local object folder, releases the entry, then the
shipper uploads them (an entry staged by a process that died is shipped only if the local
object it names is there with its sha256). The
URI returned is the remote's (``s3://bucket/prefix/key``), so records point at where the
object will be for everyone, even while the upload still waits in the outbox; reads are served
from the local copy when this machine has it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Self

from warehouse.errors import WarehouseError
from warehouse.objects.base import ProgressCallback, PutItem, put_each

if TYPE_CHECKING:
    from warehouse.objects.base import ObjectStore
    from warehouse.objects.local import LocalObjectStore
    from warehouse.replication.shipper import Shipper


class ReplicatingObjectStore:
    """``local`` first, ``remote`` (reached through ``shipper``) as the address of record."""

    def __init__(self, local: LocalObjectStore, remote: ObjectStore, shipper: Shipper) -> None:
        self.local = local
        self.remote = remote  # used offline only (uri); transfers go through the shipper
        self.shipper = shipper

    def put(self, key: str, source: bytes | Path, *, content_type: str | None, sha256: str) -> str:
        payload = {"key": key, "content_type": content_type, "sha256": sha256}
        staged = self.shipper.outbox.stage([("object", payload)])
        try:
            self.local.put(key, source, content_type=content_type, sha256=sha256)
        except WarehouseError:  # the local folder refused it: there is nothing to upload
            staged.abandon()
            raise
        except BaseException:
            staged.close()  # cut short: shipped later only if the local copy is whole
            raise
        self.shipper.publish(staged.release())
        return self.remote.uri(key)

    def put_many(
        self, items: Iterable[PutItem], progress: ProgressCallback | None = None
    ) -> list[str]:
        return put_each(self, items, progress)

    def uri(self, key: str) -> str:
        return self.remote.uri(key)

    def get(self, uri: str) -> bytes:
        local = self._local_path(uri)
        if local is not None and local.is_file():
            return local.read_bytes()
        return self.remote.get(uri)

    def exists(self, uri: str) -> bool:
        local = self._local_path(uri)
        return (local is not None and local.is_file()) or self.remote.exists(uri)

    def url(self, uri: str, expires_s: int | None = None) -> str:
        return self.remote.url(uri, expires_s)

    def delete_prefix(self, prefix: str) -> int:
        """Locally now; in S3 through the outbox (the entry goes first, as every write's)."""
        staged = self.shipper.outbox.stage([("delete_objects", {"prefix": prefix})])
        try:
            count = self.local.delete_prefix(prefix)
        except BaseException:
            staged.close()  # the next shipper deletes locally, then in S3
            raise
        self.shipper.publish(staged.release())
        return count

    def close(self) -> None:
        self.remote.close()
        self.local.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _local_path(self, uri: str) -> Path | None:
        base = self.remote.uri("")
        if not uri.startswith(base):
            return None
        return self.local.path_of(uri[len(base) :])


__all__ = ["ReplicatingObjectStore"]
