"""Object stores for artifacts and model outputs; :func:`open_object_store` picks one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from warehouse.objects.base import ObjectStore
    from warehouse.settings import Settings


def open_object_store(settings: Settings) -> ObjectStore:
    """S3/MinIO when ``s3_url`` is set, else the ``objects/`` folder of the local warehouse."""
    if settings.s3_url:
        from warehouse.objects.s3 import S3ObjectStore

        return S3ObjectStore.from_settings(settings)
    from warehouse.home import Home
    from warehouse.objects.local import LocalObjectStore

    home = Home.from_settings(settings)
    return LocalObjectStore(home.objects, prepare=home.ensure)
