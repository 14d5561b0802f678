"""Where a comparison's numbers come from: one engine gives both its p-values and its
interval, so "significant" and "the interval excludes 0" never disagree, at any level and for
any null value (the regression gate tests "worse by exactly the margin").

- :class:`TEngine`: a t (or z) statistic: paired, clustered and Welch's tests, linearized
  ratios, two proportions (Agresti-Caffo);
- :class:`McNemarEngine`: two 0/1 columns on the same samples, exact;
- :class:`BootstrapEngine`: a paired bootstrap's sorted draws (corpus metrics);

and :class:`Comparison`, what every evidence view shows: the difference, its interval, its
p-value, and the smallest difference it detects with 80 % power (:meth:`Comparison.mde`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from warehouse.query.distributions import (
    binomial_two_sided,
    clopper_pearson,
    mcnemar,
    t_quantile,
    t_two_sided,
)

SIGNIFICANT = 0.05
"""The level of every test (two-sided)."""
POWER = 0.8
"""The power :meth:`Comparison.mde` is computed for."""


class Engine(Protocol):
    """Where a comparison's p-values and bounds come from (one source for both)."""

    def p_at(self, delta: float) -> float:
        """The two-sided p-value of "the true difference is ``delta``"."""
        ...

    def bounds(self, level: float) -> tuple[float, float]:
        """The interval of the difference at ``level``: every ``delta`` whose p >= 1-level."""
        ...

    def spread(self) -> float | None:
        """The standard error of the difference (None: the data cannot say)."""
        ...

    def df(self) -> float:
        """Degrees of freedom of the reference distribution (``inf``: normal)."""
        ...


@dataclass(frozen=True)
class TEngine:
    """A t (or z, ``df = inf``) statistic centred on ``centre`` with standard error ``se``."""

    centre: float
    se: float
    dof: float

    def p_at(self, delta: float) -> float:
        if self.se == 0.0:
            return 1.0 if self.centre == delta else 0.0
        return t_two_sided((self.centre - delta) / self.se, self.dof)

    def bounds(self, level: float) -> tuple[float, float]:
        half = t_quantile(1 - (1 - level) / 2, self.dof) * self.se
        return self.centre - half, self.centre + half

    def spread(self) -> float | None:
        return self.se if self.se > 0 else None

    def df(self) -> float:
        return self.dof


@dataclass(frozen=True)
class McNemarEngine:
    """Two 0/1 columns on ``n`` pairs: ``fixed`` pairs 0 -> 1, ``broke`` pairs 1 -> 0.

    Given the ``m = fixed + broke`` discordant pairs, ``fixed ~ Binomial(m, pi)`` and the
    difference is ``(m / n) * (2 pi - 1)``: the test of a difference is the exact binomial
    test of the matching ``pi`` (at 0: McNemar's exact test), and the interval maps
    Clopper-Pearson's for ``pi``, which inverts that very test. With no discordant pair the
    difference is bounded by the discordance rate ``n`` agreeing pairs allow."""

    fixed: int
    broke: int
    n: int

    def p_at(self, delta: float) -> float:
        m = self.fixed + self.broke
        if m == 0:  # P(no discordant pair | discordance >= |delta|) <= (1 - |delta|)^n
            return 1.0 if delta == 0 else min(1.0, 2 * max(0.0, 1 - abs(delta)) ** self.n)
        if delta == 0:
            return mcnemar(self.fixed, self.broke)
        pi = (1 + delta * self.n / m) / 2
        if not 0.0 <= pi <= 1.0:  # a difference the discordant pairs cannot make
            return 0.0
        return binomial_two_sided(self.fixed, m, pi)

    def bounds(self, level: float) -> tuple[float, float]:
        m = self.fixed + self.broke
        if m == 0:
            reach = 1 - ((1 - level) / 2) ** (1 / self.n)
            return -reach, reach
        low, high = clopper_pearson(self.fixed, m, level)
        share = m / self.n
        return share * (2 * low - 1), share * (2 * high - 1)

    def spread(self) -> float | None:
        m = self.fixed + self.broke
        if m == 0:
            return None
        diff = (self.fixed - self.broke) / self.n
        return math.sqrt(max(m / self.n - diff * diff, 0.0) / self.n) or None

    def df(self) -> float:
        return math.inf


@dataclass(frozen=True)
class BootstrapEngine:
    """A paired bootstrap of a difference: ``draws`` sorted. p at ``delta`` is twice the
    smaller share of draws on either side of it; the interval the matching percentiles."""

    draws: np.ndarray

    def p_at(self, delta: float) -> float:
        b = self.draws.size
        below = int(np.searchsorted(self.draws, delta, side="right"))  # draws <= delta
        above = b - int(np.searchsorted(self.draws, delta, side="left"))  # draws >= delta
        return min(1.0, 2 * min(below, above) / b)

    def bounds(self, level: float) -> tuple[float, float]:
        b = self.draws.size
        k = max(1, math.ceil((1 - level) / 2 * b))
        return float(self.draws[k - 1]), float(self.draws[b - k])

    def spread(self) -> float | None:
        sd = float(self.draws.std(ddof=1))
        return sd if sd > 0 else None

    def df(self) -> float:
        return math.inf


@dataclass(frozen=True)
class Comparison:
    """B against A: ``diff`` = B's score minus A's, and its evidence.

    ``design``: ``paired`` (the same samples, ``n`` of them), ``unpaired`` (``n`` and
    ``n_b`` samples), or ``seeds`` (``n`` and ``n_b`` seeds). ``clusters``: the units when
    the samples were clustered."""

    diff: float
    n: int
    test: str  # "mcnemar", "paired-t", "bootstrap", "welch", "agresti-caffo", "prediction"
    engine: Engine
    design: str = "paired"
    n_b: int | None = None
    clusters: int | None = None
    fixed: int = 0  # 0/1 columns, paired: wrong in A, right in B
    broke: int = 0  # right in A, wrong in B
    level: float = 0.95

    @property
    def p(self) -> float:
        return self.p_at(0.0)

    def p_at(self, delta: float) -> float:
        return self.engine.p_at(delta)

    @property
    def low(self) -> float:
        return self.bounds()[0]

    @property
    def high(self) -> float:
        return self.bounds()[1]

    def bounds(self, level: float | None = None) -> tuple[float, float]:
        return self.engine.bounds(self.level if level is None else level)

    @property
    def significant(self) -> bool:
        return self.p < 1 - self.level

    @property
    def se(self) -> float | None:
        return self.engine.spread()

    def mde(self, alpha: float = SIGNIFICANT, power: float = POWER) -> float | None:
        """The smallest true difference this comparison detects with ``power`` at level
        ``alpha`` (two-sided): ``(t(1 - alpha/2) + t(power)) * se``."""
        se = self.se
        if se is None:
            return None
        df = self.engine.df()
        return (t_quantile(1 - alpha / 2, df) + t_quantile(power, df)) * se


__all__ = [
    "POWER",
    "SIGNIFICANT",
    "BootstrapEngine",
    "Comparison",
    "Engine",
    "McNemarEngine",
    "TEngine",
]
