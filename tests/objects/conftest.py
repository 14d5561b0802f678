"""Object-store fixtures: one store per backend over a fresh folder or a fresh bucket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers import S3Server
from warehouse.objects.base import ObjectStore
from warehouse.objects.local import LocalObjectStore
from warehouse.objects.s3 import S3ObjectStore

PREFIX = "warehouse"


@pytest.fixture
def s3_store(s3_server: S3Server, s3_bucket: str) -> Iterator[S3ObjectStore]:
    """An S3ObjectStore on a fresh bucket of the test server, under the ``warehouse`` prefix."""
    with S3ObjectStore(
        s3_bucket,
        PREFIX,
        endpoint_url=s3_server.url,
        region=s3_server.region,
        access_key_id=s3_server.access_key_id,
        secret_access_key=s3_server.secret_access_key,
    ) as store:
        yield store


@pytest.fixture
def local_store(tmp_path: Path) -> Iterator[LocalObjectStore]:
    with LocalObjectStore(tmp_path / "objects") as store:
        yield store


@pytest.fixture(params=["local", "s3"])
def object_store(request: pytest.FixtureRequest) -> ObjectStore:
    """Each object-store backend in turn (the contract suite runs over all of them)."""
    store: ObjectStore = request.getfixturevalue(f"{request.param}_store")
    return store


@pytest.fixture
def s3_client(s3_server: S3Server) -> Any:
    """A plain boto3 client to look at the bucket from outside the store."""
    return s3_server.admin
