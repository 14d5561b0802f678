"""The statistics of the evidence views, written once: intervals, comparisons and their power.

Everything here works on numpy arrays, never on stores. A score is a *ratio of sums over
units*: ``R = sum(num) / sum(den)``. A per-sample mean is the case ``den = 1`` with one unit
per sample; a corpus metric (``sum(matches) / sum(length)``) has its own ``den``; with a
cluster column (samples sharing a passage, a conversation, a prompt), a unit is a cluster
and its ``num``/``den`` are the cluster's sums. One rule then gives every interval and test
(the linearization, or delta method, of Miller 2024, "Adding Error Bars to Evals"):

- **Interval of a score** (:func:`ratio_interval`): ``R ± t(df) * se`` with the
  bias-reduced (CR2) variance ``se^2 = sum((num - R*den)^2 / (1 - h)) / sum(den)^2``, where
  ``h = den / sum(den)`` is each unit's share (its leverage), and Bell and McCaffrey's
  degrees of freedom (:func:`bell_mccaffrey_df`). With ``den = 1`` this is exactly Student's
  t interval of the mean (``h = 1/n``, ``df = n - 1``), and with equal clusters the usual
  cluster-robust one (``G/(G-1)``, ``G - 1``). Where a few units carry most of the weight
  (one passage with half the questions, a few very long documents) it widens the interval
  and lowers the degrees of freedom, as it must: the plain cluster-robust form rejected 28 %
  of equal runs with one dominant passage among 30 (Imbens and Kolesar 2016 recommend this
  correction, with degrees of freedom under a random-effects working model:
  :func:`working_variances`). A 0/1 column without clusters gets the exact Clopper-Pearson
  interval instead (:func:`interval`).
- **Paired comparison** of two runs on the same units (:func:`paired`): the difference of
  the two ratios, linearized unit by unit, with the same t (a corpus metric too: the
  percentile bootstrap it replaced rejected 10 % of equal systems on ten sentences); for two
  0/1 columns without clusters the exact McNemar test, conditional on the discordant pairs,
  joined with Tango's unconditional score test so that its interval can reach beyond the
  discordance the samples happened to show (:class:`McNemarEngine`).
- **Unpaired comparison** (:func:`unpaired`): Welch's t on the two linearized variances
  (two proportions: the Agresti-Caffo interval and its z test).
- **Seeds** (:func:`welch`, :func:`prediction`): the same on one score per seed.

Every comparison's p-value comes from the same engine as its interval, so "significant" and
"the interval excludes 0" never disagree, at any level (:meth:`Comparison.p_at`,
:meth:`Comparison.bounds`); :meth:`Comparison.mde` is the smallest true difference the
comparison detects with 80 % power; :func:`selected` corrects a comparison of a run picked as
the best of K (Bonferroni) and keeps that agreement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from warehouse.query.distributions import clopper_pearson, t_quantile
from warehouse.query.engines import POWER as POWER
from warehouse.query.engines import SIGNIFICANT as SIGNIFICANT
from warehouse.query.engines import Comparison as Comparison
from warehouse.query.engines import Engine as Engine
from warehouse.query.engines import McNemarEngine as McNemarEngine
from warehouse.query.engines import TEngine as TEngine
from warehouse.query.engines import selected as selected


@dataclass(frozen=True)
class Interval:
    """A score's interval over ``n`` samples (``clusters`` units when clustered), and how it
    was computed."""

    low: float
    high: float
    n: int
    method: str  # "clopper-pearson", "student-t", "clustered-t", "linearized-t"
    estimate: float | None = None
    clusters: int | None = None

    def as_dict(self) -> dict[str, float | int | str]:
        found: dict[str, float | int | str] = {
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "method": self.method,
        }
        if self.clusters is not None:
            found["clusters"] = self.clusters
        return found

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def is_binary(values: np.ndarray) -> bool:
    """Whether every value is 0 or 1 (booleans included)."""
    return bool(values.size) and bool(np.all((values == 0) | (values == 1)))


def finite(values: np.ndarray) -> np.ndarray:
    """The finite values as float64 (NaN, None and ±inf are not samples)."""
    data = np.asarray(values, dtype=np.float64)
    return data[np.isfinite(data)]


# --- one score ----------------------------------------------------------------------------


def interval(
    values: np.ndarray, level: float = 0.95, clusters: np.ndarray | None = None
) -> Interval | None:
    """The interval of the mean of ``values`` (finite ones; ``clusters``: each value's
    cluster, same length); None without any."""
    data = np.asarray(values, dtype=np.float64)
    keep = np.isfinite(data)
    if clusters is None:
        data = data[keep]
        if data.size == 0:
            return None
        if is_binary(data):
            return binomial_interval(int(np.count_nonzero(data)), int(data.size), level)
        return ratio_interval(data, np.ones_like(data), level, samples=int(data.size))
    num, den = cluster_sums(clusters[keep], data[keep])
    return ratio_interval(num, den, level, samples=int(keep.sum()), clustered=True)


def binomial_interval(hits: int, n: int, level: float = 0.95) -> Interval | None:
    """Clopper-Pearson's exact interval as an :class:`Interval` (None for no trials)."""
    if n <= 0:
        return None
    low, high = clopper_pearson(hits, n, level)
    return Interval(low, high, n, "clopper-pearson", hits / n)


def ratio_interval(
    num: np.ndarray,
    den: np.ndarray,
    level: float = 0.95,
    *,
    samples: int | None = None,
    clustered: bool = False,
) -> Interval | None:
    """The linearized t interval of ``sum(num) / sum(den)`` over its units (one per row):
    the CR2 standard error with Bell-McCaffrey's degrees of freedom (see the module)."""
    units = int(num.size)
    total = float(den.sum())
    if units < 2 or total == 0.0:
        return None
    ratio = float(num.sum()) / total
    found = linearized(num - ratio * den, den / total, total)
    if found is None:
        return None
    se, df = found
    half = t_quantile(1 - (1 - level) / 2, df) * se
    method = "clustered-t" if clustered else ("student-t" if np.all(den == 1) else "linearized-t")
    return Interval(
        ratio - half,
        ratio + half,
        units if samples is None else samples,
        method,
        ratio,
        units if clustered else None,
    )


def linearized(
    residual: np.ndarray, share: np.ndarray, total: float = 1.0
) -> tuple[float, float] | None:
    """The CR2 standard error and Bell-McCaffrey degrees of freedom of a linearized sum:
    ``residual`` is each unit's ``num - R*den`` (centred, so large offsets cancel exactly),
    ``share`` its leverage ``den / sum(den)``, ``total`` the divisor ``sum(den)``. None when
    one unit holds all the weight: nothing is left to say how far the score may move."""
    if residual.size < 2 or float(share.max()) >= 1.0:
        return None
    scaled = residual / total
    se = math.sqrt(float(np.sum(scaled * scaled / (1.0 - share))))
    return se, bell_mccaffrey_df(share, working_variances(residual, share))


def working_variances(residual: np.ndarray, share: np.ndarray) -> np.ndarray:
    """Each unit's variance in the working model of the degrees of freedom: ``a*h + b*h^2``
    for the unit's share ``h``, fitted to the squared residuals with ``a, b >= 0`` (Imbens
    and Kolesar 2016: a random-effects working model). ``a`` alone is samples that are
    independent within a unit, ``b`` alone units whose means vary alike whatever their size;
    assuming the first where the second holds overstated the degrees of freedom (6.1 % false
    positives with 30 passages of uneven sizes)."""
    target = residual * residual / (1.0 - share)
    basis = np.column_stack([share, share * share])
    best: tuple[float, np.ndarray] | None = None
    for columns in ((0, 1), (0,), (1,)):
        coef = np.linalg.lstsq(basis[:, columns], target, rcond=None)[0]
        if np.all(coef >= 0):
            full = np.zeros(2)
            full[list(columns)] = coef
            misfit = float(np.sum((target - basis @ full) ** 2))
            if best is None or misfit < best[0]:
                best = (misfit, full)
    if best is None or not np.any(best[1] > 0):
        return share
    fitted: np.ndarray = basis @ best[1]
    return fitted


def bell_mccaffrey_df(weights: np.ndarray, variances: np.ndarray | None = None) -> float:
    """Bell and McCaffrey's (2002) degrees of freedom of the CR2 variance of a weighted mean
    (a ratio of sums) whose units have these weights, when unit ``g``'s linearized residual
    has variance ``variances[g]`` (default: proportional to its weight, as independent
    samples give): Satterthwaite's ``(tr AW)^2 / tr((AW)^2)`` for the quadratic form ``A``
    of the CR2 estimator and ``W = diag(variances)``, in O(G) (see the tests for the
    matrices). ``G - 1`` for ``G`` equal weights, whatever the variances; fewer where a few
    units carry most of the weight."""
    share = np.asarray(weights, dtype=np.float64)
    share = share / float(share.sum())
    if np.all(share == share[0]):
        return float(share.size - 1)
    omega = share if variances is None else np.asarray(variances, dtype=np.float64)
    # A = D - 1u' - u1' + c11' with D = diag(1/(1-h)), u = Dh, c = h'Dh
    d = 1.0 / (1.0 - share)
    u = share * d
    c = float(np.dot(share, u))
    lam = d * omega
    q = c * omega - u * omega
    first = float(np.dot(omega, d - 2.0 * u + c))
    second = (
        float(np.dot(lam, lam))
        + 2.0 * float(np.dot(lam, q))
        - 2.0 * float(np.dot(lam, u * omega))
        + float(q.sum()) ** 2
        - 2.0 * float(np.dot(q, u)) * float(omega.sum())
        + float(np.dot(omega, u)) ** 2
    )
    return first * first / second if second > 0 else float(share.size - 1)


def cluster_sums(clusters: np.ndarray, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each cluster's sum of every column, and its count as the last column."""
    _, index = np.unique(np.asarray(clusters, dtype=object).astype(str), return_inverse=True)
    groups = int(index.max()) + 1 if index.size else 0
    sums = tuple(np.bincount(index, weights=c, minlength=groups) for c in columns)
    return (*sums, np.bincount(index, minlength=groups).astype(np.float64))


def mean_interval(values: np.ndarray, level: float = 0.95) -> Interval | None:
    """Student's t interval of the mean of a few values (seeds): None for fewer than two."""
    data = finite(values)
    if data.size < 2:
        return None
    return ratio_interval(data, np.ones_like(data), level)


# --- two scores ---------------------------------------------------------------------------


def paired(
    a: np.ndarray, b: np.ndarray, level: float = 0.95, clusters: np.ndarray | None = None
) -> Comparison | None:
    """B against A sample by sample (``a[i]`` and ``b[i]`` are the same sample)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    n = int(a.size)
    if n == 0:
        return None
    if clusters is None and is_binary(a) and is_binary(b):
        fixed = int(np.count_nonzero((a == 0) & (b == 1)))
        broke = int(np.count_nonzero((a == 1) & (b == 0)))
        engine = McNemarEngine(fixed, broke, n)
        return Comparison(
            (fixed - broke) / n, n, "mcnemar", engine, fixed=fixed, broke=broke, level=level
        )
    ones = np.ones_like(a)
    if clusters is None:
        return paired_ratio(a, ones, b, ones, level=level, samples=n)
    sa, sb, count = cluster_sums(np.asarray(clusters)[keep], a, b)
    return paired_ratio(sa, count, sb, count, level=level, samples=n, clustered=True)


def paired_ratio(
    num_a: np.ndarray,
    den_a: np.ndarray,
    num_b: np.ndarray,
    den_b: np.ndarray,
    *,
    level: float = 0.95,
    samples: int | None = None,
    clustered: bool = False,
) -> Comparison | None:
    """B's ``sum(num)/sum(den)`` minus A's, on the same units: the linearized paired t (CR2
    and Bell-McCaffrey; a unit's leverage is its mean share of the two runs' weights, which
    is exactly its share when both runs weigh the units alike, as a mean or a shared
    reference length does)."""
    units = int(num_a.size)
    total_a, total_b = float(den_a.sum()), float(den_b.sum())
    if units < 2 or total_a == 0.0 or total_b == 0.0:
        return None
    ra, rb = float(num_a.sum()) / total_a, float(num_b.sum()) / total_b
    residual = (num_b - rb * den_b) / total_b - (num_a - ra * den_a) / total_a
    found = linearized(residual, (den_a / total_a + den_b / total_b) / 2)
    if found is None:
        return None
    plain = bool(np.all(den_a == 1) and np.all(den_b == 1))
    return Comparison(
        rb - ra,
        units if samples is None else samples,
        "clustered-t" if clustered else ("paired-t" if plain else "linearized-t"),
        TEngine(rb - ra, *found),
        clusters=units if clustered else None,
        level=level,
    )


def unpaired(
    a: np.ndarray,
    b: np.ndarray,
    level: float = 0.95,
    clusters_a: np.ndarray | None = None,
    clusters_b: np.ndarray | None = None,
) -> Comparison | None:
    """B against A on different samples: two proportions (0/1 columns, Agresti-Caffo) or
    Welch's t of the means (cluster-robust with clusters)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ka, kb = np.isfinite(a), np.isfinite(b)
    xa, xb = a[ka], b[kb]
    if xa.size == 0 or xb.size == 0:
        return None
    if clusters_a is None and clusters_b is None and is_binary(xa) and is_binary(xb):
        return two_proportions(int(xa.sum()), int(xa.size), int(xb.sum()), int(xb.size), level)
    if clusters_a is None or clusters_b is None:
        return unpaired_ratio(
            xa,
            np.ones_like(xa),
            xb,
            np.ones_like(xb),
            level=level,
            samples=(int(xa.size), int(xb.size)),
        )
    sa, ca = cluster_sums(np.asarray(clusters_a)[ka], xa)
    sb, cb = cluster_sums(np.asarray(clusters_b)[kb], xb)
    return unpaired_ratio(
        sa, ca, sb, cb, level=level, samples=(int(xa.size), int(xb.size)), clustered=True
    )


def two_proportions(
    hits_a: int, n_a: int, hits_b: int, n_b: int, level: float = 0.95
) -> Comparison:
    """B's rate minus A's on independent samples: the Agresti-Caffo interval (one success
    and one failure added to each run) and the z test on the same statistic."""
    pa, pb = (hits_a + 1) / (n_a + 2), (hits_b + 1) / (n_b + 2)
    se = math.sqrt(pa * (1 - pa) / (n_a + 2) + pb * (1 - pb) / (n_b + 2))
    return Comparison(
        hits_b / n_b - hits_a / n_a,
        n_a,
        "agresti-caffo",
        TEngine(pb - pa, se, math.inf),
        design="unpaired",
        n_b=n_b,
        level=level,
    )


def unpaired_ratio(
    num_a: np.ndarray,
    den_a: np.ndarray,
    num_b: np.ndarray,
    den_b: np.ndarray,
    *,
    level: float = 0.95,
    samples: tuple[int, int] | None = None,
    clustered: bool = False,
) -> Comparison | None:
    """B's ratio minus A's on independent units: Welch's t on the linearized (CR2)
    variances, with Welch-Satterthwaite degrees of freedom over each side's own."""
    ga, gb = int(num_a.size), int(num_b.size)
    total_a, total_b = float(den_a.sum()), float(den_b.sum())
    if ga < 2 or gb < 2 or total_a == 0.0 or total_b == 0.0:
        return None
    ra, rb = float(num_a.sum()) / total_a, float(num_b.sum()) / total_b
    found_a = linearized(num_a - ra * den_a, den_a / total_a, total_a)
    found_b = linearized(num_b - rb * den_b, den_b / total_b, total_b)
    if found_a is None or found_b is None:
        return None
    return _welch(
        rb - ra,
        found_a[0] ** 2,
        found_a[1],
        found_b[0] ** 2,
        found_b[1],
        level,
        samples or (ga, gb),
        "welch",
        "unpaired",
        (ga, gb) if clustered else None,
    )


def welch(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> Comparison | None:
    """B's mean minus A's over a few independent values each (seeds): Welch's t test."""
    xa, xb = finite(a), finite(b)
    if xa.size < 2 or xb.size < 2:
        return None
    va, vb = float(xa.var(ddof=1)) / xa.size, float(xb.var(ddof=1)) / xb.size
    diff = float(xb.mean() - xa.mean())
    return _welch(
        diff,
        va,
        xa.size - 1,
        vb,
        xb.size - 1,
        level,
        (int(xa.size), int(xb.size)),
        "welch",
        "seeds",
        None,
    )


def prediction(scores: np.ndarray, value: float, level: float = 0.95) -> Comparison | None:
    """One new value against a few earlier ones (a run against another setup's seeds):
    ``value - mean(scores)`` with the t prediction error ``sd * sqrt(1 + 1/n)``."""
    xs = finite(scores)
    if xs.size < 2:
        return None
    se = float(xs.std(ddof=1)) * math.sqrt(1 + 1 / xs.size)
    diff = value - float(xs.mean())
    return Comparison(
        diff,
        int(xs.size),
        "prediction",
        TEngine(diff, se, xs.size - 1),
        design="seeds",
        n_b=1,
        level=level,
    )


def _welch(
    diff: float,
    va: float,
    dfa: float,
    vb: float,
    dfb: float,
    level: float,
    sizes: tuple[int, int],
    test: str,
    design: str,
    clusters: tuple[int, int] | None,
) -> Comparison:
    total = va + vb
    pieces = (va * va / dfa if dfa else 0.0) + (vb * vb / dfb if dfb else 0.0)
    df = total * total / pieces if pieces > 0 else math.inf
    return Comparison(
        diff,
        sizes[0],
        test,
        TEngine(diff, math.sqrt(total), df),
        design=design,
        n_b=sizes[1],
        clusters=None if clusters is None else clusters[0] + clusters[1],
        level=level,
    )


# --- several tests at once ----------------------------------------------------------------


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order): reject where adjusted < alpha, and
    the chance of any false rejection stays <= alpha over the whole family."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [1.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


__all__ = [
    "POWER",
    "SIGNIFICANT",
    "Comparison",
    "Interval",
    "McNemarEngine",
    "TEngine",
    "bell_mccaffrey_df",
    "binomial_interval",
    "cluster_sums",
    "finite",
    "holm",
    "interval",
    "is_binary",
    "linearized",
    "mean_interval",
    "paired",
    "paired_ratio",
    "prediction",
    "ratio_interval",
    "selected",
    "two_proportions",
    "unpaired",
    "unpaired_ratio",
    "welch",
    "working_variances",
]
