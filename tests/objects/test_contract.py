"""The ObjectStore contract, run over every backend (local folder and S3)."""

from __future__ import annotations

import hashlib
import urllib.request
from pathlib import Path

import pytest

from warehouse.errors import NotFound
from warehouse.objects.base import ObjectStore, object_key


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


KEY = object_key("exp", "run-1", "outputs", "val/7.png")


class TestObjectStoreContract:
    def test_put_bytes_then_get_returns_the_same_bytes(self, object_store: ObjectStore) -> None:
        data = b"\x89PNG fake image bytes"
        uri = object_store.put(KEY, data, content_type="image/png", sha256=_sha(data))
        assert object_store.get(uri) == data

    def test_put_file_then_get_returns_its_bytes(
        self, object_store: ObjectStore, tmp_path: Path
    ) -> None:
        source = tmp_path / "model.pt"
        source.write_bytes(bytes(range(256)) * 100)
        uri = object_store.put(
            "exp/run-1/artifacts/model.pt",
            source,
            content_type=None,
            sha256=_sha(source.read_bytes()),
        )
        assert object_store.get(uri) == source.read_bytes()

    def test_empty_object_round_trips(self, object_store: ObjectStore) -> None:
        uri = object_store.put(KEY, b"", content_type=None, sha256=_sha(b""))
        assert object_store.get(uri) == b""

    def test_putting_the_same_bytes_twice_returns_the_same_uri(
        self, object_store: ObjectStore
    ) -> None:
        data = b"same"
        first = object_store.put(KEY, data, content_type=None, sha256=_sha(data))
        second = object_store.put(KEY, data, content_type=None, sha256=_sha(data))
        assert first == second
        assert object_store.get(second) == data

    def test_putting_new_bytes_under_a_key_replaces_the_object(
        self, object_store: ObjectStore
    ) -> None:
        object_store.put(KEY, b"old", content_type=None, sha256=_sha(b"old"))
        uri = object_store.put(KEY, b"new!", content_type=None, sha256=_sha(b"new!"))
        assert object_store.get(uri) == b"new!"

    def test_different_keys_get_different_uris(self, object_store: ObjectStore) -> None:
        a = object_store.put("exp/r/outputs/a.bin", b"x", content_type=None, sha256=_sha(b"x"))
        b = object_store.put("exp/r/outputs/b.bin", b"x", content_type=None, sha256=_sha(b"x"))
        assert a != b
        assert object_store.get(a) == object_store.get(b) == b"x"

    def test_exists_tells_a_stored_object_from_a_missing_one(
        self, object_store: ObjectStore
    ) -> None:
        uri = object_store.put(KEY, b"x", content_type=None, sha256=_sha(b"x"))
        assert object_store.exists(uri)
        assert not object_store.exists(uri.replace("7.png", "8.png"))

    def test_get_of_a_missing_object_raises_not_found(self, object_store: ObjectStore) -> None:
        uri = object_store.put(KEY, b"x", content_type=None, sha256=_sha(b"x"))
        with pytest.raises(NotFound, match=r"8\.png"):
            object_store.get(uri.replace("7.png", "8.png"))

    def test_names_with_spaces_and_unicode_round_trip(self, object_store: ObjectStore) -> None:
        key = object_key("exp", "run-1", "outputs", "val/img 1 é+#.png")
        uri = object_store.put(key, b"pixels", content_type="image/png", sha256=_sha(b"pixels"))
        assert object_store.exists(uri)
        assert object_store.get(uri) == b"pixels"
        with urllib.request.urlopen(object_store.url(uri), timeout=10) as response:
            assert response.read() == b"pixels"

    def test_url_serves_the_object_to_a_plain_http_or_file_client(
        self, object_store: ObjectStore
    ) -> None:
        data = b"<svg/>"
        uri = object_store.put(KEY, data, content_type="image/svg+xml", sha256=_sha(data))
        with urllib.request.urlopen(object_store.url(uri, expires_s=120), timeout=10) as response:
            assert response.read() == data

    def test_the_store_is_a_context_manager_returning_itself(
        self, object_store: ObjectStore
    ) -> None:
        with object_store as entered:
            assert entered is object_store
        # closing is not the end: a closed store may be used again (it reconnects)
        uri = object_store.put(KEY, b"again", content_type=None, sha256=_sha(b"again"))
        assert object_store.get(uri) == b"again"


@pytest.mark.parametrize(
    ("experiment", "name"),
    [
        pytest.param("../../../tmp/x", "m.pt", id="dot-dot-experiment"),
        pytest.param("/tmp/x", "m.pt", id="absolute-experiment"),
        pytest.param("exp", "../../outside.pt", id="dot-dot-name"),
        pytest.param("exp", "a\\..\\..\\b.pt", id="backslash-dot-dot"),
        pytest.param("exp\n", "m.pt", id="control-character"),
    ],
)
def test_a_key_that_would_leave_the_store_root_is_refused(experiment: str, name: str) -> None:
    from warehouse.errors import InvalidRecord

    with pytest.raises(InvalidRecord, match="cannot be part of an object key"):
        object_key(experiment, "run-1", "artifacts", name)
