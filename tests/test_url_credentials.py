"""Credentials over plain HTTP to another machine (issue 14, item 18): one warning per process,
or a refusal (exit 2) with WAREHOUSE_REQUIRE_TLS=1. Loopback addresses are fine.

Nothing here needs the remote host to exist: the check runs when a client is built, before
anything is sent (192.0.2.0/24 is TEST-NET-1, never routed).
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from warehouse import url_credentials as plain_http
from warehouse.errors import BackendUnavailable, ConfigurationError
from warehouse.objects.s3 import S3ObjectStore
from warehouse.settings import load
from warehouse.stores.elastic import ElasticStore
from warehouse.url_credentials import is_loopback

REMOTE = "http://192.0.2.10:9200"


@pytest.fixture(autouse=True)
def fresh_process_memory() -> Iterator[None]:
    """Each test starts as a new process would: no address warned about yet."""
    plain_http._warned.clear()
    yield
    plain_http._warned.clear()


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "warehouse.url_credentials"]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("localhost", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("es.localhost", True),
        ("192.0.2.10", False),
        ("elasticsearch", False),
        ("localhost.example.com", False),
        ("::ffff:192.0.2.10", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_es_credentials_to_another_host_warn_once_per_process(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAREHOUSE_ES_URL", REMOTE)
    monkeypatch.setenv("WAREHOUSE_ES_USERNAME", "writer")
    monkeypatch.setenv("WAREHOUSE_ES_PASSWORD", "pw-not-in-the-warning")
    monkeypatch.setenv("WAREHOUSE_ES_TIMEOUT_S", "0.2")
    settings = load()
    with caplog.at_level(logging.WARNING, logger="warehouse.url_credentials"):
        for _ in range(3):  # three stores, as three runs of one sweep would build
            store = ElasticStore.from_settings(settings)
            with pytest.raises(BackendUnavailable):  # nothing answers there
                store.server_info()
    [message] = warnings_of(caplog)
    assert "192.0.2.10:9200" in message
    assert "plain HTTP" in message
    assert "WAREHOUSE_REQUIRE_TLS=1" in message
    assert "pw-not-in-the-warning" not in message


@pytest.mark.parametrize(
    ("url", "options"),
    [
        ("https://192.0.2.10:9200", {"basic_auth": ("u", "p")}),  # TLS
        ("http://127.0.0.1:9", {"basic_auth": ("u", "p")}),  # loopback
        ("http://192.0.2.10:9200", {}),  # no credentials to leak
    ],
)
def test_no_warning_with_tls_loopback_or_no_credentials(
    url: str, options: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    store = ElasticStore(url, client_options={**options, "request_timeout": 0.2}, require_tls=True)
    with (
        caplog.at_level(logging.WARNING, logger="warehouse.url_credentials"),
        pytest.raises(BackendUnavailable),  # unreachable: sent, not refused
    ):
        store.server_info()
    assert warnings_of(caplog) == []


def test_credentials_in_the_url_count(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ConfigurationError, match="refusing to send Elasticsearch credentials"):
        ElasticStore("http://user:secret@192.0.2.10:9200", require_tls=True).server_info()


def test_require_tls_refuses_es_credentials_before_sending_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # TEST-NET-1 never answers: "refusing" (exit 2) can only come before any connection
    env = {
        "WAREHOUSE_ES_URL": REMOTE,
        "WAREHOUSE_ES_API_KEY": "a2V5OnNlY3JldA==",
        "WAREHOUSE_REQUIRE_TLS": "1",
        "WAREHOUSE_ES_TIMEOUT_S": "30",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for command in (("query", "runs"), ("init",)):
        proc = subprocess.run(
            [sys.executable, "-m", "warehouse", *command],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr  # a configuration error
        assert "refusing to send Elasticsearch credentials over plain HTTP" in proc.stderr
        assert "192.0.2.10:9200" in proc.stderr
        assert "a2V5OnNlY3JldA==" not in proc.stdout + proc.stderr


def test_s3_endpoint_over_http_to_another_host_warns_once_or_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def store(require_tls: bool) -> S3ObjectStore:
        return S3ObjectStore(
            "bucket",
            endpoint_url="http://192.0.2.20:9000",
            access_key_id="key-id",
            secret_access_key="secret-key",
            require_tls=require_tls,
        )

    with caplog.at_level(logging.WARNING, logger="warehouse.url_credentials"):
        for _ in range(2):
            store(False)._client()  # builds the client; sends nothing
    [message] = warnings_of(caplog)
    assert "S3 credentials go over plain HTTP to 192.0.2.20:9000" in message
    assert "WAREHOUSE_S3_ENDPOINT" in message
    with pytest.raises(ConfigurationError, match="refusing to send S3 credentials"):
        store(True)._client()


def test_s3_on_loopback_or_https_is_quiet(
    s3_server_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="warehouse.url_credentials"):
        for endpoint in (s3_server_url, "https://192.0.2.20:9000"):
            S3ObjectStore("bucket", endpoint_url=endpoint, require_tls=True)._client()
    assert warnings_of(caplog) == []


def test_a_refused_upload_waits_in_the_outbox_and_the_run_completes(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warehouse
    from warehouse.replication.outbox import Outbox

    monkeypatch.setenv("WAREHOUSE_S3_URL", "s3://bucket/runs")
    monkeypatch.setenv("WAREHOUSE_S3_ENDPOINT", "http://192.0.2.20:9000")
    monkeypatch.setenv("WAREHOUSE_S3_ACCESS_KEY_ID", "key-id")
    monkeypatch.setenv("WAREHOUSE_S3_SECRET_ACCESS_KEY", "secret-key")
    monkeypatch.setenv("WAREHOUSE_REQUIRE_TLS", "1")
    monkeypatch.setenv("WAREHOUSE_CAPTURE_GIT_DIFF", "0")
    with warehouse.start_run("tls", {}, settings=load()) as run:
        run.log_artifact(b"weights", "model.bin")
        run.log_metrics("val", {"acc": 0.5})
    assert run.record.status == "completed"
    [entry] = Outbox(home / "outbox").pending()
    assert entry.kind == "object"
    assert "refusing to send S3 credentials" in (entry.last_error or "")


def test_kibana_gets_the_same_rule(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warehouse.dashboards.kibana_client import KibanaClient

    monkeypatch.setenv("WAREHOUSE_KIBANA_URL", "http://192.0.2.30:5601")
    monkeypatch.setenv("WAREHOUSE_ES_USERNAME", "elastic")
    monkeypatch.setenv("WAREHOUSE_ES_PASSWORD", "pw")
    with caplog.at_level(logging.WARNING, logger="warehouse.url_credentials"):
        KibanaClient(load())
        KibanaClient(load())
    [message] = warnings_of(caplog)
    assert "Kibana credentials go over plain HTTP to 192.0.2.30:5601" in message
    monkeypatch.setenv("WAREHOUSE_REQUIRE_TLS", "1")
    with pytest.raises(ConfigurationError, match="refusing to send Kibana credentials"):
        KibanaClient(load())
