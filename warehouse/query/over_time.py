"""The running best of a metric over time: one point per run, per record, or per period.

:func:`over_time` answers ``warehouse query over-time`` (and the report's and Kibana's
over-time charts); its cost follows the records and the points, never the number of runs.
Split out of :mod:`warehouse.query.views`, which re-exports the public names here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

from warehouse.errors import ConfigurationError, UnknownField
from warehouse.filters.docpath import get_path
from warehouse.models import Metric, resolve_metric
from warehouse.query.lookup import _search, and_filters, finite
from warehouse.query.status import lost_aware
from warehouse.stores.base import CountQuery, Order, RunQuery, Store, TimelineQuery
from warehouse.values import parse_time

Interval = Literal["day", "week", "month"]
INTERVALS: tuple[Interval, ...] = ("day", "week", "month")

OVER_TIME_COLUMNS = (
    "ended_at",
    "run_id",
    "experiment",
    "score",
    "best_so_far",
    "best_run_id",
    "is_new_best",
)
OVER_TIME_PERIOD_COLUMNS = (
    "period", "run_count", "run_id", "experiment", "score", "best_so_far", "best_run_id",
    "is_new_best",
)  # fmt: skip
"""The columns of over-time rows, in order (a CSV header even when nothing matched)."""


def over_time(
    store: Store,
    metric: str,
    direction: str | None = None,
    filter: str | None = None,
    interval: Interval | None = None,
    limit: int | None = None,
    every_run: bool = True,
) -> list[dict[str, Any]]:
    """The running best of ``metric`` by run end time (ended runs with a value only).

    Without ``interval``, one point per run: ended_at, run_id, experiment, score,
    best_so_far, best_run_id, is_new_best; with ``every_run=False`` only the runs that set a
    new best (what the CLI shows unless asked for every run), found record by record.
    With ``day``/``week``/``month``, one point per period from the first to the last (empty
    periods included): period (its first day), run_count, run_id/experiment/score of the
    period's best run, best_so_far and best_run_id at the period's end, is_new_best.
    ``limit`` keeps the latest points.

    Only the per-run answer without a ``limit`` reads every run (it lists them, columns from
    one :meth:`Store.timeline` question). Otherwise the records come from
    :meth:`Store.timeline` (local: a running best over the catalog's columns in numpy;
    Elasticsearch: one one-run search per new best), the latest ``limit`` runs are read in
    one question, and each period is asked for its best run and its count: in Python, the
    cost follows the records and the points, never the number of runs.
    """
    m = resolve_metric(metric, direction)
    if interval is not None and interval not in INTERVALS:
        raise ConfigurationError(f"interval {interval!r} is not one of {', '.join(INTERVALS)}")
    scoped = and_filters(filter, f"_exists_:{m.path}", "_exists_:ended_at")
    try:
        if interval is not None:
            return _over_time_by(store, m, scoped, filter, interval, limit)
        if not every_run:
            points = _running_best(_timeline(store, m, filter, records_only=True), m)
            return points[-limit:] if limit else points
        if limit:
            return _over_time_latest(store, m, scoped, filter, limit)
        return _running_best(_timeline(store, m, filter, records_only=False), m)
    except UnknownField as exc:
        if exc.field == m.path:
            return []  # no run has a value of the metric yet
        raise


def _timeline(
    store: Store, m: Metric, filter: str | None, *, records_only: bool
) -> Iterator[tuple[str, str, str | None, float]]:
    """(ended_at, run_id, experiment, score) of the scored runs (or the records) by end
    time: one :meth:`Store.timeline` question."""
    found = store.timeline(
        TimelineQuery(m.path, m.direction, lost_aware(filter), records_only=records_only)
    )
    return zip(found.ended_at, found.run_id, found.experiment, found.score, strict=True)


_Scored = tuple[datetime, dict[str, Any], float]


def _scored_runs(
    store: Store, m: Metric, where: str | None, order: Order, limit: int | None
) -> list[_Scored]:
    """Runs with an end and a finite value of ``m``, by end time then run id."""
    docs = _search(
        store,
        RunQuery(
            filter=where,
            sort=(("ended_at", order), ("run_id", order)),
            limit=limit,
            fields=("run_id", "experiment", "ended_at", m.path),
        ),
    )
    out = []
    for doc in docs:
        ended = parse_time(doc.get("ended_at"))
        score = finite(get_path(doc, m.path))
        if ended is not None and score is not None:
            out.append((ended, doc, score))
    return out


def _records(store: Store, m: Metric, filter: str | None) -> list[_Scored]:
    """Every run that set a new best, in end-time order (:meth:`Store.timeline`)."""
    records: list[_Scored] = []
    for ended_at, run_id, experiment, score in _timeline(store, m, filter, records_only=True):
        ended = parse_time(ended_at)
        assert ended is not None
        doc = {"run_id": run_id, "experiment": experiment, "ended_at": ended_at}
        records.append((ended, doc, score))
    return records


def _key(item: _Scored) -> tuple[datetime, str]:
    return item[0], str(item[1].get("run_id"))


def _best_at(records: Sequence[_Scored], key: tuple[datetime, str]) -> _Scored | None:
    """The record standing at ``key`` (end time, run id): the last one not after it."""
    standing = None
    for record in records:
        if _key(record) > key:
            break
        standing = record
    return standing


def _over_time_latest(
    store: Store, m: Metric, where: str | None, filter: str | None, limit: int
) -> list[dict[str, Any]]:
    latest = _scored_runs(store, m, where, "desc", limit)
    latest.sort(key=_key)
    records = _records(store, m, filter)
    record_ids = {str(r[1].get("run_id")) for r in records}
    points = []
    for item in latest:
        _, doc, score = item
        standing = _best_at(records, _key(item))
        run_id = str(doc.get("run_id"))
        points.append(
            {
                "ended_at": doc.get("ended_at"),
                "run_id": run_id,
                "experiment": doc.get("experiment"),
                "score": score,
                "best_so_far": standing[2] if standing else score,
                "best_run_id": str(standing[1].get("run_id")) if standing else run_id,
                "is_new_best": run_id in record_ids,
            }
        )
    return points


def _over_time_by(
    store: Store,
    m: Metric,
    where: str | None,
    filter: str | None,
    interval: Interval,
    limit: int | None,
) -> list[dict[str, Any]]:
    records = _records(store, m, filter)
    if not records:
        return []
    last = _scored_runs(store, m, where, "desc", 1)
    first_period = period_start(records[0][0], interval)
    last_period = period_start(last[0][0], interval)
    periods = []
    period = first_period
    while period <= last_period:
        periods.append(period)
        period = _next_period(period, interval)
    if limit:
        periods = periods[-limit:]
    order: Order = "desc" if m.direction == "max" else "asc"
    points: list[dict[str, Any]] = []
    for start in periods:
        end = _next_period(start, interval)
        span = f"ended_at:[{start.isoformat()} TO {end.isoformat()}}}"
        within = and_filters(where, span)
        tops = _search(
            store,
            RunQuery(
                filter=within,
                sort=((m.path, order), ("ended_at", "asc"), ("run_id", "asc")),
                limit=1,
                fields=("run_id", "experiment", "ended_at", m.path),
            ),
        )
        top = tops[0] if tops else None
        count = sum(store.count_by(CountQuery("experiment", within)).values()) if top else 0
        closing = datetime.combine(end, datetime.min.time(), UTC)
        standing = _best_at(records, (closing, ""))
        new_here = [r for r in records if period_start(r[0], interval) == start]
        points.append(
            {
                "period": start.isoformat(),
                "run_count": count,
                "run_id": top.get("run_id") if top else None,
                "experiment": top.get("experiment") if top else None,
                "score": finite(get_path(top, m.path)) if top else None,
                "best_so_far": standing[2] if standing else None,
                "best_run_id": str(standing[1].get("run_id")) if standing else None,
                "is_new_best": bool(new_here),
            }
        )
    return points


def _running_best(
    scored: Iterable[tuple[str, str, str | None, float]], m: Metric
) -> list[dict[str, Any]]:
    """One point per (ended_at, run_id, experiment, score), in the order given."""
    points: list[dict[str, Any]] = []
    best_score: float | None = None
    best_id: str | None = None
    better = m.better
    for ended_at, run_id, experiment, score in scored:
        is_new = best_score is None or better(score, best_score)
        if is_new:
            best_score, best_id = score, run_id
        points.append(
            {
                "ended_at": ended_at,
                "run_id": run_id,
                "experiment": experiment,
                "score": score,
                "best_so_far": best_score,
                "best_run_id": best_id,
                "is_new_best": is_new,
            }
        )
    return points


def period_start(moment: datetime, interval: Interval) -> date:
    """The first day (UTC) of the day/ISO week/month holding ``moment``."""
    day = moment.astimezone(UTC).date()
    if interval == "week":
        return day - timedelta(days=day.weekday())
    if interval == "month":
        return day.replace(day=1)
    return day


def _next_period(start: date, interval: Interval) -> date:
    if interval == "day":
        return start + timedelta(days=1)
    if interval == "week":
        return start + timedelta(days=7)
    return date(start.year + start.month // 12, start.month % 12 + 1, 1)
