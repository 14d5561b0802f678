"""LocalObjectStore: artifacts and model outputs as files in a folder of the warehouse.

An object is written as durably as the run that points at it: a temporary file, fsync'd,
renamed into place, the folder fsync'd (:func:`warehouse.files.replacing`). Its sha256 is
recorded at write time in ``.sha256`` beside it (one ``<sha256>  <name>`` line per write, the
format of ``sha256sum``, so ``sha256sum -c .sha256`` checks a folder by hand), which is what
``warehouse sync --verify`` holds the file to: a file changed afterwards no longer matches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Self
from urllib.parse import unquote, urlparse

from warehouse.errors import NotFound, ObjectStoreUnavailable
from warehouse.files import append, replacing
from warehouse.objects.base import ProgressCallback, PutItem, put_each

RECORD = ".sha256"
"""The file, in each folder of objects, that records the sha256 each object was written with."""


class LocalObjectStore:
    """Objects under ``root``; URIs are ``file://`` URLs; writes are atomic renames."""

    def __init__(self, root: Path, prepare: Callable[[], object] | None = None) -> None:
        self.root = Path(root)
        self._prepare = prepare  # creates the warehouse folder the right way, first

    def put(self, key: str, source: bytes | Path, *, content_type: str | None, sha256: str) -> str:
        target = self.root / key
        if target.is_file() and sha256_of(target) == sha256:
            return target.resolve().as_uri()
        try:
            if self._prepare is not None:
                self._prepare()
            target.parent.mkdir(parents=True, exist_ok=True)
            with replacing(target) as tmp, open(tmp, "wb") as out:
                if isinstance(source, bytes | bytearray | memoryview):
                    out.write(source)
                else:
                    with open(source, "rb") as src:
                        while chunk := src.read(1 << 20):
                            out.write(chunk)
            append(target.parent / RECORD, f"{sha256}  {target.name}\n".encode(), sync=True)
        except OSError as exc:
            raise ObjectStoreUnavailable(
                f"cannot write {target}: {exc.strerror or exc}; check the warehouse folder's "
                "permissions and free space"
            ) from exc
        return target.resolve().as_uri()

    def put_many(
        self, items: Iterable[PutItem], progress: ProgressCallback | None = None
    ) -> list[str]:
        return put_each(self, items, progress)

    def uri(self, key: str) -> str:
        return (self.root / key).resolve().as_uri()

    def path_of(self, key: str) -> Path:
        """Where the object ``key`` lives (it may not exist)."""
        return self.root / key

    def recorded_sha256(self, key: str) -> str | None:
        """The sha256 ``key`` was last written with (None: no record of it)."""
        path = self.root / key
        return recorded(path.parent).get(path.name)

    def keys(self, prefix: str) -> Iterator[str]:
        """The keys of the objects under ``prefix`` (a folder), sorted."""
        folder = self.root / prefix.rstrip("/")
        if not folder.is_dir():
            return
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                yield path.relative_to(self.root).as_posix()

    def get(self, uri: str) -> bytes:
        path = self._path(uri)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no object at {uri}") from None

    def exists(self, uri: str) -> bool:
        return self._path(uri).is_file()

    def url(self, uri: str, expires_s: int | None = None) -> str:
        return self._path(uri).as_uri()

    def delete_prefix(self, prefix: str) -> int:
        import shutil

        folder = self.root / prefix.rstrip("/")
        if not prefix.endswith("/") or not folder.is_dir():
            return 0
        count = sum(1 for _ in self.keys(prefix))
        shutil.rmtree(folder, ignore_errors=True)
        return count

    def close(self) -> None:
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _path(self, uri: str) -> Path:
        parsed = urlparse(uri)
        if parsed.scheme == "file":
            return Path(unquote(parsed.path))
        if parsed.scheme == "":
            return self.root / uri
        raise NotFound(f"{uri} is not a local object (scheme {parsed.scheme!r})")


def recorded(folder: Path) -> dict[str, str]:
    """``{name: sha256}`` of the objects of ``folder`` as last written (``.sha256``)."""
    try:
        text = (folder / RECORD).read_text("utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return {}
    found: dict[str, str] = {}
    for line in text.splitlines():
        digest, sep, name = line.partition("  ")
        if sep and len(digest) == 64:
            found[name] = digest
    return found


def sha256_of(path: Path) -> str:
    """The sha256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


__all__ = ["RECORD", "LocalObjectStore", "recorded", "sha256_of"]
