"""Reading model outputs back: ``warehouse query samples --download DIR`` writes each listed
sample's output to ``DIR/<sample_id><ext>``, concurrently, with a progress bar on stderr.

Owns the naming of downloaded files, the choice of object store per URI scheme
(``file://`` → the local folder, ``s3://`` → S3), and the transfer progress bar that
:meth:`warehouse.objects.s3.S3ObjectStore.put_many` shows too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from warehouse.errors import ConfigurationError, NotFound
from warehouse.files import atomic_write

if TYPE_CHECKING:
    from warehouse.objects.base import ObjectStore
    from warehouse.settings import Settings

log = logging.getLogger(__name__)

DOWNLOAD_CONCURRENCY = 8

# characters that may not appear in a file name made from a sample id
_UNSAFE = re.compile(r'[\\/:*?"<>|\x00-\x1f]')


def download_outputs(
    rows: Iterable[Mapping[str, Any]],
    dest: Path,
    object_store_for: Callable[[str], ObjectStore] | Settings,
    progress: bool = True,
    *,
    concurrency: int = DOWNLOAD_CONCURRENCY,
) -> list[Path]:
    """The files written: ``dest/<sample_id><ext>`` for every row with an ``output_uri``.

    ``rows`` are sample rows (``sample_id``, ``output_uri``; rows without an output are
    skipped). ``object_store_for`` maps a URI to the store that reads it, or is the
    ``Settings`` to build them from (``file://`` and ``s3://`` URIs). ``ext`` is the suffix
    of the URI's last segment. Files are written atomically; a sample id seen twice gets
    ``-2``, ``-3`` ... Missing objects do not stop the others: once the rest are written,
    ``NotFound`` lists them.
    """
    jobs = _plan(rows, Path(dest))
    if not jobs:
        return []
    Path(dest).mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        store_for = _resolver(object_store_for, stack)
        advance = (
            stack.enter_context(transfer_progress(len(jobs), "downloading"))
            if progress
            else (lambda: None)
        )
        missing: list[str] = []
        pool = stack.enter_context(
            ThreadPoolExecutor(max(1, min(concurrency, len(jobs))), thread_name_prefix="download")
        )
        # stores are picked here, in this thread, so workers never build one concurrently
        planned = [(store_for(uri), uri, path) for uri, path in jobs]
        futures = {pool.submit(_fetch, store, uri, path): uri for store, uri, path in planned}
        for future in as_completed(futures):
            error = future.exception()
            if isinstance(error, NotFound):
                missing.append(futures[future])
            elif error is not None:
                for other in futures:
                    other.cancel()
                raise error
            advance()
    if missing:
        raise NotFound(
            f"{len(missing)} of {len(jobs)} outputs are missing from object storage "
            f"({', '.join(sorted(missing)[:5])}{' ...' if len(missing) > 5 else ''}); "
            f"the other {len(jobs) - len(missing)} were written to {dest}"
        )
    return [path for _, path in jobs]


@contextlib.contextmanager
def transfer_progress(total: int, description: str) -> Iterator[Callable[[], None]]:
    """A rich progress bar on stderr for ``total`` files; yields ``advance()`` (thread-safe)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from warehouse.output import stderr_console

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("files"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=stderr_console(), transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda: bar.advance(task)


def output_file_name(sample_id: str, uri: str) -> str:
    """``<sample_id><ext>``, with ``ext`` from the URI's last segment and unsafe characters
    of the id replaced by ``_``."""
    name = _UNSAFE.sub("_", str(sample_id)).strip() or "_"
    if name in (".", ".."):
        name = name.replace(".", "_")
    suffix = PurePosixPath(unquote(urlparse(uri).path)).suffix
    return f"{name}{suffix}"


def _plan(rows: Iterable[Mapping[str, Any]], dest: Path) -> list[tuple[str, Path]]:
    """(uri, target path) per row with an output; repeated names get -2, -3 ..."""
    jobs: list[tuple[str, Path]] = []
    taken: set[str] = set()
    for row in rows:
        uri = row.get("output_uri")
        if not uri:
            continue
        if "sample_id" not in row:
            raise ConfigurationError(
                "a sample row to download has no sample_id; pass rows from a samples query"
            )
        name = output_file_name(str(row["sample_id"]), str(uri))
        stem, suffix = os.path.splitext(name)
        number = 1
        while name.casefold() in taken:
            number += 1
            name = f"{stem}-{number}{suffix}"
        if number > 1:
            log.warning("sample id %s repeats; its output is saved as %s", row["sample_id"], name)
        taken.add(name.casefold())
        jobs.append((str(uri), dest / name))
    return jobs


def _fetch(store: ObjectStore, uri: str, path: Path) -> None:
    atomic_write(path, store.get(uri))


def _resolver(
    object_store_for: Callable[[str], ObjectStore] | Settings, stack: contextlib.ExitStack
) -> Callable[[str], ObjectStore]:
    """A URI → store function; stores built from settings are closed when the stack ends."""
    if callable(object_store_for):
        return object_store_for
    settings = object_store_for
    stores: dict[str, ObjectStore] = {}

    def store_for(uri: str) -> ObjectStore:
        scheme = urlparse(uri).scheme
        if scheme not in stores:
            stores[scheme] = stack.enter_context(_open_for_scheme(scheme, uri, settings))
        return stores[scheme]

    return store_for


def _open_for_scheme(scheme: str, uri: str, settings: Settings) -> ObjectStore:
    if scheme == "file":
        from warehouse.home import Home
        from warehouse.objects.local import LocalObjectStore

        return LocalObjectStore(Home.from_settings(settings).objects)
    if scheme == "s3":
        from warehouse.objects.s3 import S3ObjectStore, parse_s3_url

        if not settings.s3_url:  # outputs recorded while S3 was configured; same endpoint
            parse_s3_url(f"s3://{urlparse(uri).netloc}")
            settings = settings.model_copy(update={"s3_url": f"s3://{urlparse(uri).netloc}"})
        return S3ObjectStore.from_settings(settings)
    raise ConfigurationError(f"cannot download {uri}: only file:// and s3:// outputs are supported")
