"""Which metric a ranked view ranks by, and which runs it leaves out — said, never silent.

A ranked view (best, leaderboard, over-time, decomposition) can only rank runs that have the
metric. Two things keep that honest:

- :func:`default_metric`: without ``--metric`` (and without an explicit
  ``WAREHOUSE_PRIMARY_METRIC``), the metric is the primary metric the matching runs were
  recorded with (the most common one), not a global default they may not have;
- :func:`left_out`: how many matching runs lack the metric, and which primary metrics they
  have instead, for the line the CLI prints on stderr
  (``12 runs have no val.acc; they have val.accuracy (12) -- try --metric val.accuracy``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from warehouse.errors import UnknownField
from warehouse.filters import lucene
from warehouse.models import Metric
from warehouse.query.status import lost_aware
from warehouse.stores.base import CountQuery, Store


@dataclass(frozen=True)
class LeftOut:
    """Matching runs without the metric, and the primary metrics they were recorded with;
    ``recorded``: whether any run in the store has a value of the metric at all."""

    metric: str
    count: int
    instead: dict[str, int] = field(default_factory=dict)
    recorded: bool = True

    def message(self) -> str | None:
        """The line for people (None when no run was left out)."""
        if not self.count:
            return None
        runs = "1 run has" if self.count == 1 else f"{self.count} runs have"
        line = f"{runs} no {self.metric}"
        if self.instead:
            listed = ", ".join(f"{name} ({n})" for name, n in self.instead.items())
            best = next(iter(self.instead))
            line += f"; they have {listed} -- try --metric {best}"
        return line


def recorded_metrics(store: Store, filter: str | lucene.Node | None) -> dict[str, int]:
    """``{primary metric name: runs}`` of the matching runs, most common first."""
    counts = store.count_by(CountQuery("primary_metric.name", lost_aware(filter)))
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def default_metric(store: Store, filter: str | lucene.Node | None, fallback: str) -> str:
    """The primary metric most of the matching runs were recorded with, else ``fallback``."""
    recorded = recorded_metrics(store, filter)
    return next(iter(recorded), fallback)


def left_out(store: Store, metric: Metric, filter: str | lucene.Node | None) -> LeftOut:
    """The matching runs a view ranking by ``metric`` cannot rank."""
    where = lost_aware(filter)
    missing: lucene.Node = lucene.And((where, lucene.Not(lucene.Exists(metric.path))))
    recorded = True
    try:
        count = sum(store.count_by(CountQuery("status", missing)).values())
    except UnknownField as exc:  # no run has the metric at all: every run lacks it
        if exc.field != metric.path:
            raise
        missing, recorded = where, False
        count = sum(store.count_by(CountQuery("status", missing)).values())
    instead = {
        name: n for name, n in recorded_metrics(store, missing).items() if name != metric.label
    }
    return LeftOut(metric.label, count, instead, recorded)


__all__ = ["LeftOut", "default_metric", "left_out", "recorded_metrics"]
