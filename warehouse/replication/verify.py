"""`warehouse sync --verify`: the local store and the remote copies compared by content, both ways.

The outbox ships what it holds; this is the check that what each side holds really is what
was written, whatever happened on the way (a process killed mid-write, an index restored from
an old snapshot, a file edited by hand, a flipped bit). Every run of either side is compared
(:mod:`~warehouse.replication.verify_runs` holds the per-record rules):

- the run document, by its content digest (``content_sha256``, stamped when it was written):
  a copy that no longer matches its own digest was changed afterwards;
- each split's sample rows, by their content digest (recorded in the local file's footer;
  computed again from the file, whose pages carry CRCs, and from the remote rows);
- steps, by the ``seq`` each side holds;
- each object of the run, by its sha256 (recorded beside it when it was written).

A difference is repaired from the side that is right, and the repair is always said: the
local copy is re-shipped (queued in the outbox, then shipped), or the remote copy is taken
into the local store. A copy that was changed after it was written is never taken over a good
one; when neither side can be trusted, both are left as they are. Finding a damaged copy,
a run missing locally, or a difference that remains makes the verification fail (exit 5),
even when it was repaired: a person should know. With no remote configured, the local copies
alone are checked against their digests.

The result (when, how many runs, what differed, what remains) is kept in
``<home>/sync-verify.json`` for ``warehouse status``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from warehouse.files import atomic_write
from warehouse.replication.verify_runs import Difference, Sides
from warehouse.values import iso_utc

if TYPE_CHECKING:
    from warehouse.objects.local import LocalObjectStore
    from warehouse.replication.shipper import Shipper
    from warehouse.stores.local import LocalStore

log = logging.getLogger(__name__)

RESULT_NAME = "sync-verify.json"
_CHUNK = 200  # run ids compared per remote run query


@dataclass
class Verification:
    runs: int = 0
    found: list[Difference] = field(default_factory=list)  # before repairing
    remaining: list[Difference] = field(default_factory=list)  # after
    elsewhere: list[str] = field(default_factory=list)  # remote-only runs of other hosts
    against: str = ""  # "Elasticsearch and S3", or "" (local copies alone)

    @property
    def damaged(self) -> list[Difference]:
        return [d for d in self.found if d.damage]

    @property
    def ok(self) -> bool:
        return not self.remaining and not self.damaged

    def summary(self) -> str:
        what = f"{self.runs} run(s) compared" + (f" with {self.against}" if self.against else "")
        if self.elsewhere:
            what += f" ({len(self.elsewhere)} more only in {self.against}, recorded elsewhere)"
        if not self.found:
            return f"{what}: " + (
                "the remote copies match" if self.against else "the local copies are intact"
            )
        fixed = len(self.found) - len(self.remaining)
        text = f"{what}: {len(self.found)} difference(s), {fixed} repaired"
        if self.damaged:
            text += f", {len(self.damaged)} damaged or lost cop(ies)"
        if self.remaining:
            text += f", {len(self.remaining)} remain"
        return text


def verify(
    shipper: Shipper,
    local: LocalStore,
    objects: LocalObjectStore,
    progress: Callable[[int, int], None] | None = None,
) -> Verification:
    """Compare both sides run by run, repair what can be repaired (saying from which side),
    then compare the runs that differed again."""
    sides = Sides(shipper, local, objects)
    result = Verification(against=sides.against)
    ids = sides.run_ids()
    order = sorted(ids.local | set(ids.remote))
    result.runs = len(order)
    for start in range(0, len(order), _CHUNK):
        chunk = order[start : start + _CHUNK]
        found, elsewhere = sides.compare(chunk, ids)
        result.found += found
        result.elsewhere += elsewhere
        if progress is not None:
            progress(min(start + _CHUNK, len(order)), len(order))
    result.runs -= len(result.elsewhere)
    if not result.found:
        return result
    for diff in result.found:
        diff.repair(shipper.outbox)
    if shipper.remotes:
        shipper.drain()
    again = sorted({d.run_id for d in result.found})
    after = Sides(shipper, local, objects)
    ids = after.run_ids(again)
    for start in range(0, len(again), _CHUNK):
        remaining, _ = after.compare(again[start : start + _CHUNK], ids)
        result.remaining += [d for d in remaining if not d.left]
    result.remaining += [d for d in result.found if d.left]
    return result


def save(home: Path, result: Verification) -> None:
    """Keep the outcome for ``warehouse status``."""
    problems = result.remaining + [d for d in result.damaged if d not in result.remaining]
    record = {
        "at": iso_utc(datetime.now(UTC)),
        "runs": result.runs,
        "differences": len(result.found),
        "remaining": len(result.remaining),
        "damaged": len(result.damaged),
        "summary": result.summary(),
        "details": [str(d) for d in problems][:40],
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


__all__ = ["RESULT_NAME", "Difference", "Verification", "last", "save", "verify"]
