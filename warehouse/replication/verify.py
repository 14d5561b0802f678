"""`warehouse sync --verify`: compare, run by run, the local store with the remote copies.

The outbox ships what it holds; this is the check that what the local store holds really is
remote too, whatever happened on the way (an entry lost with an older version, an index
restored from an old snapshot, a bucket emptied by hand). Per run of the local store:

- the run document: present remotely, and not older (``updated_at``, the run's version);
- samples: the row count of each split (the remote's count of documents of that split);
- steps: the count of distinct ``seq`` (the remote's count of step documents);
- objects: every object the local object folder holds for the run exists remotely.

What differs is queued again (plain outbox entries, idempotent: shipping twice stores once)
and shipped; the runs that differed are then compared again. The result (when, how many runs,
what differed, what remains) is kept in ``<home>/sync-verify.json`` for ``warehouse status``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from warehouse.errors import NotFound
from warehouse.files import atomic_write
from warehouse.models import run_version
from warehouse.values import iso_utc

if TYPE_CHECKING:
    from warehouse.objects.base import ObjectStore
    from warehouse.replication.shipper import Shipper
    from warehouse.stores.base import Store

log = logging.getLogger(__name__)

RESULT_NAME = "sync-verify.json"
_CHUNK = 200  # run ids per remote run query


@dataclass
class Difference:
    """One thing the remote copy lacks: what, of which run, and the outbox entry that fixes
    it (kind and payload)."""

    run_id: str
    what: str  # for people: "samples val: 40 locally, 20 in Elasticsearch"
    kind: str
    payload: dict[str, Any]

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.what}"


@dataclass
class Verification:
    runs: int = 0
    found: list[Difference] = field(default_factory=list)  # before re-shipping
    remaining: list[Difference] = field(default_factory=list)  # after
    unfixable: list[str] = field(default_factory=list)  # the remote holds more than local

    @property
    def ok(self) -> bool:
        return not self.remaining and not self.unfixable

    def summary(self) -> str:
        if not self.found and not self.unfixable:
            return f"{self.runs} run(s) compared: the remote copies match"
        fixed = len(self.found) - len(self.remaining)
        text = f"{self.runs} run(s) compared: {len(self.found)} difference(s), {fixed} re-shipped"
        if self.remaining:
            text += f", {len(self.remaining)} remain"
        if self.unfixable:
            text += f", {len(self.unfixable)} the remote holds more than the local store"
        return text


def verify(shipper: Shipper, progress: Callable[[int, int], None] | None = None) -> Verification:
    """Compare, re-ship what differs (through the outbox), compare those runs again."""
    result = Verification()
    docs = _local_runs(shipper)
    result.runs = len(docs)
    result.found = _compare(shipper, docs, result.unfixable, progress)
    if result.found:
        for diff in result.found:
            shipper.outbox.add(diff.kind, diff.payload)
        shipper.drain()
        again = {d.run_id for d in result.found}
        unfixable: list[str] = []
        result.remaining = _compare(shipper, [d for d in docs if d["run_id"] in again], unfixable)
    return result


def save(home: Path, result: Verification) -> None:
    """Keep the outcome for ``warehouse status``."""
    record = {
        "at": iso_utc(datetime.now(UTC)),
        "runs": result.runs,
        "differences": len(result.found),
        "remaining": len(result.remaining) + len(result.unfixable),
        "summary": result.summary(),
        "details": [str(d) for d in result.remaining][:20] + result.unfixable[:20],
    }
    try:
        home.mkdir(parents=True, exist_ok=True)
        atomic_write(home / RESULT_NAME, (json.dumps(record) + "\n").encode())
    except OSError as exc:
        log.warning("cannot keep the verification result in %s (%s)", home, exc)


def last(home: Path) -> str | None:
    """The last verification for people: ``2026-01-02T03:04:05Z: 30 run(s) compared: ...``."""
    try:
        record = json.loads((home / RESULT_NAME).read_text("utf-8"))
        return f"{record['at']}: {record['summary']}"
    except (OSError, ValueError, KeyError, TypeError):
        return None


# comparing ------------------------------------------------------------------------------------
def _local_runs(shipper: Shipper) -> list[dict[str, Any]]:
    from warehouse.stores.base import RunQuery

    return shipper.local.search_runs(RunQuery(limit=None, sort=(("run_id", "asc"),)))


def _compare(
    shipper: Shipper,
    docs: list[dict[str, Any]],
    unfixable: list[str],
    progress: Callable[[int, int], None] | None = None,
) -> list[Difference]:
    found: list[Difference] = []
    store = cast("Store", shipper.remote("store")) if shipper.ships("run") else None
    objects = cast("ObjectStore", shipper.remote("objects")) if shipper.ships("object") else None
    label = shipper.remotes["store"].label if store is not None else ""
    for start in range(0, len(docs), _CHUNK):
        chunk = docs[start : start + _CHUNK]
        remote_versions = _remote_versions(store, chunk) if store is not None else {}
        for doc in chunk:
            run_id, experiment = str(doc["run_id"]), str(doc["experiment"])
            if store is not None:
                found += _compare_records(
                    shipper, store, label, doc, remote_versions.get(run_id), unfixable
                )
            if objects is not None:
                found += _compare_objects(shipper, objects, run_id, experiment)
        if progress is not None:
            progress(min(start + _CHUNK, len(docs)), len(docs))
    return found


def _remote_versions(store: Store, docs: list[dict[str, Any]]) -> dict[str, int]:
    from warehouse.filters import lucene
    from warehouse.stores.base import RunQuery

    text = lucene.any_of("run_id", (str(d["run_id"]) for d in docs))
    query = RunQuery(filter=text, limit=None, fields=("run_id", "updated_at"))
    return {str(d["run_id"]): run_version(d) for d in store.search_runs(query)}


def _compare_records(
    shipper: Shipper,
    store: Store,
    label: str,
    doc: dict[str, Any],
    remote_version: int | None,
    unfixable: list[str],
) -> list[Difference]:
    run_id, experiment = str(doc["run_id"]), str(doc["experiment"])
    found: list[Difference] = []
    if remote_version is None or remote_version < run_version(doc):
        what = (
            f"the run document is not in {label}"
            if remote_version is None
            else f"{label} holds an older version of the run document"
        )
        found.append(Difference(run_id, what, "run", {"doc": doc}))
    for split, local_rows in _local_splits(shipper, run_id).items():
        remote_rows = _remote_count(store, "samples", run_id=run_id, split=split)
        if remote_rows != local_rows:
            what = f"samples {split}: {local_rows} row(s) locally, {remote_rows} in {label}"
            payload: dict[str, Any] = {"run_id": run_id, "experiment": experiment, "split": split}
            found.append(Difference(run_id, what, "samples", payload))
    steps = _local_steps(shipper, run_id)
    remote_steps = _remote_count(store, "steps", run_id=run_id)
    if remote_steps < len(steps):
        what = f"steps: {len(steps)} locally, {remote_steps} in {label}"
        payload = {"run_id": run_id, "experiment": experiment, "steps": steps}
        found.append(Difference(run_id, what, "steps", payload))
    elif remote_steps > len(steps):
        unfixable.append(f"run {run_id}: steps: {len(steps)} locally, {remote_steps} in {label}")
    return found


def _compare_objects(
    shipper: Shipper, objects: ObjectStore, run_id: str, experiment: str
) -> list[Difference]:
    found = []
    for key, path in _local_objects(shipper, experiment, run_id):
        if not objects.exists(objects.uri(key)):
            sha256 = _sha256(path)
            payload = {"key": key, "content_type": None, "sha256": sha256}
            found.append(Difference(run_id, f"object {key} is not in S3", "object", payload))
    return found


def _local_splits(shipper: Shipper, run_id: str) -> dict[str, int]:
    from warehouse.stores.local_samples import open_parquet

    folder = shipper.local.home.samples / run_id
    try:
        files = sorted(folder.glob("*.parquet"))
    except OSError:
        return {}
    return {path.stem: open_parquet(path).metadata.num_rows for path in files}


def _local_steps(shipper: Shipper, run_id: str) -> list[dict[str, Any]]:
    from warehouse.stores.base import StepRange

    try:
        return list(shipper.local.steps(StepRange(run_id=run_id)))
    except NotFound:
        return []


def _remote_count(store: Store, kind: str, **term: str) -> int:
    count = getattr(store, "count_records", None)
    try:
        if count is not None:
            return int(count(kind, **term))
        return _count_through_contract(store, kind, **term)
    except NotFound:
        return 0


def _count_through_contract(store: Store, kind: str, **term: str) -> int:
    """For a store without ``count_records``: read the records through the contract."""
    from warehouse.stores.base import StepRange

    if kind == "steps":
        return sum(1 for _ in store.steps(StepRange(run_id=term["run_id"], fields=("seq",))))
    batches = store.sample_batches(term["run_id"], term["split"], ["sample_id"])
    return sum(b.num_rows for b in batches)


def _local_objects(shipper: Shipper, experiment: str, run_id: str) -> Iterator[tuple[str, Path]]:
    root = shipper.local_objects.root
    folder = shipper.local_objects.path_of(f"{experiment}/{run_id}")
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.startswith(".tmp-"):
            yield path.relative_to(root).as_posix(), path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


__all__ = ["RESULT_NAME", "Difference", "Verification", "last", "save", "verify"]
