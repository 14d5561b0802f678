"""S3ObjectStore against a real S3 HTTP endpoint (moto's server, or WAREHOUSE_TEST_S3_URL).

Nothing here stubs boto3: requests are counted with a boto3 event hook on the store's client,
and the bucket is inspected with a separate plain client.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pickle
import socket
import threading
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.servers import S3Credentials, S3Server
from warehouse.errors import (
    ConfigurationError,
    NotFound,
    ObjectStoreUnavailable,
    WarehouseError,
)
from warehouse.objects.base import object_key
from warehouse.objects.s3 import MULTIPART_CHUNKSIZE, S3ObjectStore, parse_s3_url
from warehouse.settings import Settings, load

KEY = object_key("digits", "run-1", "outputs", "val/17.png")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _settings(**values: Any) -> Settings:
    """Settings with these values given as CLI flags (over the test's clean environment)."""
    return load(cli=values)


def _requests(store: S3ObjectStore) -> Counter[str]:
    """A live count of the S3 operations the store sends (boto3 ``before-send`` event hook)."""
    sent: Counter[str] = Counter()

    def count(event_name: str, **_: Any) -> None:
        sent[event_name.rsplit(".", 1)[-1]] += 1

    store._client().meta.events.register("before-send.s3", count)
    return sent


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ClosingEndpoint:
    """A TCP endpoint that accepts each connection and closes it at once, counting them."""

    url: str
    connections: int = 0


@pytest.fixture
def closing_endpoint() -> Iterator[ClosingEndpoint]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    endpoint = ClosingEndpoint(f"http://127.0.0.1:{server.getsockname()[1]}")

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            endpoint.connections += 1
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield endpoint
    with contextlib.suppress(OSError):
        server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
    server.close()
    thread.join(timeout=5)


def _store(
    server: S3Server, bucket: str, prefix: str = "warehouse", **options: Any
) -> S3ObjectStore:
    return S3ObjectStore(
        bucket,
        prefix,
        endpoint_url=server.url,
        region=server.region,
        access_key_id=options.pop("access_key_id", server.access_key_id),
        secret_access_key=options.pop("secret_access_key", server.secret_access_key),
        **options,
    )


# configuration -----------------------------------------------------------------------------


def test_construction_is_offline_and_defers_the_client() -> None:
    settings = _settings(s3_url="s3://bucket/p", s3_endpoint=f"http://127.0.0.1:{_closed_port()}")
    store = S3ObjectStore.from_settings(settings)
    assert store._s3 is None  # no client (and no connection) until the first operation


def test_from_settings_reads_every_s3_setting() -> None:
    settings = _settings(
        s3_url="s3://team-bucket/ml/outputs/",
        s3_endpoint="http://minio:9000/",
        s3_region="eu-west-1",
        s3_access_key_id="AKIDEXAMPLE",
        s3_secret_access_key="not-a-real-secret-1234",
        presign_expiry_s=600,
    )
    store = S3ObjectStore.from_settings(settings)
    assert (store.bucket, store.prefix) == ("team-bucket", "ml/outputs")
    assert store.endpoint_url == "http://minio:9000"
    assert store.region == "eu-west-1"
    assert store.presign_expiry_s == 600
    assert "not-a-real-secret-1234" not in repr(store)


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://bucket/prefix", id="not-s3-scheme"),
        pytest.param("bucket/prefix", id="no-scheme"),
        pytest.param("s3://", id="no-bucket"),
        pytest.param("s3:///prefix", id="empty-bucket"),
        pytest.param("s3://bucket/a//b", id="empty-segment"),
        pytest.param("s3://bucket/../b", id="dot-dot"),
    ],
)
def test_a_malformed_s3_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError, match="WAREHOUSE_S3_URL"):
        S3ObjectStore.from_settings(_settings(s3_url=url))


def test_half_a_credential_pair_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="WAREHOUSE_S3_SECRET_ACCESS_KEY"):
        S3ObjectStore.from_settings(_settings(s3_url="s3://b", s3_access_key_id="AKID"))


def test_an_endpoint_without_scheme_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="WAREHOUSE_S3_ENDPOINT"):
        S3ObjectStore.from_settings(_settings(s3_url="s3://b", s3_endpoint="localhost:9000"))


@pytest.mark.parametrize(
    "suffix",
    [
        pytest.param("", id="bucket-only"),
        pytest.param("/", id="bucket-slash"),
        pytest.param("/warehouse", id="prefix"),
        pytest.param("/team/ml/", id="nested-prefix-slash"),
    ],
)
def test_put_returns_the_uri_the_recorder_computes_from_s3_url(
    s3_server: S3Server, s3_bucket: str, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in s3_server.settings_env(s3_bucket).items():
        monkeypatch.setenv(name, value)
    s3_url = f"s3://{s3_bucket}{suffix}"
    settings = _settings(s3_url=s3_url)
    with S3ObjectStore.from_settings(settings) as store:
        uri = store.put(KEY, b"png", content_type="image/png", sha256=_sha(b"png"))
        assert uri == f"{s3_url.rstrip('/')}/{KEY}"
        assert store.get(uri) == b"png"
    assert parse_s3_url(s3_url)[0] == s3_bucket


# uploads ------------------------------------------------------------------------------------


def test_round_trip_keeps_bytes_sha256_and_content_type(
    s3_store: S3ObjectStore, s3_client: Any, tmp_path: Path
) -> None:
    source = tmp_path / "17.png"
    source.write_bytes(os.urandom(100_000))
    digest = _sha(source.read_bytes())
    uri = s3_store.put(KEY, source, content_type="image/png", sha256=digest)

    assert _sha(s3_store.get(uri)) == digest
    head = s3_client.head_object(Bucket=s3_store.bucket, Key=f"warehouse/{KEY}")
    assert head["Metadata"]["sha256"] == digest  # x-amz-meta-sha256
    assert head["ContentType"] == "image/png"
    assert head["ContentLength"] == 100_000


def test_an_object_without_content_type_is_stored_as_octet_stream(
    s3_store: S3ObjectStore, s3_client: Any
) -> None:
    s3_store.put(KEY, b"raw", content_type=None, sha256=_sha(b"raw"))
    head = s3_client.head_object(Bucket=s3_store.bucket, Key=f"warehouse/{KEY}")
    assert head["ContentType"] == "application/octet-stream"


@pytest.mark.slow
def test_a_50_mb_file_is_uploaded_in_parts(
    s3_store: S3ObjectStore, s3_client: Any, tmp_path: Path
) -> None:
    source = tmp_path / "model.ckpt"
    block = os.urandom(1 << 20)
    with open(source, "wb") as out:
        for _ in range(50):
            out.write(block)
    digest = _sha(source.read_bytes())
    sent = _requests(s3_store)

    uri = s3_store.put("exp/run/artifacts/model.ckpt", source, content_type=None, sha256=digest)

    parts = -(-50 * (1 << 20) // MULTIPART_CHUNKSIZE)
    assert sent["UploadPart"] == parts
    assert sent["CompleteMultipartUpload"] == 1
    head = s3_client.head_object(
        Bucket=s3_store.bucket, Key="warehouse/exp/run/artifacts/model.ckpt"
    )
    assert head["ETag"].strip('"').endswith(f"-{parts}")  # a multipart ETag
    assert head["Metadata"]["sha256"] == digest
    assert _sha(s3_store.get(uri)) == digest


def test_large_bytes_are_uploaded_in_parts_too(s3_store: S3ObjectStore, s3_client: Any) -> None:
    data = os.urandom(MULTIPART_CHUNKSIZE + 1024)
    s3_store.put(KEY, data, content_type=None, sha256=_sha(data))
    head = s3_client.head_object(Bucket=s3_store.bucket, Key=f"warehouse/{KEY}")
    assert head["ETag"].strip('"').endswith("-2")
    assert head["Metadata"]["sha256"] == _sha(data)


def test_putting_the_same_sha256_again_sends_no_upload(
    s3_store: S3ObjectStore, s3_client: Any
) -> None:
    data = os.urandom(5000)
    s3_store.put(KEY, data, content_type="image/png", sha256=_sha(data))
    before = s3_client.head_object(Bucket=s3_store.bucket, Key=f"warehouse/{KEY}")
    sent = _requests(s3_store)

    s3_store.put(KEY, data, content_type="image/png", sha256=_sha(data))

    assert sent == Counter({"HeadObject": 1})
    after = s3_client.head_object(Bucket=s3_store.bucket, Key=f"warehouse/{KEY}")
    assert after["LastModified"] == before["LastModified"]


def test_putting_different_bytes_under_the_key_uploads_again(s3_store: S3ObjectStore) -> None:
    s3_store.put(KEY, b"one", content_type=None, sha256=_sha(b"one"))
    sent = _requests(s3_store)
    uri = s3_store.put(KEY, b"two", content_type=None, sha256=_sha(b"two"))
    assert sent["PutObject"] == 1
    assert s3_store.get(uri) == b"two"


# put_many -------------------------------------------------------------------------------------


def _items(n: int, tmp_path: Path, tag: bytes = b"") -> list[tuple[str, Path, str, str]]:
    items = []
    for i in range(n):
        path = tmp_path / f"{i}.png"
        data = tag + os.urandom(2000)
        path.write_bytes(data)
        items.append(
            (object_key("exp", "run", "outputs", f"val/{i}.png"), path, "image/png", _sha(data))
        )
    return items


def test_put_many_uploads_every_item_and_returns_uris_in_order(
    s3_store: S3ObjectStore, tmp_path: Path
) -> None:
    items = _items(40, tmp_path)
    calls: list[tuple[int, int]] = []
    sent = _requests(s3_store)

    uris = s3_store.put_many(items, progress=lambda done, total: calls.append((done, total)))

    assert uris == [f"{s3_store.base_uri}/{key}" for key, *_ in items]
    for uri, (_, path, _, _) in zip(uris, items, strict=True):
        assert s3_store.get(uri) == path.read_bytes()
    # one listing of the folder replaces forty HEADs for keys that are surely new
    assert sent["PutObject"] == 40
    assert sent["HeadObject"] == 0
    assert sent["ListObjectsV2"] == 1
    assert calls[-1] == (40, 40)
    assert [done for done, _ in calls] == list(range(1, 41))


def test_put_many_again_uploads_only_what_changed(s3_store: S3ObjectStore, tmp_path: Path) -> None:
    items = _items(20, tmp_path)
    s3_store.put_many(items)
    changed_path = items[3][1]
    changed_path.write_bytes(b"new prediction")
    items[3] = (items[3][0], changed_path, "image/png", _sha(b"new prediction"))
    sent = _requests(s3_store)

    uris = s3_store.put_many(items)

    assert sent["PutObject"] == 1
    assert s3_store.get(uris[3]) == b"new prediction"


def test_put_many_of_nothing_sends_nothing(s3_store: S3ObjectStore) -> None:
    sent = _requests(s3_store)
    assert s3_store.put_many([]) == []
    assert sum(sent.values()) == 0


def test_put_many_reports_progress_for_the_caller_to_draw(
    s3_store: S3ObjectStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The backend only calls back; the bar on stderr is the caller's (no backend draws)."""
    from warehouse.objects.download import transfer_progress

    with transfer_progress(10, "uploading") as advance:
        s3_store.put_many(_items(10, tmp_path), progress=lambda done, total: advance())
    captured = capsys.readouterr()
    assert "uploading" in captured.err
    assert "10/10" in captured.err
    assert captured.out == ""


def test_put_many_into_a_missing_bucket_raises_the_init_hint(
    s3_server: S3Server, tmp_path: Path
) -> None:
    with (
        _store(s3_server, "wh-no-such-bucket") as store,
        pytest.raises(ConfigurationError, match="warehouse init"),
    ):
        store.put_many(_items(10, tmp_path))


# presigned URLs ----------------------------------------------------------------------------


def test_presigned_url_serves_the_object_and_expires_as_configured(
    s3_server: S3Server, s3_bucket: str
) -> None:
    with _store(s3_server, s3_bucket, presign_expiry_s=900) as store:
        uri = store.put(KEY, b"mask", content_type="image/png", sha256=_sha(b"mask"))
        default = store.url(uri)
        short = store.url(uri, expires_s=60)
    assert parse_qs(urlparse(default).query)["X-Amz-Expires"] == ["900"]
    assert parse_qs(urlparse(short).query)["X-Amz-Expires"] == ["60"]
    assert "X-Amz-Signature" in parse_qs(urlparse(short).query)
    with urllib.request.urlopen(short, timeout=10) as response:
        assert response.read() == b"mask"
        assert response.headers["Content-Type"] == "image/png"


def test_presigned_url_default_expiry_comes_from_settings() -> None:
    settings = _settings(
        s3_url="s3://b/p",
        presign_expiry_s=1234,
        s3_access_key_id="AKID",
        s3_secret_access_key="secret",
        s3_endpoint="http://127.0.0.1:9",
    )
    url = S3ObjectStore.from_settings(settings).url(f"s3://b/p/{KEY}")
    assert parse_qs(urlparse(url).query)["X-Amz-Expires"] == ["1234"]


@pytest.mark.parametrize("expires_s", [0, 7 * 24 * 3600 + 1])
def test_presigned_url_beyond_seven_days_is_a_configuration_error(
    s3_store: S3ObjectStore, expires_s: int
) -> None:
    with pytest.raises(ConfigurationError, match="WAREHOUSE_PRESIGN_EXPIRY_S"):
        s3_store.url(f"{s3_store.base_uri}/{KEY}", expires_s=expires_s)


# errors -------------------------------------------------------------------------------------


def test_strict_auth_accepts_the_right_credentials(
    s3_server: S3Server, s3_bucket: str, s3_strict_auth: S3Credentials
) -> None:
    store = _store(
        s3_server,
        s3_bucket,
        access_key_id=s3_strict_auth.access_key_id,
        secret_access_key=s3_strict_auth.secret_access_key,
    )
    with store:
        uri = store.put(KEY, b"ok", content_type=None, sha256=_sha(b"ok"))
        assert store.get(uri) == b"ok"


@pytest.mark.parametrize("wrong", ["key-id", "secret"])
def test_wrong_credentials_name_the_settings_to_fix(
    s3_server: S3Server,
    s3_bucket: str,
    s3_strict_auth: S3Credentials,
    wrong: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = (
        "WRONG-secret-value-0123456789" if wrong == "secret" else s3_strict_auth.secret_access_key
    )
    key_id = "AKIAWRONGWRONGWRONG1" if wrong == "key-id" else s3_strict_auth.access_key_id
    caplog.set_level(logging.DEBUG)
    with (
        _store(s3_server, s3_bucket, access_key_id=key_id, secret_access_key=secret) as store,
        pytest.raises(ConfigurationError) as caught,
    ):
        store.put(KEY, b"x", content_type=None, sha256=_sha(b"x"))
    message = str(caught.value)
    assert "WAREHOUSE_S3_ACCESS_KEY_ID" in message
    assert "WAREHOUSE_S3_SECRET_ACCESS_KEY" in message
    assert ("InvalidAccessKeyId" if wrong == "key-id" else "SignatureDoesNotMatch") in message
    assert secret not in message
    assert secret not in caplog.text


def test_wrong_credentials_from_the_aws_chain_point_at_the_chain(
    s3_server: S3Server,
    s3_bucket: str,
    s3_strict_auth: S3Credentials,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAWRONGWRONGWRONG1")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    store = S3ObjectStore(s3_bucket, endpoint_url=s3_server.url, region=s3_server.region)
    with store, pytest.raises(ConfigurationError, match="AWS credential chain"):
        store.get(f"s3://{s3_bucket}/{KEY}")


def test_no_credentials_anywhere_is_a_configuration_error(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    store = S3ObjectStore("any-bucket", endpoint_url=s3_server.url, region=s3_server.region)
    with store, pytest.raises(ConfigurationError, match="WAREHOUSE_S3_ACCESS_KEY_ID"):
        store.put(KEY, b"x", content_type=None, sha256=_sha(b"x"))


@pytest.mark.parametrize("operation", ["put", "get", "exists"])
def test_a_missing_bucket_suggests_warehouse_init(s3_server: S3Server, operation: str) -> None:
    uri = f"s3://wh-no-such-bucket/warehouse/{KEY}"
    with _store(s3_server, "wh-no-such-bucket") as store:
        call: Callable[[], object] = {
            "put": lambda: store.put(KEY, b"x", content_type=None, sha256=_sha(b"x")),
            "get": lambda: store.get(uri),
            "exists": lambda: store.exists(uri),
        }[operation]
        with pytest.raises(
            ConfigurationError, match=r"'wh-no-such-bucket' does not exist.*'warehouse init'"
        ):
            call()


@pytest.fixture
def fresh_bucket_name(s3_client: Any) -> Iterator[str]:
    """A bucket name that does not exist yet; the bucket is removed after the test."""
    import uuid

    name = f"wh-init-{uuid.uuid4().hex[:12]}"
    yield name
    try:
        for obj in s3_client.list_objects_v2(Bucket=name).get("Contents", ()):
            s3_client.delete_object(Bucket=name, Key=obj["Key"])
        s3_client.delete_bucket(Bucket=name)
    except Exception:  # the test failed before creating it
        logging.getLogger(__name__).debug("bucket %s was not created", name)


def test_ensure_bucket_creates_a_missing_bucket_once(
    s3_server: S3Server, fresh_bucket_name: str
) -> None:
    with _store(s3_server, fresh_bucket_name) as store:
        assert store.ensure_bucket() is True
        assert store.ensure_bucket() is False
        uri = store.put(KEY, b"x", content_type=None, sha256=_sha(b"x"))
        assert store.exists(uri)


@pytest.mark.parametrize(
    ("operation", "most_connections"),
    [("put", 1), ("get", 1), ("exists", 1), ("ensure_bucket", 1), ("put_many", 10)],
)
def test_an_unreachable_endpoint_is_unavailable_after_one_try(
    operation: str, most_connections: int, tmp_path: Path, closing_endpoint: ClosingEndpoint
) -> None:
    endpoint = closing_endpoint.url
    store = S3ObjectStore(
        "bucket",
        "p",
        endpoint_url=endpoint,
        access_key_id="a",
        secret_access_key="b",
        max_attempts=1,
        connect_timeout_s=1,
    )
    uri = f"s3://bucket/p/{KEY}"
    call: Callable[[], object] = {
        "put": lambda: store.put(KEY, b"x", content_type=None, sha256=_sha(b"x")),
        "get": lambda: store.get(uri),
        "exists": lambda: store.exists(uri),
        "ensure_bucket": store.ensure_bucket,
        "put_many": lambda: store.put_many(_items(10, tmp_path)),
    }[operation]
    with store, pytest.raises(ObjectStoreUnavailable) as caught:
        call()
    assert 1 <= closing_endpoint.connections <= most_connections  # max_attempts=1: no retry
    assert endpoint in str(caught.value)
    assert "warehouse sync" in str(caught.value)


def test_an_unreachable_endpoint_with_default_retries_gives_up_after_three_tries(
    closing_endpoint: ClosingEndpoint,
) -> None:
    settings = _settings(
        s3_url="s3://bucket/p",
        s3_endpoint=closing_endpoint.url,
        s3_access_key_id="a",
        s3_secret_access_key="b",
    )
    with S3ObjectStore.from_settings(settings) as store, pytest.raises(ObjectStoreUnavailable):
        store.put(KEY, b"x", content_type=None, sha256=_sha(b"x"))
    assert closing_endpoint.connections == 3  # the default max_attempts, then it gives up


def test_errors_are_warehouse_errors_that_pickle(s3_server: S3Server) -> None:
    with _store(s3_server, "wh-no-such-bucket") as store, pytest.raises(WarehouseError) as caught:
        store.get(f"s3://wh-no-such-bucket/{KEY}")
    assert type(caught.value).__module__ == "warehouse.errors"
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is type(caught.value)
    assert str(again) == str(caught.value)


def test_a_missing_key_is_not_found(s3_store: S3ObjectStore) -> None:
    with pytest.raises(NotFound, match="no object at"):
        s3_store.get(f"{s3_store.base_uri}/{KEY}")
    assert not s3_store.exists(f"{s3_store.base_uri}/{KEY}")


@pytest.mark.parametrize("uri", ["file:///tmp/x.png", "s3://bucket-only", "https://x/y"])
def test_a_uri_that_is_not_s3_is_not_found(s3_store: S3ObjectStore, uri: str) -> None:
    with pytest.raises(NotFound, match="not an S3 object URI"):
        s3_store.get(uri)


def test_a_vanished_source_file_is_not_found(s3_store: S3ObjectStore, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no longer exists"):
        s3_store.put(KEY, tmp_path / "gone.png", content_type=None, sha256=_sha(b""))
