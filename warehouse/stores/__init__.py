"""Stores of run, sample and step records; :func:`open_store` picks the configured engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from warehouse.settings import Settings
    from warehouse.stores.base import Store


def open_local_store(settings: Settings) -> Store:
    """The embedded store in the warehouse folder (always there: the durable first write)."""
    from warehouse.home import Home
    from warehouse.stores.local import LocalStore

    return LocalStore(Home.from_settings(settings))


def open_store(settings: Settings) -> Store:
    """The store queries go to: Elasticsearch when configured, else the embedded local store."""
    if settings.store_engine == "elasticsearch":
        from warehouse.stores.elastic import ElasticStore

        return ElasticStore.from_settings(settings)
    return open_local_store(settings)
