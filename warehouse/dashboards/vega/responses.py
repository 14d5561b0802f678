"""The views' Elasticsearch answers built from the CLI's answers, for the offline report.

Kibana feeds each view (``warehouse/dashboards/vega/<view>.json``) the answer of its
aggregation; the HTML report feeds the very same spec an answer *of the same shape* built here from
:mod:`warehouse.query.views` — the numbers ``warehouse query leaderboard|over-time|
decomposition`` print — on any store. So both draw one spec from the same numbers, and a test
checks that the two answers plot alike.

- ``experiments_ranked`` / ``bias_variance``: per experiment a ``runs`` bucket (its run
  count) and a ``scored`` bucket with its best run as the single ``top_hits`` hit;
- ``best_over_time``: ``date_histogram`` buckets (under ``scored``) over ``ended_at`` at the
  interval Kibana would pick for the span of the data (or ``interval``), each with its best
  run (ties: the earlier end, then the smaller run id) and the count of runs with a score.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from warehouse.dashboards.vega import SLICES_VIEW, VIEWS, auto_interval
from warehouse.errors import ConfigurationError
from warehouse.models import Metric, resolve_metric
from warehouse.values import parse_time

if TYPE_CHECKING:
    from warehouse.query.overview import Overview
    from warehouse.stores.base import ExperimentBest, Store

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_MONDAY_MS = 4 * 86_400_000  # 1970-01-05, the first Monday after the epoch


def view_response(
    view: str,
    store: Store,
    metric: str = "val.acc",
    direction: str | None = None,
    filter: str | None = None,
    *,
    interval: str | None = None,
) -> dict[str, Any]:
    """What Elasticsearch answers ``view``'s query, computed from the CLI's answers on ``store``
    for ``filter`` (Lucene); ``interval`` (``24h``, ``1w`` ...) fixes best-over-time's buckets."""
    from warehouse.query import views

    if view not in VIEWS:
        raise ConfigurationError(f"no view named {view!r}; known views: {', '.join(VIEWS)}")
    m = resolve_metric(metric, direction)
    if view == "best_over_time":
        points = views.over_time(store, m.label, m.direction, filter)
        return time_buckets(points, m, interval)
    bests = views.experiment_bests(store, m, filter)  # the CLI's leaderboard and decomposition rows
    return ranked_response(bests, m)


def ranked_response(bests: Sequence[ExperimentBest], m: Metric) -> dict[str, Any]:
    """Each experiment's best run as the ranked views' answer: ``runs`` (each experiment's run
    count) and ``scored`` (its best score, its best run the single ``top_hits`` hit)."""
    runs = [{"key": b.experiment, "doc_count": b.run_count} for b in bests]
    scored = [
        {
            "key": b.experiment,
            "doc_count": 1,
            "best": {"value": b.score},
            "top": _hits([_best_source(b.run, m)]),
        }
        for b in bests
    ]
    return {
        "hits": {"hits": []},
        "aggregations": {
            "runs": {"buckets": runs},
            "scored": {"doc_count": len(scored), "experiments": {"buckets": scored}},
        },
    }


def overview_responses(o: Overview) -> dict[str, dict[str, Any]]:
    """Every view's answer for an overview (:func:`warehouse.query.api.overview`): the three
    views, and the slice heat map when the overview holds slices — no store is asked."""
    m = resolve_metric(o.metric, o.direction)
    ranked = ranked_response(o.bests, m)
    answers = {
        "best_over_time": time_buckets(o.records, m),
        "experiments_ranked": ranked,
        "bias_variance": ranked,
    }
    if o.slices:
        answers[SLICES_VIEW] = slices_response(o.slices, o.slice)
    return answers


def time_buckets(
    points: Sequence[Mapping[str, Any]], m: Metric, interval: str | None = None
) -> dict[str, Any]:
    """``over_time`` points (one per run, in end-time order) as date_histogram buckets."""
    timed = [(parse_time(p.get("ended_at")), p) for p in points]
    stamped = [(t, p) for t, p in timed if t is not None]
    if not stamped:
        return _answer([])
    if interval is None:
        first, last = stamped[0][0], stamped[-1][0]
        interval = auto_interval(max((last - first).total_seconds() * 1000, 1.0) / 50)
    buckets: dict[int, list[Mapping[str, Any]]] = {}
    for moment, point in stamped:
        buckets.setdefault(bucket_start(moment, interval), []).append(point)
    out = []
    for key in sorted(buckets):
        members = buckets[key]
        top = members[0]
        for point in members[1:]:  # end-time order: the first of equal scores wins
            if m.better(float(point["score"]), float(top["score"])):
                top = point
        source = {
            "run_id": top.get("run_id"),
            "experiment": top.get("experiment"),
            "ended_at": _text(top.get("ended_at")),
            "metrics": {m.split: {m.name: top.get("score")}},
        }
        out.append(
            {
                "key": key,
                "key_as_string": _text(datetime.fromtimestamp(key / 1000, UTC)),
                "doc_count": len(members),
                "top": _hits([source]),
            }
        )
    return _answer(out)


def bucket_start(moment: datetime, interval: str) -> int:
    """The key (epoch ms, UTC) of the date_histogram bucket holding ``moment``.

    Fixed intervals and ``1m``/``1h``/``1d`` count from the epoch, ``1w`` from a Monday,
    ``1M``/``1q``/``1y`` from the first day of the month/quarter/year — as Elasticsearch does
    in UTC without an offset.
    """
    ms = int(moment.astimezone(UTC).timestamp() * 1000)
    match = re.fullmatch(r"(\d*)(ms|[smhdwMqy])", interval)
    if match is None:
        raise ConfigurationError(f"interval {interval!r} is not one Elasticsearch knows")
    count, unit = int(match.group(1) or 1), match.group(2)
    if unit in ("M", "q", "y"):
        day = moment.astimezone(UTC)
        month = 1 if unit == "y" else (day.month - 1) // 3 * 3 + 1 if unit == "q" else day.month
        start = datetime(day.year, month, 1, tzinfo=UTC)
        return int(start.timestamp() * 1000)
    size = count * _UNIT_MS[unit]
    offset = _MONDAY_MS if unit == "w" else 0
    return (ms - offset) // size * size + offset


def _best_source(run: Mapping[str, Any], m: Metric) -> dict[str, Any]:
    """The ``_source`` the views' ``top_hits`` brings: ids, end time, the metric's splits."""
    metrics = run.get("metrics") or {}
    kept = {
        split: {m.name: values[m.name]}
        for split, values in metrics.items()
        if isinstance(values, Mapping) and m.name in values
    }
    source = {
        "run_id": run.get("run_id"),
        "experiment": run.get("experiment"),
        "ended_at": _text(run.get("ended_at")),
        "metrics": kept,
    }
    ci = ((run.get("metrics_ci") or {}).get(m.split) or {}).get(m.name)
    if isinstance(ci, Mapping):  # the interval the ranked view draws as an error bar
        source["metrics_ci"] = {m.split: {m.name: dict(ci)}}
    return source


def _hits(sources: list[dict[str, Any]]) -> dict[str, Any]:
    return {"hits": {"total": {"value": len(sources)}, "hits": [{"_source": s} for s in sources]}}


def _answer(buckets: list[dict[str, Any]]) -> dict[str, Any]:
    """The best-over-time answer: the scored runs' date_histogram buckets."""
    scored = {"doc_count": sum(b["doc_count"] for b in buckets), "time": {"buckets": buckets}}
    return {"hits": {"hits": []}, "aggregations": {"scored": scored}}


def _text(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def slices_response(rows: Sequence[Mapping[str, Any]], slice: str) -> dict[str, Any]:
    """``warehouse query slices`` rows (of a 0/1 column) as the slice heat map's aggregation
    answer: per experiment (in the rows' first-seen order) and per slice value, ``n`` and the
    counts of 1s and 0s (the ``outcome`` terms); the 50 most frequent values (``labels``) and
    how many values and experiments there are. Rows of a non-0/1 column (no interval) are
    left out: the heat map draws 0/1 columns only."""
    experiments: dict[Any, list[dict[str, Any]]] = {}
    sizes: dict[Any, int] = {}
    for row in rows:
        if row.get("ci_low") is None or row.get("mean") is None:
            continue
        n = int(row["n"])
        right = round(float(row["mean"]) * n)
        experiments.setdefault(row.get("experiment"), []).append(_counted(row[slice], n, right))
        sizes[row[slice]] = sizes.get(row[slice], 0) + n
    buckets = []
    for experiment, cells in experiments.items():
        n = sum(c["n"]["value"] for c in cells)
        right = sum(o["doc_count"] for c in cells for o in c["outcome"]["buckets"] if o["key"])
        bucket = _counted(experiment, n, right)
        bucket["slices"] = {
            "buckets": sorted(cells, key=lambda c: (-c["doc_count"], str(c["key"])))
        }
        buckets.append(bucket)
    frequent = sorted(sizes.items(), key=lambda kv: (-kv[1], str(kv[0])))
    total = sum(b["doc_count"] for b in buckets)
    split = {
        "doc_count": total,
        "labels": {"buckets": [{"key": k, "doc_count": c} for k, c in frequent[:50]]},
        "label_count": {"value": len(sizes)},
        "experiment_count": {"value": len(buckets)},
        "experiments": {"buckets": buckets},
    }
    return {"hits": {"hits": []}, "aggregations": {"split": split}}


def _counted(key: Any, n: int, right: int) -> dict[str, Any]:
    """A bucket with the heat map's counts: ``n`` and the ``outcome`` terms (1s and 0s)."""
    outcome = [
        {"key": k, "key_as_string": text, "doc_count": c}
        for k, text, c in sorted(((1, "true", right), (0, "false", n - right)), key=lambda o: -o[2])
        if c
    ]
    return {"key": key, "doc_count": n, "n": {"value": n}, "outcome": {"buckets": outcome}}
