"""The questions `warehouse query` answers, as plain rows: the math above the store.

Each view takes a :class:`~warehouse.stores.base.Store` and returns plain dicts (or streams
them), so the CLI, the HTML report and the Kibana tests get the same answers from the local
store and from Elasticsearch. The store answers the primitives natively (``search_runs``,
``best_per_experiment``, ``search_samples``, ``steps``); what is policy rather than
translation lives here, once: running maxima over time, the bias/variance arithmetic
(through :func:`warehouse.models.decompose`), ranks, the config diff, run-id prefixes.

A metric is named ``split.metric`` (``val.acc``; ``val/acc`` and ``metrics.val.acc`` work
too); its direction is ``max`` or ``min``, inferred from the name when not given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

from warehouse.docpath import flatten, get_path
from warehouse.errors import ConfigurationError, NotFound, QuerySyntaxError, WarehouseError
from warehouse.models import Decomposition, Metric, decompose, infer_direction, resolve_metric
from warehouse.query.status import STATUS_FIELDS, lost_aware, with_shown_status
from warehouse.stores.base import (
    CountQuery,
    ExperimentBest,
    Order,
    RankQuery,
    RunQuery,
    SampleQuery,
    StepRange,
    Store,
)
from warehouse.values import parse_time

Interval = Literal["day", "week", "month"]
INTERVALS: tuple[Interval, ...] = ("day", "week", "month")

_HEX_PREFIX = re.compile(r"[0-9a-f]{4,31}")
_SORT_ORDERS = ("asc", "desc")


# --- small pieces -----------------------------------------------------------------------


def quote(value: str) -> str:
    """``value`` as a Lucene phrase (``"a \\"b\\""``), safe inside a filter."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def and_filters(*filters: str | None) -> str | None:
    """The Lucene conjunction of the given filters (each parenthesised); None when none."""
    parts = [f.strip() for f in filters if f and f.strip()]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return " AND ".join(f"({p})" for p in parts)


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def parse_sort(spec: str | tuple[str, str]) -> tuple[str, Order]:
    """``"metrics.val.acc:desc"`` → ``("metrics.val.acc", "desc")``.

    Without ``:asc``/``:desc`` a metric sorts best first (by its name's direction, so
    ``metrics.val.loss`` ascending) and any other field ascending.
    """
    if isinstance(spec, tuple):
        name, order = spec
    else:
        name, _, order = spec.strip().rpartition(":")
        if not name:
            name, order = order, ""
    name = name.strip()
    order = order.strip().lower()
    if not name:
        raise QuerySyntaxError(f"empty sort field in {spec!r}; write field[:asc|desc]")
    if not order:
        if name.startswith("metrics.") and name.count(".") >= 2:
            order = "asc" if infer_direction(name.rsplit(".", 1)[1]) == "min" else "desc"
        else:
            order = "asc"
    if order not in _SORT_ORDERS:
        raise QuerySyntaxError(
            f"sort order {order!r} in {spec!r} is neither asc nor desc; "
            "write field[:asc|desc], e.g. metrics.val.acc:desc"
        )
    return name, order  # type: ignore[return-value]


# --- runs and run ids -------------------------------------------------------------------


def _search(store: Store, query: RunQuery) -> list[dict[str, Any]]:
    """``store.search_runs`` as every view calls it: ``status:lost``/``status:running``
    filters spelled in stored fields, and each run's status as shown (``lost`` for a running
    run whose heartbeat stopped: :mod:`warehouse.query.status`)."""
    fields = query.fields
    extra: tuple[str, ...] = ()
    if fields is not None and "status" in fields:
        extra = tuple(f for f in STATUS_FIELDS if f not in fields)
    found = store.search_runs(
        replace(
            query,
            filter=lost_aware(query.filter),
            fields=None if fields is None else (*fields, *extra),
        )
    )
    with_shown_status(found)
    for doc in found:
        for name in extra:
            doc.pop(name, None)
    return found


def runs(
    store: Store,
    filter: str | None = None,
    sort: Sequence[str | tuple[str, str]] = (),
    limit: int | None = 100,
    fields: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Run documents matching ``filter``, in ``sort`` order (newest first), at most ``limit``."""
    order = tuple(parse_sort(s) for s in sort)
    return _search(store, RunQuery(filter=filter, sort=order, limit=limit, fields=fields))


def get_run(store: Store, run_id: str, fields: Sequence[str] | None = None) -> dict[str, Any]:
    """The run with id ``run_id``, or the only run whose id starts with it (≥ 4 hex digits)."""
    wanted = run_id.strip()
    if not wanted:
        raise ConfigurationError("empty run id; `warehouse query runs` lists the run ids")
    found = _search(store, RunQuery(filter=f"run_id:{quote(wanted)}", limit=1, fields=fields))
    if found:
        return found[0]
    if _HEX_PREFIX.fullmatch(wanted):
        found = _search(
            store,
            RunQuery(filter=f"run_id:{wanted}*", sort=(("run_id", "asc"),), limit=3, fields=fields),
        )
        if len(found) == 1:
            return found[0]
        if found:
            ids = ", ".join(str(d.get("run_id")) for d in found)
            raise ConfigurationError(
                f"run id prefix {wanted!r} matches several runs ({ids} ...); "
                "give more characters of the id"
            )
    if re.fullmatch(r"[0-9a-f]{1,3}", wanted):
        raise ConfigurationError(
            f"run id {wanted!r} is too short to look up; give at least 4 characters of the id "
            "(`warehouse query runs` lists them)"
        )
    raise NotFound(
        f"no run with id {wanted!r} in this warehouse; `warehouse query runs` lists the run "
        "ids (check WAREHOUSE_HOME / es_url if you expected it here)",
        run_id=wanted,
    )


# --- best runs, leaderboard, decomposition ----------------------------------------------


def best(
    store: Store,
    metric: str,
    direction: str | None = None,
    filter: str | None = None,
    per_experiment: bool = False,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """The best run by ``metric`` (``limit`` best runs), or each experiment's best run.

    Rows: rank, experiment, run_id, metric, score, status, ended_at (+ run_count per
    experiment). Ties go to the run that ended first, then the smaller run id.
    """
    m = resolve_metric(metric, direction)
    if per_experiment or limit is None or limit <= 1:
        bests = _bests(store, m, filter)
        if not per_experiment:
            bests = bests[:1]
        elif limit:
            bests = bests[:limit]
        rows = []
        for rank, b in enumerate(bests, 1):
            row = _best_row(rank, b.run, m, b.score)
            if per_experiment:
                row["run_count"] = b.run_count
            rows.append(row)
        return rows
    order: Order = "desc" if m.direction == "max" else "asc"
    try:
        docs = _search(
            store,
            RunQuery(
                filter=filter,
                sort=((m.path, order), ("ended_at", "asc"), ("run_id", "asc")),
                limit=limit,
                fields=("run_id", "experiment", "status", "ended_at", m.path),
            ),
        )
    except QuerySyntaxError as exc:
        if _only_non_finite(store, m, exc):
            return []
        raise
    rows = []
    for doc in docs:  # a store puts runs without the metric last; they are not ranked
        score = finite(get_path(doc, m.path))
        if score is not None:
            rows.append(_best_row(len(rows) + 1, doc, m, score))
    return rows


BEST_COLUMNS = ("rank", "experiment", "run_id", "metric", "score", "status", "ended_at")
BEST_PER_EXPERIMENT_COLUMNS = (*BEST_COLUMNS, "run_count")
LEADERBOARD_COLUMNS = ("rank", "experiment", "best_score", "best_run_id", "run_count", "ended_at")
LEADERBOARD_EVIDENCE_COLUMNS = (
    *LEADERBOARD_COLUMNS,
    "ci_low",
    "ci_high",
    "n",
    "vs_next_diff",
    "vs_next_ci_low",
    "vs_next_ci_high",
    "vs_next_p",
)
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
"""The columns of each view's rows, in order (a CSV header even when nothing matched)."""


def _bests(store: Store, m: Metric, filter: str | None) -> list[ExperimentBest]:
    """Each experiment's best run by ``m``; none (not an error) while every value of ``m``
    recorded so far was NaN/inf, so that no store has the field yet."""
    try:
        bests = store.best_per_experiment(RankQuery(m.path, m.direction, lost_aware(filter)))
        with_shown_status([b.run for b in bests])
        return bests
    except QuerySyntaxError as exc:
        if _only_non_finite(store, m, exc):
            return []
        raise


def _only_non_finite(store: Store, m: Metric, exc: QuerySyntaxError) -> bool:
    """Whether ``exc`` says ``m`` is an unknown field while runs list it as invalid."""
    if getattr(exc, "field", None) != m.path:
        return False
    try:
        return bool(
            _search(
                store,
                RunQuery(filter=f"invalid_metrics:{quote(m.label)}", limit=1, fields=("run_id",)),
            )
        )
    except WarehouseError:  # no run lists any invalid metric: the field is unknown too
        return False


def _best_row(rank: int, run: Mapping[str, Any], m: Metric, score: float | None) -> dict[str, Any]:
    return {
        "rank": rank,
        "experiment": run.get("experiment"),
        "run_id": run.get("run_id"),
        "metric": m.label,
        "score": score,
        "status": run.get("status"),
        "ended_at": run.get("ended_at"),
    }


def best_run(
    store: Store,
    metric: str,
    direction: str | None = None,
    filter: str | None = None,
    experiment: str | None = None,
) -> dict[str, Any]:
    """The document of the best run by ``metric`` (within ``filter``/``experiment``)."""
    m = resolve_metric(metric, direction)
    where = and_filters(filter, f"experiment:{quote(experiment)}" if experiment else None)
    bests = _bests(store, m, where)
    if not bests:
        scope = f" matching {where!r}" if where else ""
        raise NotFound(
            f"no run{scope} has a value of {m.label}; record one, or pick another metric "
            "with --metric split.metric",
            metric=m.label,
        )
    return dict(bests[0].run)


def leaderboard(
    store: Store,
    metric: str,
    direction: str | None = None,
    filter: str | None = None,
    limit: int | None = None,
    *,
    evidence: bool = False,
) -> list[dict[str, Any]]:
    """Experiments, best first: rank, experiment, best_score, best_run_id, run_count, ended_at.

    With ``evidence``: also each best score's interval (``ci_low``, ``ci_high``, ``n``) and a
    paired comparison with the next row's best run over their shared samples
    (``vs_next_diff``, ``vs_next_ci_low``, ``vs_next_ci_high``, ``vs_next_p``):
    :mod:`warehouse.query.evidence`."""
    m = resolve_metric(metric, direction)
    bests = _bests(store, m, filter)
    if limit:
        bests = bests[:limit]
    rows = [
        {
            "rank": rank,
            "experiment": b.experiment,
            "best_score": b.score,
            "best_run_id": b.run.get("run_id"),
            "run_count": b.run_count,
            "ended_at": b.run.get("ended_at"),
        }
        for rank, b in enumerate(bests, 1)
    ]
    if not evidence:
        return rows
    from warehouse.query.evidence import with_evidence

    return with_evidence(store, rows, [b.run for b in bests], m)


DECOMPOSITION_KEYS = tuple(Decomposition.model_fields)
DECOMPOSITION_COLUMNS = ("experiment", "run_id", "score", *DECOMPOSITION_KEYS)


def decomposition(
    store: Store,
    metric: str,
    direction: str | None = None,
    filter: str | None = None,
    baseline_error: float = 0.0,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Per experiment (its best run), best first: the bias/variance decomposition of ``metric``.

    Errors are ``1 - score`` for a higher-is-better metric, else the value itself, of the
    metric's name in the train, val and test splits (:func:`warehouse.models.decompose`).
    """
    m = resolve_metric(metric, direction)
    bests = _bests(store, m, filter)
    if limit:
        bests = bests[:limit]
    rows = []
    for b in bests:
        parts = decompose(b.run.get("metrics") or {}, m.name, m.direction, baseline_error)
        values = parts.model_dump()
        rows.append(
            {
                "experiment": b.experiment,
                "run_id": b.run.get("run_id"),
                "score": b.score,
                **{key: values[key] for key in DECOMPOSITION_KEYS},
            }
        )
    return rows


# --- best score over time ---------------------------------------------------------------


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

    Only the per-run answer without a ``limit`` reads every run (it lists them). Otherwise
    the records are chased (:func:`_records`: one one-run question per new best), the latest
    ``limit`` runs read in one question, and each period asked for its best run and its
    count: the cost follows the records and the points, never the number of runs.
    """
    m = resolve_metric(metric, direction)
    if interval is not None and interval not in INTERVALS:
        raise ConfigurationError(f"interval {interval!r} is not one of {', '.join(INTERVALS)}")
    scoped = and_filters(filter, f"_exists_:{m.path}", "_exists_:ended_at")
    try:
        if interval is not None:
            return _over_time_by(store, m, scoped, interval, limit)
        if not every_run:
            records = [(t, str(d.get("run_id")), d, v) for t, d, v in _records(store, m, scoped)]
            points = _running_best(records, m)
            return points[-limit:] if limit else points
        if limit:
            return _over_time_latest(store, m, scoped, limit)
        docs = _scored_runs(store, m, scoped, "asc", None)
    except QuerySyntaxError as exc:
        if getattr(exc, "field", None) == m.path:
            return []  # no run has a value of the metric yet
        raise
    scored = [(t, str(d.get("run_id")), d, v) for t, d, v in docs]
    scored.sort(key=lambda item: (item[0], item[1]))
    return _running_best(scored, m)


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


def _beats(m: Metric, score: float) -> str:
    """A filter for values of ``m`` better than ``score``."""
    return f"{m.path}:{'>' if m.direction == 'max' else '<'}{score!r}"


def _records(store: Store, m: Metric, where: str | None) -> list[_Scored]:
    """Every run that set a new best, in end-time order, each found by one question of one
    run: the first run after the current record (by end time, then run id) that beats it."""
    records: list[_Scored] = []
    found = _scored_runs(store, m, where, "asc", 1)
    while found:
        _, doc, score = found[0]
        records.append(found[0])
        after = f"ended_at:>={quote(str(doc.get('ended_at')))}"
        found = _scored_runs(store, m, and_filters(where, after, _beats(m, score)), "asc", 1)
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
    store: Store, m: Metric, where: str | None, limit: int
) -> list[dict[str, Any]]:
    latest = _scored_runs(store, m, where, "desc", limit)
    latest.sort(key=_key)
    records = _records(store, m, where)
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
    store: Store, m: Metric, where: str | None, interval: Interval, limit: int | None
) -> list[dict[str, Any]]:
    records = _records(store, m, where)
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
    scored: Iterable[tuple[datetime, str, dict[str, Any], float]], m: Metric
) -> list[dict[str, Any]]:
    points: list[dict[str, Any]] = []
    best_score: float | None = None
    best_id: str | None = None
    for _, run_id, doc, score in scored:
        is_new = best_score is None or m.better(score, best_score)
        if is_new:
            best_score, best_id = score, run_id
        points.append(
            {
                "ended_at": doc.get("ended_at"),
                "run_id": run_id,
                "experiment": doc.get("experiment"),
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


def _running_best_by(
    scored: Sequence[tuple[datetime, str, dict[str, Any], float]], m: Metric, interval: Interval
) -> list[dict[str, Any]]:
    buckets: dict[date, list[tuple[str, dict[str, Any], float]]] = {}
    for ended, run_id, doc, score in scored:
        buckets.setdefault(period_start(ended, interval), []).append((run_id, doc, score))
    if not buckets:
        return []
    points: list[dict[str, Any]] = []
    best_score: float | None = None
    best_id: str | None = None
    period, last = min(buckets), max(buckets)
    while period <= last:
        members = buckets.get(period, [])
        top: tuple[str, dict[str, Any], float] | None = None
        for member in members:  # in end-time order: the first of equal scores wins
            if top is None or m.better(member[2], top[2]):
                top = member
        is_new = top is not None and (best_score is None or m.better(top[2], best_score))
        if is_new and top is not None:
            best_score, best_id = top[2], top[0]
        points.append(
            {
                "period": period.isoformat(),
                "run_count": len(members),
                "run_id": top[0] if top else None,
                "experiment": top[1].get("experiment") if top else None,
                "score": top[2] if top else None,
                "best_so_far": best_score,
                "best_run_id": best_id,
                "is_new_best": is_new,
            }
        )
        period = _next_period(period, interval)
    return points


# --- samples ----------------------------------------------------------------------------


@dataclass
class SampleRows:
    """Per-sample rows of one run, streamed on iteration; ``run`` says which run they are from."""

    run: dict[str, Any]
    query: SampleQuery
    store: Store = field(repr=False)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self.store.search_samples(self.query)


SAMPLE_RUN_FIELDS = ("run_id", "experiment", "status", "metrics", "sample_counts", "ended_at")


def samples(
    store: Store,
    run_id: str | None = None,
    *,
    best: bool = False,
    metric: str = "val.acc",
    direction: str | None = None,
    filter: str | None = None,
    experiment: str | None = None,
    split: str | None = None,
    sort: str | None = None,
    order: Order = "asc",
    limit: int | None = 100,
    where: str | None = None,
) -> SampleRows:
    """Per-sample rows of ``run_id``, or of the best run by ``metric`` (``best=True``).

    ``filter``/``experiment`` narrow which runs compete for "best"; ``where`` is a Lucene
    filter over sample columns. Rows come sorted by the sample column ``sort`` in ``order``,
    at most ``limit`` (None = all, streamed). Example — the 100 validation samples with the
    lowest pixel accuracy from the best run so far::

        samples(store, best=True, split="val", sort="pixel_acc", order="asc", limit=100)
    """
    if best == (run_id is not None):
        raise ConfigurationError("give either a run id (--run RUN_ID) or --best, not both")
    if run_id is not None and (filter or experiment):
        raise ConfigurationError(
            "--filter/--experiment choose the best run; with --run RUN_ID leave them out"
        )
    if order not in _SORT_ORDERS:
        raise QuerySyntaxError(f"sample order {order!r} is neither asc nor desc")
    if run_id is not None:
        run = get_run(store, run_id, fields=SAMPLE_RUN_FIELDS)
    else:
        run = best_run(store, metric, direction, filter, experiment)
    counts = run.get("sample_counts") or {}
    if split is not None and counts and split not in counts:
        raise NotFound(
            f"run {run.get('run_id')} has no {split!r} samples; its splits with samples: "
            f"{', '.join(sorted(counts))}",
            run_id=run.get("run_id"),
        )
    query = SampleQuery(
        run_id=str(run["run_id"]), split=split, sort=sort, order=order, limit=limit, filter=where
    )
    return SampleRows(run=run, query=query, store=store)


# --- one run, several runs, steps -------------------------------------------------------


def show(store: Store, run_id: str) -> dict[str, Any]:
    """The whole document of one run (a unique id prefix works too)."""
    return get_run(store, run_id)


COMPARE_IDENTITY = ("experiment", "status", "started_at", "ended_at", "duration_s", "git.commit")


def compare(store: Store, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Runs side by side: one row per field (``field`` + one column per run id).

    Rows: the identity fields, every metric (``metrics.<split>.<name>``, all runs), then
    only the config keys whose values differ (``config.<dotted.key>``; missing = None).
    """
    if len(run_ids) < 2:
        raise ConfigurationError("compare needs two or more run ids, e.g. compare RUN_A RUN_B")
    docs = [get_run(store, rid) for rid in run_ids]
    ids = [str(d["run_id"]) for d in docs]
    if len(set(ids)) != len(ids):
        raise ConfigurationError(f"the same run is given twice ({', '.join(run_ids)})")
    rows: list[dict[str, Any]] = []

    def add(name: str, values: Sequence[Any]) -> None:
        rows.append({"field": name, **dict(zip(ids, values, strict=True))})

    for name in COMPARE_IDENTITY:
        add(name, [get_path(d, name) for d in docs])
    metric_names = sorted(
        {f"metrics.{s}.{k}" for d in docs for s, ms in (d.get("metrics") or {}).items() for k in ms}
    )
    for name in metric_names:
        add(name, [get_path(d, name) for d in docs])
    configs = [flatten(d.get("config") or {}) for d in docs]
    keys = sorted(set().union(*configs))
    for key in keys:
        values = [c.get(key) for c in configs]
        if any(v != values[0] or type(v) is not type(values[0]) for v in values[1:]):
            add(f"config.{key}", values)
    return rows


def steps(
    store: Store, run_id: str, limit: int | None = None, after_seq: int = -1
) -> Iterator[dict[str, Any]]:
    """A run's steps as flat rows (``warehouse.live.table.step_rows``), in ``seq`` order."""
    from warehouse.live.table import step_rows

    run = get_run(store, run_id, fields=("run_id",))
    docs = store.steps(StepRange(run_id=str(run["run_id"]), after_seq=after_seq, limit=limit))
    return iter(step_rows(docs))
