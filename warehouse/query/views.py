"""The questions `warehouse query` answers, as plain rows: the math above the store.

Each view takes a :class:`~warehouse.stores.base.Store` and returns plain dicts (or streams
them), so the CLI, the HTML report and the Kibana tests get the same answers from the local
store and from Elasticsearch. The store answers the primitives natively (``search_runs``,
``best_per_experiment``, ``search_samples``, ``steps``); what is policy rather than
translation lives here, once: running maxima over time (:mod:`warehouse.query.over_time`),
the bias/variance arithmetic (through :func:`warehouse.models.decompose`), ranks, the config
diff, run-id prefixes (:mod:`warehouse.query.lookup`). This module re-exports the public names
of those two, so ``views.over_time`` and ``views.get_run`` stay where callers look for them.

A metric is named ``split.metric`` (``val.acc``; ``val/acc`` and ``metrics.val.acc`` work
too); its direction is ``max`` or ``min``, inferred from the name when not given.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from warehouse.errors import ConfigurationError, NotFound, QuerySyntaxError
from warehouse.filters.docpath import flatten, get_path
from warehouse.models import Decomposition, Metric, decompose, resolve_metric
from warehouse.query.bests import best_run as best_run
from warehouse.query.bests import experiment_bests as experiment_bests
from warehouse.query.bests import only_non_finite
from warehouse.query.leaderboard_evidence import LEADERBOARD_EVIDENCE
from warehouse.query.lookup import _SORT_ORDERS, _search
from warehouse.query.lookup import and_filters as and_filters
from warehouse.query.lookup import finite as finite
from warehouse.query.lookup import get_run as get_run
from warehouse.query.lookup import parse_sort as parse_sort
from warehouse.query.lookup import quote as quote
from warehouse.query.lookup import runs as runs
from warehouse.query.over_time import INTERVALS as INTERVALS
from warehouse.query.over_time import OVER_TIME_COLUMNS as OVER_TIME_COLUMNS
from warehouse.query.over_time import OVER_TIME_PERIOD_COLUMNS as OVER_TIME_PERIOD_COLUMNS
from warehouse.query.over_time import Interval as Interval
from warehouse.query.over_time import over_time as over_time
from warehouse.query.over_time import period_start as period_start
from warehouse.stores.base import (
    Order,
    RunQuery,
    SampleQuery,
    StepRange,
    Store,
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
        bests = experiment_bests(store, m, filter)
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
        if only_non_finite(store, m, exc):
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
LEADERBOARD_EVIDENCE_COLUMNS = (*LEADERBOARD_COLUMNS, *LEADERBOARD_EVIDENCE)
"""The columns of each view's rows, in order (a CSV header even when nothing matched)."""


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

    With ``evidence``: also each best score's interval (``ci_low``, ``ci_high``, ``n``,
    widened for being the best of ``run_count`` runs) and a comparison with the next row's
    best run (``vs_next_diff`` = the next row's score minus this row's, its interval
    ``vs_next_ci_low``/``vs_next_ci_high``, ``vs_next_p``, ``vs_next_mde``), or why there is
    none (``no_evidence``): :mod:`warehouse.query.leaderboard_evidence`."""
    m = resolve_metric(metric, direction)
    bests = experiment_bests(store, m, filter)
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
    from warehouse.query.leaderboard_evidence import with_evidence

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
    bests = experiment_bests(store, m, filter)
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


# --- samples ----------------------------------------------------------------------------


@dataclass
class SampleRows:
    """Per-sample rows of one run, streamed on iteration; ``run`` says which run they are from."""

    run: dict[str, Any]
    query: SampleQuery
    store: Store = field(repr=False)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """The rows, their columns in one order on every store (:func:`sample_column_order`)."""
        from warehouse.models import sample_column_order

        orders: dict[tuple[str, ...], list[str]] = {}
        for row in self.store.search_samples(self.query):
            keys = tuple(row)
            order = orders.get(keys)
            if order is None:
                order = orders[keys] = sample_column_order(keys)
            yield {k: row[k] for k in order}


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
    """A run's steps as flat rows (``warehouse.query.live_table.step_rows``), in ``seq`` order."""
    from warehouse.query.live_table import step_rows

    run = get_run(store, run_id, fields=("run_id",))
    docs = store.steps(StepRange(run_id=str(run["run_id"]), after_seq=after_seq, limit=limit))
    return iter(step_rows(docs))
