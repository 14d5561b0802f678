"""Tidying the history: tags, notes and experiment names changed after a run was recorded,
and runs deleted.

Every change is a new version of the run document (``updated_at`` grows), written through the
recording store, so it takes the durable path every run write takes: the local copy and the
outbox first, then Elasticsearch. An older copy arriving later (a replayed outbox entry, a
push) never undoes it, because stores keep the newest version.

A run that is still ``running`` is refused: its own next save would write its in-memory
record over the change. A ``lost`` run (its process died) can be edited.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from warehouse.errors import ConfigurationError
from warehouse.filters import lucene
from warehouse.stores.doc_digest import stamp

if TYPE_CHECKING:
    from warehouse.objects.base import ObjectStore
    from warehouse.settings import Settings
    from warehouse.stores.base import Store

log = logging.getLogger(__name__)

TAG = re.compile(r"[^\s,]{1,100}")
"""A tag: 1-100 characters, no blanks or commas (a keyword, as Kibana's filter bar shows it)."""
NOTE_MAX = 10_000


@dataclass(frozen=True)
class TagChange:
    """Tags to add and to remove, from ``+baseline -debug`` (a bare ``baseline`` adds)."""

    add: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()

    @classmethod
    def parse(cls, tokens: Iterable[str]) -> TagChange:
        add: list[str] = []
        remove: list[str] = []
        for token in tokens:
            sign, name = (token[0], token[1:]) if token[:1] in "+-" else ("+", token)
            check_tag(name)
            (add if sign == "+" else remove).append(name)
        if not add and not remove:
            raise ConfigurationError("no tag given: e.g. `warehouse runs tag RUN +baseline -debug`")
        both = set(add) & set(remove)
        if both:
            raise ConfigurationError(f"tag(s) {sorted(both)} are both added and removed")
        return cls(tuple(dict.fromkeys(add)), tuple(dict.fromkeys(remove)))

    def apply(self, tags: Sequence[str]) -> list[str]:
        kept = [t for t in tags if t not in self.remove]
        return kept + [t for t in self.add if t not in kept]


def check_tag(name: str) -> str:
    if not TAG.fullmatch(name):
        raise ConfigurationError(
            f"tag {name!r} cannot be used: a tag is 1-100 characters without blanks or commas, "
            "e.g. +baseline or +paper-2026"
        )
    return name


def check_note(text: str) -> str:
    if len(text) > NOTE_MAX:
        raise ConfigurationError(
            f"the note is {len(text):,} characters; keep it under {NOTE_MAX:,} (link to a "
            "longer document instead)"
        )
    return text


@dataclass(frozen=True)
class Edited:
    """One run as changed: what a ``warehouse runs`` command prints."""

    run_id: str
    experiment: str
    tags: list[str]
    note: str | None
    changed: bool

    def row(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "experiment": self.experiment,
            "tags": ",".join(self.tags),
            "note": self.note or "",
            "changed": self.changed,
        }


def select_runs(
    store: Store, run_ids: Iterable[str] = (), filter: str | None = None
) -> list[dict[str, Any]]:
    """The stored documents (as stored: no status rewriting) of the runs named by id (a
    unique prefix works) and of the runs matching ``filter``; each once, in the order given."""
    from warehouse.query import views
    from warehouse.stores.base import RunQuery

    wanted: dict[str, None] = {}
    for run_id in run_ids:
        wanted[str(views.get_run(store, run_id, fields=["run_id"])["run_id"])] = None
    if filter is not None:
        for doc in store.search_runs(
            RunQuery(filter=filter, sort=(("run_id", "asc"),), limit=None, fields=["run_id"])
        ):
            wanted[str(doc["run_id"])] = None
    if not wanted:
        return []
    docs: dict[str, dict[str, Any]] = {}
    ids = list(wanted)
    for start in range(0, len(ids), 500):  # bounded filters, whatever the selection's size
        chunk = ids[start : start + 500]
        text = lucene.any_of("run_id", chunk)
        for doc in store.search_runs(RunQuery(filter=text, limit=None)):
            docs[str(doc["run_id"])] = doc
    return [docs[r] for r in ids if r in docs]


def edit_runs(
    write: Store,
    docs: Sequence[dict[str, Any]],
    change: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    now: datetime | None = None,
) -> list[Edited]:
    """Apply ``change`` (document in, changed copy out) to each run and write the ones that
    changed as new versions through ``write``. Refuses runs still recording."""
    moment = now or datetime.now(UTC)
    refuse_running(docs, moment, "change them after they end (its next save would undo it)")
    out: list[Edited] = []
    changed_docs: list[dict[str, Any]] = []
    for doc in docs:
        new = change(dict(doc))
        changed = new != doc
        if changed:
            new["updated_at"] = _next_version(doc.get("updated_at"), moment)
            changed_docs.append(stamp(new))
        out.append(
            Edited(
                run_id=str(new["run_id"]),
                experiment=str(new.get("experiment")),
                tags=list(new.get("tags") or []),
                note=new.get("note"),
                changed=changed,
            )
        )
    if changed_docs:
        write.write_runs(changed_docs)
    return out


def refuse_running(docs: Sequence[dict[str, Any]], now: datetime, advice: str) -> None:
    """A clear error naming the runs still recording (a ``lost`` run is not one of them)."""
    from warehouse.query.status import shown_status

    busy = [str(d["run_id"]) for d in docs if shown_status(d, now) == "running"]
    if busy:
        raise ConfigurationError(
            f"{len(busy)} run(s) are still running ({', '.join(busy[:3])}); {advice}"
        )


def _next_version(previous: Any, now: datetime) -> str:
    """``now``, or just after the stored version when a clock is behind: versions only grow."""
    from warehouse.values import iso_utc, parse_time

    before = parse_time(previous)
    moment = now if before is None or now > before else before + timedelta(microseconds=1)
    return iso_utc(moment)


def tag(change: TagChange) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def apply(doc: dict[str, Any]) -> dict[str, Any]:
        doc["tags"] = change.apply(list(doc.get("tags") or []))
        return doc

    return apply


def note(text: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    check_note(text)

    def apply(doc: dict[str, Any]) -> dict[str, Any]:
        doc["note"] = text or None
        return doc

    return apply


def rename_experiment(new: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    from warehouse.recording.recorder import normalise_experiment

    name = normalise_experiment(new)

    def apply(doc: dict[str, Any]) -> dict[str, Any]:
        doc["experiment"] = name
        return doc

    return apply


def select_for_deletion(
    settings: Settings, run_ids: Sequence[str] = (), filter: str | None = None
) -> list[dict[str, Any]]:
    """The runs to delete: from the local store, which holds every run recorded here (those
    still waiting in the outbox too), and from Elasticsearch when one is configured and a run
    is not local or a filter may match runs recorded elsewhere. With Elasticsearch down, the
    local runs are selected and their deletion waits in the outbox like every other write;
    only a run that is not local cannot be looked up then (exit 3)."""
    from warehouse.errors import NotFound, StoreUnavailable
    from warehouse.stores import open_local_store, open_store

    found: dict[str, dict[str, Any]] = {}
    missing: dict[str, NotFound] = {}
    with open_local_store(settings) as local:
        for run_id in run_ids:
            try:
                found.update((str(d["run_id"]), d) for d in select_runs(local, [run_id]))
            except NotFound as exc:
                missing[run_id] = exc
        if filter is not None:
            found.update((str(d["run_id"]), d) for d in select_runs(local, (), filter))
    if settings.store_engine == "elasticsearch" and (missing or filter is not None):
        try:
            with open_store(settings) as remote:
                for run_id in list(missing):
                    with contextlib.suppress(NotFound):
                        docs = select_runs(remote, [run_id])
                        found.update((str(d["run_id"]), d) for d in docs)
                        del missing[run_id]
                if filter is not None:
                    docs = select_runs(remote, (), filter)
                    found.update(
                        (str(d["run_id"]), d) for d in docs if str(d["run_id"]) not in found
                    )
        except StoreUnavailable as exc:
            if missing:
                raise StoreUnavailable(
                    f"cannot look up run(s) {', '.join(missing)} in Elasticsearch ({exc}); "
                    "they are not in the local store. Delete them once it is back",
                    url=getattr(exc, "url", None),
                ) from None
            log.warning("%s; the deletion selects the runs of the local store only", exc)
    if missing:
        raise next(iter(missing.values()))
    return list(found.values())


def delete_runs(
    store: Store,
    objects: ObjectStore,
    docs: Sequence[dict[str, Any]],
    *,
    now: datetime | None = None,
) -> int:
    """Delete these runs everywhere: documents, samples, steps, and their artifacts and
    outputs (object keys are per run, so no other run shares them). Through the recording
    store and object store, the deletion takes the durable path and waiting writes of these
    runs leave the outbox, so nothing comes back after a sync or a push. Refuses runs still
    recording."""
    refuse_running(docs, now or datetime.now(UTC), "delete them after they end, or once lost")
    for doc in docs:
        for prefix in object_prefixes(doc, objects.uri("_")[:-1]):
            objects.delete_prefix(prefix)
    return store.delete_runs([str(d["run_id"]) for d in docs])


def object_prefixes(doc: dict[str, Any], base: str) -> list[str]:
    """The key prefixes holding one run's objects: ``EXPERIMENT/RUN_ID/`` under its current
    experiment name, and under any name its stored links show (it may have been renamed)."""
    from warehouse.filters.docpath import strings

    run_id = str(doc["run_id"])
    marker = f"/{run_id}/"
    found = {f"{doc['experiment']}{marker}"}
    for text in strings(doc):
        if text.startswith(base) and marker in text:
            found.add(text[len(base) :].split(marker)[0] + marker)
    return sorted(found)
