"""A run's status as the views show it: a ``running`` run whose heartbeat stopped is ``lost``.

A run that is killed without a chance to say so (SIGKILL, out of memory, a lost machine) stays
``running`` in the store: nothing is left to write anything else. But every save of a running
run records ``lost_at``: its last heartbeat plus three of its own beats
(``WAREHOUSE_HEARTBEAT_S``, 30 s by default). So every view derives, at read time and the same
way on every store, with no setting of the reader's:

- a ``running`` run whose ``lost_at`` has passed is shown as ``lost`` (:func:`shown_status`);
- the filters ``status:lost`` and ``status:running`` are rewritten into the stored fields
  before any store sees them (:func:`lost_aware`): ``status:running AND lost_at:<now`` and
  ``status:running AND NOT lost_at:<now``, so they mean the same everywhere.

A ``lost`` run that later ends normally becomes ``completed``: its end writes the status.
Kibana reads the store directly and shows the stored status; ``status:running AND
lost_at < now`` finds the lost runs there.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from warehouse.filters import lucene
from warehouse.values import iso_utc, parse_time

LOST = "lost"
BEATS = 3
_OLD_RUNS_LOST_AFTER_S = BEATS * 30.0  # runs saved before lost_at existed


def lost_after(heartbeat_s: float) -> float:
    """How long a silent run stays ``running``: three beats."""
    return BEATS * heartbeat_s


STATUS_FIELDS = ("status", "lost_at")
"""What :func:`shown_status` reads: add them to a projection that shows the status."""


def shown_status(doc: dict[str, Any], now: datetime) -> Any:
    """The status a view shows for a run document (``lost`` for a silent running run)."""
    status = doc.get("status")
    if status != "running":
        return status
    deadline = parse_time(doc.get("lost_at"))
    if deadline is None:  # saved before lost_at existed
        beat = parse_time(doc.get("heartbeat_at") or doc.get("started_at"))
        deadline = None if beat is None else beat + timedelta(seconds=_OLD_RUNS_LOST_AFTER_S)
    return LOST if deadline is not None and deadline < now else status


def with_shown_status(
    docs: list[dict[str, Any]], now: datetime | None = None
) -> list[dict[str, Any]]:
    """``docs`` with their ``status`` as shown (documents without a status are left alone)."""
    moment = now or datetime.now(UTC)
    for doc in docs:
        if "status" in doc:
            doc["status"] = shown_status(doc, moment)
    return docs


def lost_aware(text: str | lucene.Node | None, now: datetime | None = None) -> lucene.Node:
    """The filter with ``status:lost`` and ``status:running`` spelled in stored fields."""
    return _rewrite(lucene.parse(text), iso_utc(now or datetime.now(UTC)))


def _rewrite(node: lucene.Node, cutoff: str) -> lucene.Node:
    if isinstance(node, lucene.And):
        return lucene.And(tuple(_rewrite(i, cutoff) for i in node.items))
    if isinstance(node, lucene.Or):
        return lucene.Or(tuple(_rewrite(i, cutoff) for i in node.items))
    if isinstance(node, lucene.Not):
        return lucene.Not(_rewrite(node.item, cutoff))
    if (
        isinstance(node, lucene.Term | lucene.Phrase)
        and node.field == "status"
        and not (isinstance(node, lucene.Term) and node.wildcard)
        and node.value in (LOST, "running")
    ):
        running = lucene.Term("status", "running")
        silent = lucene.Range("lost_at", None, cutoff, include_high=False)
        if node.value == LOST:
            return lucene.And((running, silent))
        return lucene.And((running, lucene.Not(silent)))
    return node


__all__ = [
    "LOST",
    "STATUS_FIELDS",
    "lost_after",
    "lost_aware",
    "shown_status",
    "with_shown_status",
]
