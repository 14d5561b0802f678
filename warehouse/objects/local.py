"""LocalObjectStore: artifacts and model outputs as files in a folder of the warehouse."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Self
from urllib.parse import unquote, urlparse

from warehouse.errors import NotFound, ObjectStoreUnavailable
from warehouse.objects.base import ProgressCallback, PutItem, put_each


class LocalObjectStore:
    """Objects under ``root``; URIs are ``file://`` URLs; writes are atomic renames."""

    def __init__(self, root: Path, prepare: Callable[[], object] | None = None) -> None:
        self.root = Path(root)
        self._prepare = prepare  # creates the warehouse folder the right way, first

    def put(self, key: str, source: bytes | Path, *, content_type: str | None, sha256: str) -> str:
        target = self.root / key
        if target.is_file() and _sha256_file(target) == sha256:
            return target.resolve().as_uri()
        try:
            if self._prepare is not None:
                self._prepare()
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".part")
            with os.fdopen(fd, "wb") as out:
                if isinstance(source, bytes | bytearray | memoryview):
                    out.write(source)
                else:
                    with open(source, "rb") as src:
                        while chunk := src.read(1 << 20):
                            out.write(chunk)
            os.replace(tmp, target)
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
        count = sum(1 for p in folder.rglob("*") if p.is_file())
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


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
