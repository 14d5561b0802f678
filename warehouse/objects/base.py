"""The object-store contract (put/get/exists/url) for artifacts and per-sample model outputs.

Keys follow one layout on every backend: ``{experiment}/{run_id}/{kind}/{name}`` under the
store's own root or prefix; ``kind`` is ``artifacts``, ``outputs`` or ``git``. A store returns
URIs (``file:///...`` or ``s3://bucket/key``) that records keep and that ``get``/``url`` take back.
Hashing, deduplication policy and retries live above (the recorder, the outbox).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol, Self

PutItem = tuple[str, bytes | Path, str | None, str]
"""One object of :meth:`ObjectStore.put_many`: ``(key, source, content_type, sha256)``."""
ProgressCallback = Callable[[int, int], None]
"""``progress(done, total)``, called after each object of a batch."""


def object_key(experiment: str, run_id: str, kind: str, name: str) -> str:
    """The key of one object, relative to the store's root/prefix.

    Every part must stay inside that root: no ``..`` or empty segments, no leading ``/``, no
    control characters (a local store writes the key as a path). A backslash in ``name`` is
    taken as a folder separator (a Windows path).
    """
    from warehouse.errors import InvalidRecord

    parts = {
        "experiment name": experiment,
        "run id": run_id,
        "kind": kind,
        "object name": name.replace("\\", "/").lstrip("/"),
    }
    for what, value in parts.items():
        segments = value.split("/")
        if (
            not value
            or any(seg in ("", ".", "..") for seg in segments)
            or any(ord(ch) < 32 or ch == "\x7f" for ch in value)
            or "\\" in value
        ):
            raise InvalidRecord(
                f"{what} {value!r} cannot be part of an object key: it must not be empty, start "
                "with '/', hold '.', '..' or empty path segments, backslashes or control "
                "characters"
            )
    return "/".join(fit_segment(seg) for value in parts.values() for seg in value.split("/"))


SEGMENT_BYTES = 200
"""The longest key segment: most filesystems hold 255 bytes in a file name (ext4, APFS,
NTFS), and a durable write first writes ``.<name>.<pid>.<random>.tmp`` beside it."""


def fit_segment(segment: str) -> str:
    """``segment`` when it fits :data:`SEGMENT_BYTES` in UTF-8; else its start, ``~``, 16 hex
    digits of its sha256 and its suffix (``.txt``, up to 16 bytes): the same on every store
    and every run, and two long names that differ anywhere stay apart."""
    raw = segment.encode()
    if len(raw) <= SEGMENT_BYTES:
        return segment
    dot = segment.rfind(".")
    suffix = segment[dot:] if dot > 0 and len(segment[dot:].encode()) <= 16 else ""
    tag = "~" + hashlib.sha256(raw).hexdigest()[:16] + suffix
    room = SEGMENT_BYTES - len(tag.encode())
    head = raw[:room].decode(errors="ignore")  # cut at a character's boundary
    return head + tag


def put_each(
    store: ObjectStore, items: Iterable[PutItem], progress: ProgressCallback | None = None
) -> list[str]:
    """``put_many`` one object after another, for stores with nothing faster to offer."""
    batch = list(items)
    uris = []
    for done, (key, source, content_type, sha256) in enumerate(batch, 1):
        uris.append(store.put(key, source, content_type=content_type, sha256=sha256))
        if progress is not None:
            progress(done, len(batch))
    return uris


class ObjectStore(Protocol):
    """Where the bytes of artifacts and model outputs go."""

    def put(self, key: str, source: bytes | Path, *, content_type: str | None, sha256: str) -> str:
        """Store ``source`` under ``key`` and return its URI.

        If an object with the same key and the same ``sha256`` is already there, nothing is
        transferred and the existing URI is returned.
        """
        ...

    def put_many(
        self, items: Iterable[PutItem], progress: ProgressCallback | None = None
    ) -> list[str]:
        """``put`` every item (concurrently where the backend can); their URIs, in order.

        The first failure is raised; what was stored stays, and storing again skips it."""
        ...

    def uri(self, key: str) -> str:
        """The URI ``put(key, ...)`` returns, without storing anything (offline)."""
        ...

    def get(self, uri: str) -> bytes:
        """The bytes behind a URI this store returned (``NotFound`` if gone)."""
        ...

    def exists(self, uri: str) -> bool:
        """Whether the object behind ``uri`` is present."""
        ...

    def url(self, uri: str, expires_s: int | None = None) -> str:
        """A URL a browser can open: a presigned HTTPS URL for S3, ``file://`` locally."""
        ...

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object whose key starts with ``prefix`` (a folder, ending in ``/``);
        returns how many went. Deleting what is not there is not an error."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...
