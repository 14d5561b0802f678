"""Fixtures of the capture tests that plant secrets and record through every real path."""

from __future__ import annotations

import pytest

from tests.servers import S3Server


@pytest.fixture
def servers(es_url: str, es_prefix: str, s3_server: S3Server, s3_bucket: str) -> dict[str, str]:
    """The environment that points the warehouse at this test's Elasticsearch and S3."""
    return {"WAREHOUSE_ES_URL": es_url, "WAREHOUSE_INDEX_PREFIX": es_prefix} | (
        s3_server.settings_env(s3_bucket)
    )
