"""The ``store`` fixture: every store engine, so the contract suite runs against each.

Adding an engine is one ``pytest.param`` in ``STORES`` plus a ``<name>_store`` fixture that
yields an empty store of that engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from warehouse.stores.base import Store

STORES = [
    pytest.param("local", id="local"),
    pytest.param("elasticsearch", id="elasticsearch"),
    pytest.param("replicating", id="replicating"),
]


@pytest.fixture
def local_store(home: Path) -> Iterator[Store]:
    """An empty embedded store in this test's warehouse folder."""
    from warehouse.stores.local import LocalStore

    with LocalStore(home) as store:
        yield store


@pytest.fixture
def elasticsearch_store(es_url: str, es_prefix: str) -> Iterator[Store]:
    """An empty, initialised Elasticsearch store (noida-db, or WAREHOUSE_TEST_ES_URL) under a
    prefix of this test alone (``tests/servers.py`` deletes its indices afterwards)."""
    from warehouse.stores.elastic import ElasticStore

    with ElasticStore(es_url, prefix=es_prefix) as store:
        store.install()
        yield store


@pytest.fixture
def replicating_store(home: Path, es_url: str, es_prefix: str) -> Iterator[Store]:
    """The durable wrapper as a recorder uses it: the local store in this test's warehouse
    folder, every write shipped through the outbox to an initialised Elasticsearch."""
    from warehouse.replication import open_recording
    from warehouse.settings import load
    from warehouse.stores.elastic import init_elasticsearch

    settings = load(cli={"home": str(home), "es_url": es_url, "index_prefix": es_prefix})
    init_elasticsearch(settings)
    recording = open_recording(settings)
    with recording.store as store:
        yield store
    assert recording.shipper.outbox.count() == 0, "every write reached Elasticsearch"


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> Store:
    """An empty store of each engine in ``STORES``."""
    engine: Store = request.getfixturevalue(f"{request.param}_store")
    return engine
