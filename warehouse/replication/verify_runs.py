"""The rules of ``warehouse sync --verify`` for one run: which copy is right, and what is done.

For each record of a run (its document, each split's samples, its steps, each object), the
local copy and the remote copy are compared by content, each against the digest recorded
when it was written where there is one. :class:`Difference` says what differs (by run id and
path), what was done, and whether a copy was damaged or lost; see
:mod:`~warehouse.replication.verify` for the whole.
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from warehouse.errors import NotFound, WarehouseError
from warehouse.models import run_version
from warehouse.objects.local import recorded, sha256_of
from warehouse.objects.relink import Relink
from warehouse.stores import doc_digest
from warehouse.stores.base import RunQuery, StepRange

if TYPE_CHECKING:
    from warehouse.objects.base import ObjectStore
    from warehouse.objects.local import LocalObjectStore
    from warehouse.replication.outbox import Outbox
    from warehouse.replication.shipper import Shipper
    from warehouse.stores.base import Store
    from warehouse.stores.local import LocalStore
    from warehouse.stores.row_digest import RowDigest

RESHIP = "re-shipped the local copy"
LEFT = "left both copies as they are"


@dataclass(eq=False)
class Difference:
    """One record that differs: of which run, what (naming the path), what was done."""

    run_id: str
    what: str
    action: str
    damage: bool  # a copy changed after it was written, or lost: the verification fails
    ship: tuple[str, dict[str, Any]] | None = None  # the outbox entry re-shipping local
    take: Callable[[], object] | None = None  # writes the remote copy into the local store

    @property
    def left(self) -> bool:
        return self.ship is None and self.take is None

    def repair(self, outbox: Outbox) -> None:
        """Take the remote copy, or queue the local one to be shipped again."""
        if self.take is not None:
            try:
                self.take()
            except WarehouseError as exc:
                self.action = f"could not take the remote copy ({exc}); {LEFT}"
                self.take = None
        if self.ship is not None:
            outbox.add(*self.ship)  # the local copy is there: it may ship at once

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.what}; {self.action}"


@dataclass
class RunIds:
    local: set[str]
    remote: dict[str, str | None]  # run id -> the host it was recorded on


class Sides:
    """The local store and object folder, and the remotes the shipper ships to."""

    def __init__(self, shipper: Shipper, local: LocalStore, objects: LocalObjectStore) -> None:
        self.local = local
        self.local_objects = objects
        self.store = cast("Store", shipper.remote("store")) if shipper.ships("run") else None
        self.objects = (
            cast("ObjectStore", shipper.remote("objects")) if shipper.ships("object") else None
        )
        self.label = shipper.remotes["store"].label if self.store is not None else ""
        self.object_label = shipper.remotes["objects"].label if self.objects is not None else ""
        self.against = " and ".join(x for x in (self.label, self.object_label) if x)
        self.host = socket.gethostname()
        self.relink = Relink(objects, self.objects)  # local links as pushed ones read

    def run_ids(self, only: list[str] | None = None) -> RunIds:
        runs = self.local.home.runs
        try:
            listed = {p.name[:-5] for p in runs.iterdir() if p.name.endswith(".json")}
        except FileNotFoundError:
            listed = set()
        listed = {r for r in listed if not r.startswith(".")}
        if only is not None:
            listed &= set(only)
        remote: dict[str, str | None] = {}
        if self.store is not None:
            query = RunQuery(limit=None, fields=("run_id", "host"))
            if only is not None:
                from warehouse.filters import lucene

                query = RunQuery(
                    filter=lucene.any_of("run_id", only), limit=None, fields=query.fields
                )
            remote = {str(d["run_id"]): d.get("host") for d in self.store.search_runs(query)}
        return RunIds(listed, remote)

    def compare(self, chunk: list[str], ids: RunIds) -> tuple[list[Difference], list[str]]:
        """The differences of the runs in ``chunk``, and those that are remote-only runs
        recorded on other hosts (not this store's to hold)."""
        found: list[Difference] = []
        elsewhere: list[str] = []
        remote_docs = self._remote_docs([r for r in chunk if r in ids.remote])
        for run_id in chunk:
            remote = remote_docs.get(run_id)
            if run_id not in ids.local:
                if remote is None:
                    continue
                if remote.get("host") != self.host:
                    elsewhere.append(run_id)
                    continue
                found.append(
                    Difference(
                        run_id,
                        f"in {self.label} only, though recorded on this host ({self.host}): "
                        f"the local store lost it (no {self.local.home.run_file(run_id)})",
                        f"{LEFT}; 'warehouse pull -q run_id:{run_id}' copies it back",
                        damage=True,
                    )
                )
                continue
            local, problem = self._local_doc(run_id)
            found += self._document(run_id, local, problem, remote)
            doc = local if local is not None else remote
            if doc is None:
                continue
            experiment = str(doc.get("experiment"))
            found += self._samples(run_id, experiment, local, remote)
            if self.store is not None:
                found += self._steps(run_id, experiment)
            found += self._objects(run_id, experiment)
        return found, elsewhere

    # run documents ----------------------------------------------------------------------------
    def _remote_docs(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        if self.store is None or not run_ids:
            return {}
        from warehouse.filters import lucene

        query = RunQuery(filter=lucene.any_of("run_id", run_ids), limit=None)
        return {str(d["run_id"]): d for d in self.store.search_runs(query)}

    def _local_doc(self, run_id: str) -> tuple[dict[str, Any] | None, str | None]:
        path = self.local.home.run_file(run_id)
        try:
            doc = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None, f"{path} is missing"
        except (OSError, ValueError) as exc:
            return None, f"{path} cannot be read ({type(exc).__name__}: {exc})"
        if not isinstance(doc, dict) or doc.get("run_id") != run_id:
            return None, f"{path} is not the run document of {run_id}"
        return doc, None

    def _document(
        self,
        run_id: str,
        local: dict[str, Any] | None,
        problem: str | None,
        remote: dict[str, Any] | None,
    ) -> list[Difference]:
        path = self.local.home.run_file(run_id)
        label = self.label
        take = self._take_doc(remote)
        if local is None:
            if remote is not None and doc_digest.intact(remote) is not False:
                return [
                    Difference(
                        run_id,
                        f"run document: {problem}",
                        f"took the {label} copy",
                        True,
                        take=take,
                    )
                ]
            return [Difference(run_id, f"run document: {problem}", LEFT, True)]
        mine = doc_digest.intact(local)
        if self.store is None:
            if mine is False:
                what = f"run document {path}: changed after it was written (content digest)"
                return [Difference(run_id, what, LEFT, True)]
            return []
        shared = self.relink.doc(local)
        if shared != local and mine is not False:
            shared = doc_digest.stamp(shared)  # as 'warehouse push' sends it
        ship = ("run", {"doc": shared})
        if remote is None:
            if mine is False:
                what = f"run document {path}: changed after it was written, and not in {label}"
                return [Difference(run_id, what, LEFT, True)]
            return [Difference(run_id, f"the run document is not in {label}", RESHIP, False, ship)]
        if doc_digest.digest(shared) == doc_digest.digest(remote):
            return []
        theirs = doc_digest.intact(remote)
        if mine is False and theirs is not False:
            what = f"run document {path}: changed after it was written (content digest)"
            return [Difference(run_id, what, f"took the {label} copy", True, take=take)]
        if theirs is False and mine is not False:
            # Elasticsearch keeps the copy of the highest version: the local one goes again
            # as the next version, here and there alike
            what = f"run document in {label}: changed after it was written (content digest)"
            again, shared_again = _next_version(local), _next_version(shared)
            return [
                Difference(
                    run_id,
                    what,
                    f"{RESHIP} as a new version",
                    True,
                    ("run", {"doc": shared_again}),
                    take=lambda: self.local.write_runs([again]),
                )
            ]
        if mine is False:
            what = f"run document: both copies were changed after they were written ({path})"
            return [Difference(run_id, what, LEFT, True)]
        ours, their = run_version(local), run_version(remote)
        if ours > their:
            what = f"{label} holds an older version of the run document"
            return [Difference(run_id, what, RESHIP, False, ship)]
        if their > ours:
            what = (
                f"{label} holds a newer version of the run document ({remote.get('updated_at')}) "
                f"than {path} ({local.get('updated_at')})"
            )
            return [Difference(run_id, what, f"took the {label} copy", True, take=take)]
        what = f"run document: the same version differs in {path} and in {label}"
        return [Difference(run_id, what, LEFT, True)]

    def _take_doc(self, remote: dict[str, Any] | None) -> Callable[[], object] | None:
        if remote is None:
            return None
        return lambda: self.local.write_runs([remote])

    # samples ----------------------------------------------------------------------------------
    def _samples(
        self,
        run_id: str,
        experiment: str,
        local: dict[str, Any] | None,
        remote: dict[str, Any] | None,
    ) -> list[Difference]:
        folder = self.local.home.samples / run_id
        files = {p.stem for p in folder.glob("*.parquet")} if folder.is_dir() else set()
        expected = _counts(local)
        splits = files | set(expected) | set(_counts(remote))
        found = [self._split(run_id, experiment, split, expected.get(split)) for split in splits]
        return [d for d in sorted(found, key=lambda d: d.what if d else "") if d is not None]

    def _split(
        self, run_id: str, experiment: str, split: str, expected: int | None
    ) -> Difference | None:
        from warehouse.stores.local_samples import split_digests

        path = self.local.home.sample_file(run_id, split)
        where, label = f"samples {split}", self.label
        problem = mine = wanted = None
        if path.is_file():
            try:
                wanted, plain, mine = split_digests(path, self.relink.batch)
            except WarehouseError as exc:
                problem = str(exc)
            else:
                if wanted is not None and plain.hexdigest() != wanted:
                    problem = f"{path}: its rows no longer match the digest recorded at writing"
        elif expected is not None:
            problem = f"{path} is missing (the run says {expected:,} rows)"
        theirs = self._remote_split(run_id, split)
        if problem is None and mine is not None:
            if self.store is None or (theirs and theirs.hexdigest() == mine.hexdigest()):
                return None
            payload = {"run_id": run_id, "experiment": experiment, "split": split}
            there = "none" if theirs is None else f"{theirs.rows:,}"
            same = theirs is not None and theirs.rows == mine.rows
            what = f"{where}: {mine.rows:,} row(s) locally, {there} in {label}"
            what += " (other content)" if same else ""
            return Difference(run_id, what, RESHIP, False, ("samples", payload))
        if theirs is None:
            if problem is None:
                return None
            return Difference(run_id, f"{where}: {problem}", LEFT, True)
        rows = theirs.rows
        trusted = theirs.hexdigest() == wanted if wanted is not None else expected in (None, rows)
        what = f"{where}: {problem or f'{path} is missing'}"
        if not trusted:
            return Difference(run_id, what, f"{LEFT} ({label}'s rows do not match either)", True)
        store = self.store
        assert store is not None

        def take() -> object:
            batches = store.sample_batches(run_id, split)
            return self.local.write_samples(run_id, experiment, split, batches)

        return Difference(run_id, what, f"took the {label} copy ({rows:,} rows)", True, take=take)

    def _remote_split(self, run_id: str, split: str) -> RowDigest | None:
        if self.store is None:
            return None
        from warehouse.stores.row_digest import RowDigest

        try:
            return RowDigest().update(self.store.sample_batches(run_id, split))
        except NotFound:
            return None

    # steps ------------------------------------------------------------------------------------
    def _steps(self, run_id: str, experiment: str) -> list[Difference]:
        assert self.store is not None
        ours = _steps_of(self.local, run_id)
        theirs = _steps_of(self.store, run_id)
        found = []
        missing = [ours[s] for s in sorted(set(ours) - set(theirs))]
        if missing:
            what = f"steps: {len(ours)} locally, {len(theirs)} in {self.label}"
            payload = {"run_id": run_id, "experiment": experiment, "steps": missing}
            found.append(Difference(run_id, what, RESHIP, False, ("steps", payload)))
        lost = [theirs[s] for s in sorted(set(theirs) - set(ours))]
        if lost:
            path = self.local.home.steps_file(run_id)
            what = (
                f"steps: {len(ours)} locally, {len(theirs)} in {self.label}: {len(lost)} "
                f"missing from {path}"
            )

            def take() -> None:
                self.local.write_steps(run_id, experiment, lost)

            found.append(Difference(run_id, what, f"took them from {self.label}", True, take=take))
        return found

    # objects ----------------------------------------------------------------------------------
    def _objects(self, run_id: str, experiment: str) -> list[Difference]:
        found = []
        for key, written in _local_objects(self.local_objects, f"{experiment}/{run_id}/"):
            diff = self._object(run_id, key, written)
            if diff is not None:
                found.append(diff)
        return found

    def _object(self, run_id: str, key: str, written: str | None) -> Difference | None:
        label = self.object_label
        path = self.local_objects.path_of(key)
        mine = sha256_of(path) if path.is_file() else None
        theirs = self._remote_sha256(key)
        payload = {"key": key, "content_type": None, "sha256": mine}
        if mine is not None and mine == written:
            if self.objects is None or theirs == mine:
                return None
            what = f"object {key}: " + (
                f"not in {label}" if theirs is None else f"{label} holds other bytes"
            )
            return Difference(run_id, what, RESHIP, theirs is not None, ("object", payload))
        if written is None:  # no record of what was written: only a missing copy is clear
            if mine is None or theirs == mine or self.objects is None:
                return None
            if theirs is None:
                what = f"object {key}: not in {label}"
                return Difference(run_id, what, RESHIP, False, ("object", payload))
            what = f"object {key}: {path} and {label}'s copy differ, and no sha256 was recorded"
            return Difference(run_id, what, LEFT, True)
        problem = "is missing" if mine is None else "was changed after it was written (sha256)"
        what = f"object {key}: {path} {problem}"
        remote = self.objects
        if remote is None or theirs != written:
            return Difference(run_id, what, LEFT, True)

        def take() -> object:
            data = remote.get(remote.uri(key))
            return self.local_objects.put(key, data, content_type=None, sha256=written)

        return Difference(run_id, what, f"took the {label} copy", True, take=take)

    def _remote_sha256(self, key: str) -> str | None:
        if self.objects is None:
            return None
        try:
            data = self.objects.get(self.objects.uri(key))
        except NotFound:
            return None
        return hashlib.sha256(data).hexdigest()


def _next_version(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as its next version (``updated_at`` a microsecond later), stamped."""
    from datetime import timedelta

    from warehouse.values import iso_utc, parse_time

    before = parse_time(doc.get("updated_at"))
    moment = iso_utc(before + timedelta(microseconds=1)) if before else doc.get("updated_at")
    return doc_digest.stamp({**doc, "updated_at": moment})


def _counts(doc: dict[str, Any] | None) -> dict[str, int]:
    counts = (doc or {}).get("sample_counts")
    if not isinstance(counts, dict):
        return {}
    return {str(k): int(v) for k, v in counts.items() if isinstance(v, int)}


def _steps_of(store: Store, run_id: str) -> dict[int, dict[str, Any]]:
    try:
        return {int(d["seq"]): d for d in store.steps(StepRange(run_id=run_id)) if "seq" in d}
    except NotFound:
        return {}


def _local_objects(objects: LocalObjectStore, prefix: str) -> Iterator[tuple[str, str | None]]:
    """Each key under ``prefix`` (a file, or a name recorded in a ``.sha256``) with the sha256
    it was written with (None: no record)."""
    root = objects.path_of(prefix)
    if not root.is_dir():
        return
    seen: dict[str, str | None] = dict.fromkeys(objects.keys(prefix))
    for record in root.rglob(".sha256"):
        folder = record.parent.relative_to(objects.root).as_posix()
        for name, digest in recorded(record.parent).items():
            seen[f"{folder}/{name}"] = digest
    yield from sorted(seen.items())


__all__ = ["LEFT", "RESHIP", "Difference", "RunIds", "Sides"]
