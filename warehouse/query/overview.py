"""The overview: what the local UI's first page and the HTML report show, read in one pass.

The run and experiment counts (one aggregation), each experiment's best run (the ranked and
bias/variance charts), the runs that set a new best (best over time), the leaderboard with its
intervals, the bias/variance table and — for the report — the slices of the best runs and the
seed groups: each from the same view ``warehouse query`` answers with, through the fast paths
the store has for them (aggregations, the local catalog's columns), never a read of every run.
An :class:`Overview` carries the store's version it was read at, so a front end can keep it
until the store changes (:meth:`~warehouse.stores.base.Store.version`).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from warehouse.errors import ConfigurationError
from warehouse.query.door import metric_in_force, opened, why_empty
from warehouse.query.result import Empty

if TYPE_CHECKING:
    from warehouse.models import Metric
    from warehouse.settings import Settings
    from warehouse.stores.base import ExperimentBest, Store


@dataclass(frozen=True)
class Overview:
    """Everything an overview shows, from one store at one version."""

    version: Hashable  # the store's version before it was read
    source: str  # where the runs came from, without credentials
    metric: str  # split.name
    direction: str
    baseline_error: float
    filter: str | None
    runs_per_experiment: dict[str, int]  # of the matching runs
    bests: list[ExperimentBest]  # each experiment's best run, best first
    records: list[dict[str, Any]]  # the runs that set a new best, by end time
    leaderboard: list[dict[str, Any]]  # with intervals and the gap to the next row
    decomposition: list[dict[str, Any]]
    left_out: str | None = None  # matching runs without the metric, said in one line
    slice: str = "label"  # the sample column ``slices`` are cut by
    slices: list[dict[str, Any]] | None = None  # of the best runs' 0/1 column (asked for)
    replicates: list[dict[str, Any]] | None = None  # the seed groups (asked for)
    empty: Empty | None = None  # why no run is ranked (None when some is)

    @property
    def run_count(self) -> int:
        return sum(self.runs_per_experiment.values())


def overview(
    metric: str | None = None,
    *,
    direction: str | None = None,
    filter: str | None = None,
    baseline_error: float | None = None,
    slices: bool = False,
    slice: str | None = None,
    replicates: bool = False,
    store: Store | None = None,
    settings: Settings | None = None,
) -> Overview:
    """The overview of the runs matching ``filter`` by the metric in force (as the ranked
    views choose it); ``slices``: also the best runs' slices by ``slice`` (default
    ``label``, left out when absent; a column asked for must exist); ``replicates``: also
    the seed groups."""
    from warehouse.query import views
    from warehouse.query.coverage import left_out
    from warehouse.query.door import describe_source
    from warehouse.query.replicates import replicates as seed_groups
    from warehouse.query.status import lost_aware
    from warehouse.stores.base import CountQuery

    with opened(store, settings) as (found, s):
        stamp = found.version()  # first: a run written while this reads shows at the next
        m = metric_in_force(found, s, metric, direction, filter)
        baseline = s.baseline_error if baseline_error is None else baseline_error
        counts = found.count_by(CountQuery("experiment", lost_aware(filter)))
        left = left_out(found, m, filter)
        ranked = left.recorded  # else no run has the metric: nothing to rank, no error
        label, way = m.label, m.direction
        board = views.leaderboard(found, label, way, filter, evidence=True) if ranked else []
        return Overview(
            version=stamp,
            source=describe_source(s),
            metric=label,
            direction=way,
            baseline_error=baseline,
            filter=filter,
            runs_per_experiment=counts,
            bests=views.experiment_bests(found, m, filter) if ranked else [],
            records=views.over_time(found, label, way, filter) if ranked else [],
            leaderboard=board,
            decomposition=(
                views.decomposition(found, label, way, filter, baseline) if ranked else []
            ),
            left_out=left.message(),
            slice=slice or "label",
            slices=_slice_rows(found, m, slice, filter) if slices and ranked else None,
            replicates=seed_groups(found, m, filter=filter, flips=False) if replicates else None,
            empty=None if board else why_empty(filter, store=found, settings=s),
        )


def _slice_rows(
    store: Store, m: Metric, slice: str | None, filter: str | None
) -> list[dict[str, Any]]:
    """``warehouse query slices --by <slice>`` of the best runs (0/1 columns only); none when
    the default ``label`` column is absent, an error when a column asked for is."""
    from warehouse.query.slices import slices

    try:
        rows = slices(store, m, slice or "label", filter=filter)
    except ConfigurationError:
        rows = []
    rows = [r for r in rows if r.get("ci_low") is not None]  # the heat map draws 0/1 columns
    if slice and not rows:
        raise ConfigurationError(
            f"the best runs' {m.split} samples have no {slice!r} column with a 0/1 "
            f"per-sample result (such as correct); name another --slice COLUMN or leave it out"
        )
    return rows


__all__ = ["Overview", "overview"]
