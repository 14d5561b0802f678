"""Each experiment's best run by a metric, and the best run of a scope: the one question
every ranked view and ``best``/``best:EXPERIMENT`` references start from.

Split out of :mod:`warehouse.query.views` (which re-exports these names) so that the evidence
modules can name the best run without importing the views that show their answers.
"""

from __future__ import annotations

from typing import Any

from warehouse.errors import NotFound, QuerySyntaxError, UnknownField, WarehouseError
from warehouse.models import Metric, resolve_metric
from warehouse.query.lookup import _search, and_filters, quote
from warehouse.query.status import lost_aware, with_shown_status
from warehouse.stores.base import ExperimentBest, RankQuery, RunQuery, Store


def experiment_bests(store: Store, m: Metric, filter: str | None) -> list[ExperimentBest]:
    """Each experiment's best run by ``m``; none (not an error) while every value of ``m``
    recorded so far was NaN/inf, so that no store has the field yet."""
    try:
        bests = store.best_per_experiment(RankQuery(m.path, m.direction, lost_aware(filter)))
        with_shown_status([b.run for b in bests])
        return bests
    except QuerySyntaxError as exc:
        if only_non_finite(store, m, exc):
            return []
        raise


def only_non_finite(store: Store, m: Metric, exc: QuerySyntaxError) -> bool:
    """Whether ``exc`` says ``m`` is an unknown field while runs list it as invalid."""
    if not isinstance(exc, UnknownField) or exc.field != m.path:
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
    bests = experiment_bests(store, m, where)
    if not bests:
        scope = f" matching {where!r}" if where else ""
        raise NotFound(
            f"no run{scope} has a value of {m.label}; record one, or pick another metric "
            "with --metric split.metric",
            metric=m.label,
        )
    return dict(bests[0].run)


__all__ = ["best_run", "experiment_bests", "only_non_finite"]
