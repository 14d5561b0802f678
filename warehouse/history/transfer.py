"""Moving history between the embedded store and the team's: ``warehouse push`` and ``pull``.

**push** copies local runs (with their samples, steps, artifacts and outputs) to the configured
Elasticsearch and S3. Per run, in this order: objects, samples, steps, then the run document
last, so a run visible on the team cluster is complete. A run whose remote copy is as new
(``updated_at``) with the same sample counts is already there and is skipped, which makes a
second push store nothing twice and makes an interrupted push resumable: running it again
redoes only the runs whose document had not arrived. Every write is idempotent by id, and a
newer remote version is never replaced by an older local one (the stores keep the newest).
Links to outputs in this machine's folder (``file://``) become the S3 URIs they were pushed to.

**pull** is the reverse for a filter: run documents (newest version kept), samples, and the
steps the local copy lacks. Outputs stay where they are (their S3 links keep working).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.errors import ConfigurationError
from warehouse.filters import lucene
from warehouse.objects.relink import Relink
from warehouse.stores.base import RunQuery, StepRange
from warehouse.stores.doc_digest import FIELD, stamp

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.objects.base import ObjectStore
    from warehouse.objects.local import LocalObjectStore
    from warehouse.stores.base import Store
    from warehouse.stores.local import LocalStore

Progress = Callable[[int, int, int], None]
"""``progress(runs_done, runs_total, bytes_done)``."""
CHUNK = 500  # runs per version lookup: a bounded filter, whatever the history's size


@dataclass
class Transfer:
    """What a push or pull did: counted, for the closing line and for scripts."""

    runs: int = 0  # copied
    present: int = 0  # already there (as new, same sample counts): skipped
    sample_rows: int = 0
    steps: int = 0
    objects: int = 0
    bytes: int = 0
    local_links: int = 0  # runs still linking this machine's folder (no object store to push to)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def row(self) -> dict[str, int]:
        return {
            "runs": self.runs,
            "already_there": self.present,
            "sample_rows": self.sample_rows,
            "steps": self.steps,
            "objects": self.objects,
            "bytes": self.bytes,
        }


def push(
    local: LocalStore,
    local_objects: LocalObjectStore,
    remote: Store | None,
    remote_objects: ObjectStore | None,
    *,
    filter: str | None = None,
    progress: Progress | None = None,
    workers: int = 4,
) -> Transfer:
    """Copy the local runs matching ``filter`` to ``remote`` and/or ``remote_objects``."""
    if remote is None and remote_objects is None:
        raise ConfigurationError(
            "nothing to push to: set WAREHOUSE_ES_URL (runs, samples, steps) and/or "
            "WAREHOUSE_S3_URL (artifacts and outputs)"
        )
    docs = _all_runs(local, filter)
    done = Transfer()
    if not docs:
        return done
    relink = Relink(local_objects, remote_objects)
    counter = _Counter(len(docs), progress)
    for start in range(0, len(docs), CHUNK):
        chunk = docs[start : start + CHUNK]
        there = _remote_state(remote, chunk) if remote is not None else {}

        def one(doc: dict[str, Any], there: dict[str, dict[str, Any]] = there) -> None:
            if remote is not None and _is_present(doc, there.get(str(doc["run_id"]))):
                done.add(present=1)
            else:
                _push_run(doc, local, local_objects, remote, remote_objects, relink, done)
            counter.step(done.bytes)

        _each(one, chunk, workers)
    return done


def pull(
    remote: Store,
    local: LocalStore,
    *,
    filter: str | None = None,
    progress: Progress | None = None,
    workers: int = 4,
) -> Transfer:
    """Copy the remote runs matching ``filter`` into the local store."""
    docs = _all_runs(remote, filter)
    done = Transfer()
    counter = _Counter(len(docs), progress)
    for start in range(0, len(docs), CHUNK):
        chunk = docs[start : start + CHUNK]
        here = _remote_state(local, chunk)

        def one(doc: dict[str, Any], here: dict[str, dict[str, Any]] = here) -> None:
            if _is_present(doc, here.get(str(doc["run_id"]))):
                done.add(present=1)
            else:
                _pull_run(doc, remote, local, done)
            counter.step(done.bytes)

        _each(one, chunk, workers)
    return done


# --- one run -------------------------------------------------------------------------------


def _push_run(
    doc: dict[str, Any],
    local: LocalStore,
    local_objects: LocalObjectStore,
    remote: Store | None,
    remote_objects: ObjectStore | None,
    relink: Relink,
    done: Transfer,
) -> None:
    run_id, experiment = str(doc["run_id"]), str(doc["experiment"])
    if remote_objects is not None:
        items = list(_objects_of(local_objects, experiment, run_id))
        if items:
            remote_objects.put_many(items)
            done.add(objects=len(items), bytes=sum(Path(i[1]).stat().st_size for i in items))
    if remote is None:
        return
    for split in sorted(doc.get("sample_counts") or {}):
        batches = [relink.batch(b) for b in _batches(local, run_id, split)]
        if batches:
            rows = remote.write_samples(run_id, experiment, split, batches)
            done.add(sample_rows=rows, bytes=sum(b.nbytes for b in batches))
    steps = list(local.steps(StepRange(run_id=run_id)))
    if steps:
        remote.write_steps(run_id, experiment, steps)
        done.add(steps=len(steps))
    shared = relink.doc(doc)
    if FIELD in doc and shared != doc:
        shared = stamp(shared)  # its links changed: the digest is of what is sent
    remote.write_runs([shared])  # last: a run visible remotely is complete
    done.add(runs=1, local_links=int(relink.local_links(shared)))


def _pull_run(doc: dict[str, Any], remote: Store, local: LocalStore, done: Transfer) -> None:
    run_id, experiment = str(doc["run_id"]), str(doc["experiment"])
    for split in sorted(doc.get("sample_counts") or {}):
        batches = list(_batches(remote, run_id, split))
        if batches:
            rows = local.write_samples(run_id, experiment, split, batches)
            done.add(sample_rows=rows, bytes=sum(b.nbytes for b in batches))
    last = _last_seq(local, run_id)
    steps = list(remote.steps(StepRange(run_id=run_id, after_seq=last)))
    if steps:
        local.write_steps(run_id, experiment, steps)
        done.add(steps=len(steps))
    local.write_runs([doc])
    done.add(runs=1)


# --- helpers -------------------------------------------------------------------------------


def _all_runs(store: Store, filter: str | None) -> list[dict[str, Any]]:
    return store.search_runs(
        RunQuery(filter=filter, sort=(("started_at", "asc"),), limit=None, fields=None)
    )


def _remote_state(store: Store, docs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What ``store`` holds of these runs: their version and sample counts, by run id."""
    text = lucene.any_of("run_id", (str(d["run_id"]) for d in docs))
    found = store.search_runs(
        RunQuery(filter=text, limit=None, fields=["run_id", "updated_at", "sample_counts"])
    )
    return {str(d["run_id"]): d for d in found}


def _is_present(doc: dict[str, Any], there: dict[str, Any] | None) -> bool:
    from warehouse.models import run_version

    if there is None:
        return False
    same_samples = (there.get("sample_counts") or {}) == (doc.get("sample_counts") or {})
    return run_version(there) >= run_version(doc) and same_samples


def _batches(store: Store, run_id: str, split: str) -> Iterator[pa.RecordBatch]:
    from warehouse.errors import NotFound

    try:
        yield from store.sample_batches(run_id, split)
    except NotFound:  # counted but never written (a crash mid-run): nothing to copy
        return


def _last_seq(local: LocalStore, run_id: str) -> int:
    from warehouse.errors import NotFound

    try:
        return local.last_seq(run_id)
    except NotFound:  # not here yet: every step is new
        return -1


def _objects_of(
    objects: LocalObjectStore, experiment: str, run_id: str
) -> Iterator[tuple[str, Path, str | None, str]]:
    """Every object stored for one run (artifacts, outputs, the git diff), as put items."""
    import hashlib
    import mimetypes

    folder = objects.root / experiment / run_id
    if not folder.is_dir():
        return
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        key = path.relative_to(objects.root).as_posix()
        yield key, path, mimetypes.guess_type(path.name)[0], digest.hexdigest()


class _Counter:
    def __init__(self, total: int, progress: Progress | None) -> None:
        self.total, self.progress, self.done = total, progress, 0
        self._lock = threading.Lock()
        if progress is not None:
            progress(0, total, 0)

    def step(self, nbytes: int) -> None:
        with self._lock:
            self.done += 1
            if self.progress is not None:
                self.progress(self.done, self.total, nbytes)


def _each(work: Callable[[dict[str, Any]], None], docs: Sequence[dict[str, Any]], n: int) -> None:
    """``work`` over ``docs`` on ``n`` threads; the first error stops the rest and is raised
    (what was copied stays copied: the next run of the command goes on from there)."""
    if n <= 1 or len(docs) <= 1:
        for doc in docs:
            work(doc)
        return
    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(work, doc) for doc in docs]
        try:
            for future in futures:
                future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
