"""How a metric is computed from its samples, and the rule that an interval or a test must
describe the score that was logged.

A metric's *aggregate* is one of:

- ``mean(COLUMN)``: the per-sample mean (accuracy is ``mean(correct)``); decomposable, so
  each sample's value is its share of the score;
- ``sum(NUM)/sum(DEN)``: a corpus metric, a ratio of sums over the samples (BLEU-like
  ``sum(matches)/sum(length)``, micro-averaged F1, word error rate): not decomposable, so it is
  tested as a whole, by its linearization (the delta method, :mod:`warehouse.query.stats`);
- either one times a constant: ``100*mean(correct)`` for an accuracy logged in percent.

Where an aggregate comes from (:func:`declared`): what the user declared
(``log_samples(..., metric_columns={"bleu": "sum(matches)/sum(length)"})``, or ``--column``
on the command line), else ``mean`` of the column the naming rule finds
(:func:`warehouse.models.sample_column_for`). An undeclared aggregate must *reproduce* the
logged score (:func:`reproduces`): otherwise the samples describe some other number (a
corpus metric, a percentage, a score of other samples), and no interval is stored and no
test is run on them; the reason says what to declare.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from warehouse.errors import ConfigurationError
from warehouse.query import stats

TOLERANCE = 0.1
"""An undeclared aggregate reproduces a logged score when they differ by at most this share
of the interval's half-width (or 1e-9 relative, for a score without spread), or when the
score is the aggregate rounded finer than the interval (:func:`reproduces`)."""

_NAME = r"\s*([^\s()*/]+)\s*"
_FORMS = {
    "mean": re.compile(rf"^mean\({_NAME}\)$"),
    "ratio": re.compile(rf"^sum\({_NAME}\)\s*/\s*sum\({_NAME}\)$"),
}
_SCALE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*\*\s*(.+)$", re.IGNORECASE)
EXAMPLES = "mean(correct), sum(matches)/sum(length), or 100*mean(correct)"


@dataclass(frozen=True)
class Aggregate:
    """A metric as computed from sample columns: ``scale * sum(num)/sum(den)`` over the rows
    where every column has a value (``mean``: ``den`` is 1 per row)."""

    kind: Literal["mean", "ratio"]
    columns: tuple[str, ...]
    scale: float = 1.0

    @property
    def text(self) -> str:
        """How it is written: ``mean(correct)``, ``sum(matches)/sum(length)``."""
        if self.kind == "mean":
            body = f"mean({self.columns[0]})"
        else:
            body = f"sum({self.columns[0]})/sum({self.columns[1]})"
        return body if self.scale == 1.0 else f"{self.scale:g}*{body}"

    @property
    def label(self) -> str:
        """The name in a one-line summary: the column for a plain mean, else the text."""
        return self.columns[0] if self.kind == "mean" and self.scale == 1.0 else self.text

    @property
    def column(self) -> str | None:
        """The per-sample column a plain mean is of (None for a corpus metric)."""
        return self.columns[0] if self.kind == "mean" else None

    def units(
        self, values: Mapping[str, np.ndarray], clusters: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """``num`` and ``den`` per unit (a sample, or a cluster's sums), and the samples."""
        keep = np.ones(len(values[self.columns[0]]), dtype=bool)
        arrays = [np.asarray(values[c], dtype=np.float64) for c in self.columns]
        for array in arrays:
            keep &= np.isfinite(array)
        num = arrays[0][keep]
        den = arrays[1][keep] if self.kind == "ratio" else np.ones_like(num)
        samples = int(keep.sum())
        if clusters is None:
            return num, den, samples
        sums = stats.cluster_sums(np.asarray(clusters)[keep], num, den)
        return sums[0], sums[1], samples

    def value(self, values: Mapping[str, np.ndarray]) -> float | None:
        """The score over all rows with values (None without any)."""
        num, den, _ = self.units(values)
        total = float(den.sum())
        return None if total == 0.0 else self.scale * float(num.sum()) / total

    def interval(
        self,
        values: Mapping[str, np.ndarray],
        clusters: np.ndarray | None = None,
        level: float = 0.95,
    ) -> stats.Interval | None:
        """The score's interval: exact for a 0/1 mean, else the linearized t."""
        if self.kind == "mean":
            found = stats.interval(values[self.columns[0]], level=level, clusters=clusters)
        else:
            num, den, samples = self.units(values, clusters)
            found = stats.ratio_interval(
                num, den, level, samples=samples, clustered=clusters is not None
            )
        return None if found is None else scaled_interval(found, self.scale)

    def paired(
        self,
        a: Mapping[str, np.ndarray],
        b: Mapping[str, np.ndarray],
        *,
        clusters: np.ndarray | None = None,
        level: float = 0.95,
    ) -> stats.Comparison | None:
        """B against A on the same samples (row ``i`` of both is one sample)."""
        if self.kind == "mean":
            found = stats.paired(a[self.columns[0]], b[self.columns[0]], level, clusters)
            return None if found is None else scaled(found, self.scale)
        both = {c: np.asarray(a[c], dtype=np.float64) for c in self.columns}
        keep = np.ones(len(both[self.columns[0]]), dtype=bool)
        for c in self.columns:
            keep &= np.isfinite(both[c]) & np.isfinite(np.asarray(b[c], dtype=np.float64))
        rows_a = {c: both[c][keep] for c in self.columns}
        rows_b = {c: np.asarray(b[c], dtype=np.float64)[keep] for c in self.columns}
        kept_clusters = None if clusters is None else np.asarray(clusters)[keep]
        num_a, den_a, samples = self.units(rows_a, kept_clusters)
        num_b, den_b, _ = self.units(rows_b, kept_clusters)
        found = stats.paired_ratio(
            num_a, den_a, num_b, den_b, level=level, samples=samples, clustered=clusters is not None
        )
        return None if found is None else scaled(found, self.scale)

    def unpaired(
        self,
        a: Mapping[str, np.ndarray],
        b: Mapping[str, np.ndarray],
        clusters_a: np.ndarray | None = None,
        clusters_b: np.ndarray | None = None,
        level: float = 0.95,
    ) -> stats.Comparison | None:
        """B against A on different samples."""
        if self.kind == "mean":
            col = self.columns[0]
            found = stats.unpaired(a[col], b[col], level, clusters_a, clusters_b)
        else:
            num_a, den_a, sa = self.units(a, clusters_a)
            num_b, den_b, sb = self.units(b, clusters_b)
            found = stats.unpaired_ratio(
                num_a,
                den_a,
                num_b,
                den_b,
                level=level,
                samples=(sa, sb),
                clustered=clusters_a is not None,
            )
        return None if found is None else scaled(found, self.scale)


def parse(text: str) -> Aggregate | None:
    """The aggregate ``text`` declares, or None when it is a plain column name. Anything
    else that looks like a formula is refused with the forms that work."""
    body, scale = text.strip(), 1.0
    match = _SCALE.match(body)
    if match:
        scale, body = float(match.group(1)), match.group(2).strip()
    for kind, pattern in _FORMS.items():
        found = pattern.match(body)
        if found:
            if not scale > 0 or not math.isfinite(scale):
                break
            columns = tuple(g.strip() for g in found.groups())
            return Aggregate("mean" if kind == "mean" else "ratio", columns, scale)
    if match or any(ch in text for ch in "()/*"):
        raise ConfigurationError(
            f"cannot read the metric's aggregate {text!r}: write {EXAMPLES} "
            "(column names, a positive constant)"
        )
    return None


def of(text: str) -> Aggregate:
    """A declaration as an aggregate: a formula, or a column name meaning its mean."""
    return parse(text) or Aggregate("mean", (text.strip(),))


def scaled_interval(found: stats.Interval, scale: float) -> stats.Interval:
    if scale == 1.0:
        return found
    estimate = None if found.estimate is None else scale * found.estimate
    return replace(found, low=scale * found.low, high=scale * found.high, estimate=estimate)


@dataclass(frozen=True)
class ScaledEngine:
    """A comparison's engine in units ``scale`` times larger (a percentage)."""

    inner: stats.Engine
    scale: float

    def p_at(self, delta: float) -> float:
        return self.inner.p_at(delta / self.scale)

    def bounds(self, level: float) -> tuple[float, float]:
        low, high = self.inner.bounds(level)
        return self.scale * low, self.scale * high

    def spread(self) -> float | None:
        se = self.inner.spread()
        return None if se is None else self.scale * se

    def df(self) -> float:
        return self.inner.df()


def scaled(found: stats.Comparison, scale: float) -> stats.Comparison:
    if scale == 1.0:
        return found
    return replace(found, diff=scale * found.diff, engine=ScaledEngine(found.engine, scale))


def reproduces(logged: float, found: stats.Interval) -> bool:
    """Whether the interval's estimate is the logged score: equal to :data:`TOLERANCE`, or
    the estimate rounded to the logged score's own decimals when that rounding is finer than
    the interval (0.854 for 0.85432 over 100k samples, whose half-width is 0.0022; not 0.85)."""
    if found.estimate is None:
        return False
    gap = abs(logged - found.estimate)
    if gap <= max(1e-9 * max(1.0, abs(found.estimate)), TOLERANCE * found.half_width):
        return True
    unit = rounding_unit(logged)
    return unit <= found.half_width and gap <= unit / 2 * (1 + 1e-9)


def rounding_unit(value: float) -> float:
    """The last decimal place ``value`` is written with (0.001 for 0.854, 1 for 85)."""
    from decimal import Decimal

    exponent = Decimal(repr(float(value))).normalize().as_tuple().exponent
    return 10.0 ** int(exponent) if isinstance(exponent, int) else math.inf


def mismatch(metric: str, logged: float, aggregate: Aggregate, found: stats.Interval) -> str:
    """Why an aggregate does not describe the logged score, and what to declare."""
    estimate = found.estimate if found.estimate is not None else math.nan
    text = (
        f"the logged {metric} = {logged:.6g} is not {aggregate.text} = {estimate:.6g} over "
        f"the {found.n:,} logged samples"
    )
    column = aggregate.columns[0]
    if aggregate.kind == "ratio" or aggregate.scale != 1.0:
        hint = "were the samples logged from another set than the score?"
    elif reproduces(logged / 100, found):
        hint = f"a percentage? declare metric_columns={{'{metric}': '100*mean({column})'}}"
    else:
        hint = (
            "a corpus metric, or a score of other samples: declare how it is computed, e.g. "
            f"metric_columns={{'{metric}': 'sum(matches)/sum(length)'}}"
        )
    return f"{text}; no interval or test describes it ({hint})"


__all__ = [
    "EXAMPLES",
    "TOLERANCE",
    "Aggregate",
    "mismatch",
    "of",
    "parse",
    "reproduces",
    "rounding_unit",
    "scaled",
    "scaled_interval",
]
