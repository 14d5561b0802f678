""":meth:`Store.timeline` for a store that answers it with run searches (Elasticsearch).

The records (runs that set a new best) are chased: the first scored run by end time, then
the first run after the current record (by end time, then run id) that beats it, one
one-run search per record, so the cost follows the records, never the runs. Every run is
one sorted search (``search_runs`` pages with a point in time past 10,000 hits).

Exact: a run ``X`` ending with the record ``R`` but ordered before it (a smaller run id)
cannot beat ``R``, or the search that found ``R`` would have found ``X`` first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from warehouse.filters import lucene
from warehouse.filters.docpath import get_path
from warehouse.stores.base import RunQuery, Timeline, TimelineQuery

Search = Callable[[RunQuery], list[dict[str, Any]]]


def timeline_by_search(search_runs: Search, query: TimelineQuery) -> Timeline:
    """The answer to ``query`` from ``search_runs`` (see the module docstring)."""
    metric = query.metric
    scoped = lucene.And(
        (lucene.parse(query.filter), lucene.Exists(metric), lucene.Exists("ended_at"))
    )
    out = Timeline()
    if not query.records_only:
        for doc in _scored(search_runs, scoped, metric, None):
            _append(out, doc, metric)
        return out
    found = _scored(search_runs, scoped, metric, 1)
    while found:
        doc = found[0]
        _append(out, doc, metric)
        after = lucene.Range("ended_at", str(doc["ended_at"]), None)
        score = repr(out.score[-1])
        beats = (
            lucene.Range(metric, score, None, include_low=False)
            if query.direction == "max"
            else lucene.Range(metric, None, score, include_high=False)
        )
        found = _scored(search_runs, lucene.And((scoped, after, beats)), metric, 1)
    return out


def _scored(
    search_runs: Search, where: lucene.Node, metric: str, limit: int | None
) -> list[dict[str, Any]]:
    """Runs with an end and a finite value of ``metric``, by end time then run id (a
    non-finite value is never stored as a number, so ``limit=1`` is the first scored run)."""
    docs = search_runs(
        RunQuery(
            filter=where,
            sort=(("ended_at", "asc"), ("run_id", "asc")),
            limit=limit,
            fields=("run_id", "experiment", "ended_at", metric),
        )
    )
    return [d for d in docs if d.get("ended_at") and _finite(get_path(d, metric)) is not None]


def _append(out: Timeline, doc: dict[str, Any], metric: str) -> None:
    score = _finite(get_path(doc, metric))
    assert score is not None
    out.ended_at.append(str(doc["ended_at"]))
    out.run_id.append(str(doc["run_id"]))
    out.experiment.append(doc.get("experiment"))
    out.score.append(score)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
