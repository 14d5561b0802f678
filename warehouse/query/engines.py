"""Where a comparison's numbers come from: one engine gives both its p-values and its
interval, so "significant" and "the interval excludes 0" never disagree, at any level and for
any null value (the regression gate tests "worse by exactly the margin").

- :class:`TEngine`: a t (or z) statistic: paired, clustered and Welch's tests, linearized
  ratios, two proportions (Agresti-Caffo);
- :class:`McNemarEngine`: two 0/1 columns on the same samples: exact McNemar, joined with
  Tango's score test;
- :class:`SelectedEngine`: any of them for a run picked as the best of K (Bonferroni);

and :class:`Comparison`, what every evidence view shows: the difference, its interval, its
p-value, and the smallest difference it detects with 80 % power (:meth:`Comparison.mde`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Protocol

from warehouse.query.distributions import (
    binomial_two_sided,
    clopper_pearson,
    mcnemar,
    normal_quantile,
    normal_sf,
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

    Two tests of "the difference is ``delta``", and a p-value that is the larger of the two,
    so each keeps its level and their union is the interval:

    - *conditional*: given the ``m = fixed + broke`` discordant pairs, ``fixed ~ Binomial(m,
      pi)`` and the difference is ``(m / n) * (2 pi - 1)``: the exact binomial test of the
      matching ``pi`` (at 0: McNemar's exact test, whatever the discordance), inverted by
      Clopper-Pearson's interval for ``pi``. It takes the discordance it saw, ``m / n``, for
      the true one, so alone its interval never reaches past ``±m/n``: with three
      discordant pairs in 50 it covered a true +3 points 88 % of the time;
    - *unconditional*: Tango's (1998) score test, whose variance is estimated under the
      tested difference (:func:`tango_z`); its interval is the one Fagerland, Lydersen and
      Laake (2014) recommend for paired proportions.
    """

    fixed: int
    broke: int
    n: int

    def p_at(self, delta: float) -> float:
        return max(self._conditional(delta), tango_p(self.fixed, self.broke, self.n, delta))

    def _conditional(self, delta: float) -> float:
        m = self.fixed + self.broke
        if m == 0:  # P(no discordant pair | discordance >= |delta|) <= (1 - |delta|)^n
            return 1.0 if delta == 0 else min(1.0, 2 * max(0.0, 1 - abs(delta)) ** self.n)
        if delta == 0:
            return mcnemar(self.fixed, self.broke)
        pi = (1 + delta * self.n / m) / 2
        if not 0.0 <= pi <= 1.0:  # a difference these discordant pairs cannot make
            return 0.0
        return binomial_two_sided(self.fixed, m, pi)

    def bounds(self, level: float) -> tuple[float, float]:
        m = self.fixed + self.broke
        if m == 0:
            reach = 1 - ((1 - level) / 2) ** (1 / self.n)
            low, high = -reach, reach
        else:
            pi_low, pi_high = clopper_pearson(self.fixed, m, level)
            share = m / self.n
            low, high = share * (2 * pi_low - 1), share * (2 * pi_high - 1)
        t_low, t_high = tango_bounds(self.fixed, self.broke, self.n, level)
        return min(low, t_low), max(high, t_high)

    def spread(self) -> float | None:
        m = self.fixed + self.broke
        if m == 0:
            return None
        diff = (self.fixed - self.broke) / self.n
        return math.sqrt(max(m / self.n - diff * diff, 0.0) / self.n) or None

    def df(self) -> float:
        return math.inf


def tango_z(fixed: int, broke: int, n: int, delta: float) -> float:
    """Tango's score statistic for "``P(fixed) - P(broke)`` is ``delta``" on ``n`` pairs:
    ``(fixed - broke - n delta) / sqrt(n (2 p + delta (1 - delta)))``, with ``p`` the
    maximum-likelihood ``P(broke)`` under that constraint (a quadratic's root). At 0 it is
    McNemar's asymptotic statistic ``(fixed - broke) / sqrt(fixed + broke)``."""
    a = 2.0 * n
    b = (2.0 * n - fixed + broke) * delta - (fixed + broke)
    c = -broke * delta * (1.0 - delta)
    p = (-b + math.sqrt(max(b * b - 4.0 * a * c, 0.0))) / (2.0 * a)
    variance = n * (2.0 * p + delta * (1.0 - delta))
    excess = fixed - broke - n * delta
    if variance <= 0.0:
        return 0.0 if excess == 0 else math.copysign(math.inf, excess)
    return excess / math.sqrt(variance)


def tango_p(fixed: int, broke: int, n: int, delta: float) -> float:
    """The two-sided p-value of Tango's score test (normal reference)."""
    if not -1.0 < delta < 1.0:
        return 1.0 if (fixed - broke) == n * delta else 0.0
    return min(1.0, 2 * normal_sf(abs(tango_z(fixed, broke, n, delta))))


def tango_bounds(fixed: int, broke: int, n: int, level: float) -> tuple[float, float]:
    """Tango's score interval: the differences his test does not reject at ``1 - level``
    (the statistic falls as ``delta`` rises, so each bound is one bisection)."""
    z = normal_quantile(1 - (1 - level) / 2)
    estimate = (fixed - broke) / n
    edge = 1.0 - 1e-12

    def kept(delta: float) -> bool:  # not rejected at this level
        return abs(tango_z(fixed, broke, n, delta)) <= z

    def solve(inside: float, outside: float) -> float:
        if kept(outside):
            return outside
        for _ in range(100):
            middle = (inside + outside) / 2
            if kept(middle):
                inside = middle
            else:
                outside = middle
        return inside

    return solve(estimate, -edge), solve(estimate, edge)


@dataclass(frozen=True)
class SelectedEngine:
    """A comparison of a run picked as the best of ``picked`` candidates on the same samples:
    Bonferroni over the candidates, so the pick's claim keeps its level whichever it was. The
    p-value is ``picked`` times the inner one; the interval the inner one at level
    ``1 - (1 - level) / picked``: they still agree."""

    inner: Engine
    picked: int

    def p_at(self, delta: float) -> float:
        return min(1.0, self.picked * self.inner.p_at(delta))

    def bounds(self, level: float) -> tuple[float, float]:
        return self.inner.bounds(1 - (1 - level) / self.picked)

    def spread(self) -> float | None:
        return self.inner.spread()

    def df(self) -> float:
        return self.inner.df()


@dataclass(frozen=True)
class Comparison:
    """B against A: ``diff`` = B's score minus A's, and its evidence.

    ``design``: ``paired`` (the same samples, ``n`` of them), ``unpaired`` (``n`` and
    ``n_b`` samples), or ``seeds`` (``n`` and ``n_b`` seeds). ``clusters``: the units when
    the samples were clustered."""

    diff: float
    n: int
    test: str  # "mcnemar", "paired-t", "linearized-t", "clustered-t", "welch", "agresti-caffo",
    # "prediction"
    engine: Engine
    design: str = "paired"
    n_b: int | None = None
    clusters: int | None = None
    fixed: int = 0  # 0/1 columns, paired: wrong in A, right in B
    broke: int = 0  # right in A, wrong in B
    level: float = 0.95
    picked: int = 1  # the candidates one of the runs was picked from (:func:`selected`)

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

    def p_worse(self, sign: float, margin: float = 0.0) -> float:
        """The p-value of "B is worse than A by exactly ``margin``" (``sign``: 1 when higher
        is better, -1 for a loss) when the data lean that way, else 1: two-sided at the
        boundary, so ``p < alpha`` is a one-sided test at ``alpha / 2``."""
        boundary = -sign * margin
        if sign * (self.diff - boundary) >= 0:
            return 1.0
        return self.p_at(boundary)

    def mde(self, alpha: float = SIGNIFICANT, power: float = POWER) -> float | None:
        """The smallest true difference this comparison detects with ``power`` at level
        ``alpha`` (two-sided; divided by the candidates of a pick):
        ``(t(1 - alpha/2) + t(power)) * se``."""
        se = self.se
        if se is None:
            return None
        df = self.engine.df()
        return (t_quantile(1 - alpha / self.picked / 2, df) + t_quantile(power, df)) * se


def selected(c: Comparison, picked: int) -> Comparison:
    """``c`` where one of its runs was picked as the best of ``picked`` candidates on these
    samples (a leaderboard row, a ``best`` reference): its p-value, interval and smallest
    detectable gap corrected for the pick (:class:`SelectedEngine`); ``c`` itself for 1."""
    if picked <= 1:
        return c
    return replace(c, engine=SelectedEngine(c.engine, picked), picked=picked)


__all__ = [
    "POWER",
    "SIGNIFICANT",
    "Comparison",
    "Engine",
    "McNemarEngine",
    "SelectedEngine",
    "TEngine",
    "selected",
    "tango_bounds",
    "tango_p",
    "tango_z",
]
