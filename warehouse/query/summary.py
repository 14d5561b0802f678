"""What a run keeps of its samples while they stream to the store: enough for each metric's
interval (``metrics_ci``), and the rule that decides whether an interval describes the score
that was logged.

Per numeric column, :class:`Moments` holds the count, the mean and the centred sum of squares
in constant memory, merged batch by batch (Chan et al.'s parallel form of Welford's update: no
``sum(x^2) - n*mean^2``, which cancels to nothing for values like ``1e8 ± 1``). A declared
corpus metric (``sum(a)/sum(b)``) keeps its two columns row by row (:class:`Rows`, 16 bytes a
sample), since its interval weighs each row by its share of the denominator. With a cluster
column, each cluster's sums are kept instead (one row per cluster), since clustered intervals
are built on them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from warehouse.models import sample_column_for
from warehouse.query import aggregates, stats
from warehouse.query.distributions import t_quantile

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class Moments:
    """Count, mean and centred sum of squares of one column, and whether it is 0/1."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    nonzero: int = 0
    binary: bool = True

    def add(self, x: np.ndarray) -> None:
        """Fold in one batch (its finite values)."""
        n_b = int(x.size)
        if n_b == 0:
            return
        mean_b = float(x.mean())
        dx = x - mean_b
        total = self.n + n_b
        delta = mean_b - self.mean
        self.m2 += float(np.dot(dx, dx)) + delta * delta * self.n * n_b / total
        self.mean += delta * n_b / total
        self.n = total
        self.nonzero += int(np.count_nonzero(x))
        self.binary = self.binary and stats.is_binary(x)

    def mean_interval(self, level: float = 0.95) -> stats.Interval | None:
        """The mean's interval: exact for a 0/1 column, Student's t otherwise."""
        if self.n == 0:
            return None
        if self.binary:
            return stats.binomial_interval(self.nonzero, self.n, level)
        if self.n < 2:
            return None
        half = t_quantile(1 - (1 - level) / 2, self.n - 1) * math.sqrt(
            self.m2 / (self.n - 1) / self.n
        )
        return stats.Interval(self.mean - half, self.mean + half, self.n, "student-t", self.mean)


@dataclass
class Rows:
    """A corpus metric's two columns, row by row (rows with both values): its interval
    weighs each row by its share of the denominator, which no running moment can give."""

    parts: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)

    @property
    def n(self) -> int:
        return sum(int(x.size) for x, _ in self.parts)

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        if x.size:
            self.parts.append((x, y))
        if len(self.parts) > 64:  # few large arrays, not one per batch
            self.parts = [self.columns()]

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.parts:
            return np.empty(0), np.empty(0)
        return np.concatenate([x for x, _ in self.parts]), np.concatenate(
            [y for _, y in self.parts]
        )

    def ratio_interval(self, level: float = 0.95) -> stats.Interval | None:
        """``sum(x)/sum(y)``'s linearized t interval
        (:func:`warehouse.query.stats.ratio_interval` over the rows)."""
        x, y = self.columns()
        return stats.ratio_interval(x, y, level)


class SplitSummary:
    """One split's samples as they are logged: what ``metrics_ci`` is computed from.

    ``declared``: metric -> column or aggregate (``log_samples``' ``metric_columns``);
    ``cluster``: the sample column naming each sample's cluster, if any."""

    def __init__(self, declared: Mapping[str, str] | None = None, cluster: str | None = None):
        self.metric_columns = dict(declared or {})
        self.declared = {k: aggregates.of(v) for k, v in self.metric_columns.items()}
        self.cluster = cluster
        self.columns: dict[str, Moments] = {}
        self.pairs: dict[tuple[str, ...], Rows] = {}
        self._cluster_parts: list[pa.Table] = []
        self._cluster_sums: pa.Table | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        """Fold one batch of the split's rows in (its numeric and boolean columns)."""
        import pyarrow as pa

        values: dict[str, np.ndarray] = {}
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            kind = column.type
            if name == self.cluster:
                continue
            if pa.types.is_floating(kind) or pa.types.is_integer(kind) or pa.types.is_boolean(kind):
                data = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
                values[name] = data
                self.columns.setdefault(name, Moments()).add(data[np.isfinite(data)])
        for agg in self.declared.values():
            if agg.kind == "ratio" and all(c in values for c in agg.columns):
                x, y = values[agg.columns[0]], values[agg.columns[1]]
                keep = np.isfinite(x) & np.isfinite(y)
                self.pairs.setdefault(agg.columns, Rows()).add(x[keep], y[keep])
        if self.cluster is not None:
            self._add_clusters(batch, values)

    def _add_clusters(self, batch: pa.RecordBatch, values: Mapping[str, np.ndarray]) -> None:
        import pyarrow as pa

        if self.cluster not in batch.schema.names:
            from warehouse.errors import InvalidRecord

            raise InvalidRecord(
                f"the cluster column {self.cluster!r} is not in the logged samples; "
                f"their columns: {', '.join(batch.schema.names)}"
            )
        keys = batch.column(self.cluster).cast(pa.string())
        columns: dict[str, Any] = {"cluster": keys}
        for name, data in values.items():
            finite = np.isfinite(data)
            columns[f"s:{name}"] = np.where(finite, data, 0.0)
            columns[f"c:{name}"] = finite.astype(np.float64)
        for agg in self.declared.values():
            if agg.kind == "ratio" and all(c in values for c in agg.columns):
                x, y = values[agg.columns[0]], values[agg.columns[1]]
                keep = np.isfinite(x) & np.isfinite(y)
                columns[f"x:{agg.text}"] = np.where(keep, x, 0.0)
                columns[f"y:{agg.text}"] = np.where(keep, y, 0.0)
        table = pa.table(columns).filter(pa.compute.is_valid(keys))
        self._cluster_parts.append(_sum_by_cluster(table))
        self._cluster_sums = None
        if len(self._cluster_parts) > 8:  # keep one row per cluster, not one per batch
            self._cluster_parts = [_sum_by_cluster(pa.concat_tables(self._cluster_parts))]

    def clustered_units(self, agg: aggregates.Aggregate) -> tuple[np.ndarray, np.ndarray] | None:
        """Each cluster's ``num`` and ``den`` for ``agg`` (clusters with none of it left out)."""
        import pyarrow as pa

        if not self._cluster_parts:
            return None
        if self._cluster_sums is None:
            self._cluster_sums = _sum_by_cluster(pa.concat_tables(self._cluster_parts))
        sums = self._cluster_sums
        if agg.kind == "mean":
            names = (f"s:{agg.columns[0]}", f"c:{agg.columns[0]}")
        else:
            names = (f"x:{agg.text}", f"y:{agg.text}")
        if not all(n in sums.schema.names for n in names):
            return None
        num = sums.column(names[0]).to_numpy(zero_copy_only=False)
        den = sums.column(names[1]).to_numpy(zero_copy_only=False)
        keep = den != 0
        return num[keep], den[keep]

    def interval(self, agg: aggregates.Aggregate) -> stats.Interval | None:
        """The interval of ``agg`` over the samples logged so far."""
        if self.cluster is not None:
            units = self.clustered_units(agg)
            if units is None:
                return None
            samples = self._samples(agg)
            found = stats.ratio_interval(*units, samples=samples, clustered=True)
        elif agg.kind == "mean":
            moments = self.columns.get(agg.columns[0])
            found = None if moments is None else moments.mean_interval()
        else:
            pair = self.pairs.get(agg.columns)
            found = None if pair is None else pair.ratio_interval()
        return None if found is None else aggregates.scaled_interval(found, agg.scale)

    def _samples(self, agg: aggregates.Aggregate) -> int:
        key = agg.columns if agg.kind == "ratio" else None
        if key is not None and key in self.pairs:
            return self.pairs[key].n
        moments = self.columns.get(agg.columns[0])
        return 0 if moments is None else moments.n

    def aggregate_for(self, metric: str) -> aggregates.Aggregate | None:
        """The metric's declared aggregate, else ``mean`` of the column the rule finds."""
        if metric in self.declared:
            return self.declared[metric]
        column = sample_column_for(metric, self.columns)
        return None if column is None else aggregates.Aggregate("mean", (column,))

    def metrics_ci(self, metrics: Mapping[str, float]) -> dict[str, dict[str, Any]]:
        """``metrics_ci.<split>``: per logged metric with samples, its interval when it
        describes the logged value, else the reason why it does not (no bounds)."""
        found: dict[str, dict[str, Any]] = {}
        for metric, logged in metrics.items():
            agg = self.aggregate_for(metric)
            if agg is None:
                continue
            entry: dict[str, Any] = {"aggregate": agg.text}
            if agg.column is not None:
                entry["column"] = agg.column
            if self.cluster is not None:
                entry["cluster"] = self.cluster
            missing = [c for c in agg.columns if c not in self.columns]
            ci = None if missing else self.interval(agg)
            if ci is None:
                entry["reason"] = (
                    f"the declared columns {', '.join(missing)} are not numeric sample columns"
                    if missing
                    else f"too few samples with values of {agg.text} for an interval"
                )
                found[metric] = entry
                continue
            if not aggregates.reproduces(logged, ci):
                found[metric] = {
                    **entry,
                    "n": ci.n,
                    "reason": aggregates.mismatch(metric, logged, agg, ci),
                }
                continue
            found[metric] = {**ci.as_dict(), **entry}
        return found


def _sum_by_cluster(table: pa.Table) -> pa.Table:
    """One row per cluster: the sum of every other column."""
    names = [n for n in table.schema.names if n != "cluster"]
    summed = table.group_by("cluster").aggregate([(n, "sum") for n in names])
    return summed.rename_columns([n.removesuffix("_sum") for n in summed.schema.names])


__all__ = ["Moments", "SplitSummary"]
