"""The statistics of the evidence views, written once: intervals and paired comparisons.

Everything here works on per-sample values (numpy arrays), never on stores. The rules:

- **Interval of a score** (:func:`interval`), 95 % by default:
  - a 0/1 column (``correct``): the exact binomial interval of Clopper and Pearson, from the
    number of successes — no approximation, no randomness;
  - any other column: a percentile bootstrap of the mean (2,000 resamples) up to
    :data:`BOOTSTRAP_MAX_N` samples, and beyond that the normal interval
    ``mean ± 1.96·sd/√n`` that the bootstrap converges to. The bootstrap's seed is derived
    from a key (the run id, split and metric), so an interval never changes when recomputed.
- **Paired comparison** of two runs on the samples both have (:func:`paired`): the mean of the
  per-sample differences ``b - a``, its 95 % interval (normal, from the differences' spread),
  and a two-sided p-value — exact McNemar (a binomial test on the discordant pairs) when both
  columns are 0/1, else the normal test of the mean difference.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054
"""The two-sided 95 % quantile of the standard normal."""
BOOTSTRAP_RESAMPLES = 2_000
BOOTSTRAP_MAX_N = 5_000
"""Above this many samples the normal interval replaces the bootstrap (they agree there)."""
SIGNIFICANT = 0.05


@dataclass(frozen=True)
class Interval:
    """A score's 95 % interval over ``n`` samples, and how it was computed."""

    low: float
    high: float
    n: int
    method: str  # "clopper-pearson", "bootstrap", "normal"

    def as_dict(self) -> dict[str, float | int | str]:
        return {"low": self.low, "high": self.high, "n": self.n, "method": self.method}


@dataclass(frozen=True)
class Paired:
    """Run B against run A on their shared samples: ``diff`` = mean(b - a)."""

    n: int
    diff: float
    low: float
    high: float
    p: float
    test: str  # "mcnemar", "normal"
    fixed: int = 0  # 0/1 columns: wrong in A, right in B
    broke: int = 0  # right in A, wrong in B

    @property
    def significant(self) -> bool:
        return self.p < SIGNIFICANT


class Summary:
    """A column seen batch by batch, enough for its interval: counts, sums, and the values
    themselves while they are few enough for the bootstrap."""

    def __init__(self, keep: int = BOOTSTRAP_MAX_N) -> None:
        self.n = 0
        self.total = 0.0
        self.total_sq = 0.0
        self.nonzero = 0
        self.binary = True
        self.keep = keep
        self.kept: list[np.ndarray] = []

    def add(self, values: np.ndarray) -> None:
        """Take one batch of the column (non-finite values are not samples)."""
        data = values.astype(np.float64, copy=False)
        data = data[np.isfinite(data)]
        if not data.size:
            return
        self.n += int(data.size)
        self.total += float(data.sum())
        self.total_sq += float(np.dot(data, data))
        self.nonzero += int(np.count_nonzero(data))
        self.binary = self.binary and is_binary(data)
        if self.n <= self.keep:
            self.kept.append(data)
        else:
            self.kept = []

    def interval(self, *key: str) -> Interval | None:
        """The same interval :func:`interval` gives over all the values added."""
        if self.n == 0:
            return None
        if self.binary:
            low, high = clopper_pearson(self.nonzero, self.n)
            return Interval(low, high, self.n, "clopper-pearson")
        if self.kept:
            return interval(np.concatenate(self.kept), *key)
        mean = self.total / self.n
        variance = max(0.0, (self.total_sq - self.n * mean * mean) / (self.n - 1))
        half = Z95 * math.sqrt(variance) / math.sqrt(self.n)
        return Interval(mean - half, mean + half, self.n, "normal")


def is_binary(values: np.ndarray) -> bool:
    """Whether every value is 0 or 1 (booleans included)."""
    return bool(values.size) and bool(np.all((values == 0) | (values == 1)))


def seed_of(*key: str) -> int:
    """A stable 64-bit seed from a key (the same on every machine and Python)."""
    return int.from_bytes(hashlib.sha256(":".join(key).encode()).digest()[:8], "big")


def interval(values: np.ndarray, *key: str, level: float = 0.95) -> Interval | None:
    """The interval of the mean of ``values`` (finite ones); None without any."""
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    n = int(finite.size)
    if n == 0:
        return None
    if is_binary(finite):
        low, high = clopper_pearson(int(np.count_nonzero(finite)), n, level)
        return Interval(low, high, n, "clopper-pearson")
    data = finite.astype(np.float64)
    if n <= BOOTSTRAP_MAX_N:
        rng = np.random.default_rng(seed_of(*key))
        means = np.empty(BOOTSTRAP_RESAMPLES)
        for start in range(0, BOOTSTRAP_RESAMPLES, 250):  # bounded memory: 250 x n at a time
            picks = rng.integers(0, n, size=(min(250, BOOTSTRAP_RESAMPLES - start), n))
            means[start : start + len(picks)] = data[picks].mean(axis=1)
        tail = (1 - level) / 2
        low, high = np.quantile(means, [tail, 1 - tail])
        return Interval(float(low), float(high), n, "bootstrap")
    mean, half = float(data.mean()), _z(level) * float(data.std(ddof=1)) / math.sqrt(n)
    return Interval(mean - half, mean + half, n, "normal")


def paired(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> Paired | None:
    """B against A sample by sample (``a[i]`` and ``b[i]`` are the same sample)."""
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep].astype(np.float64), b[keep].astype(np.float64)
    n = int(a.size)
    if n == 0:
        return None
    d = b - a
    mean = float(d.mean())
    spread = float(d.std(ddof=1)) if n > 1 else 0.0
    half = _z(level) * spread / math.sqrt(n)
    if is_binary(a) and is_binary(b):
        fixed = int(np.count_nonzero((a == 0) & (b == 1)))
        broke = int(np.count_nonzero((a == 1) & (b == 0)))
        p = mcnemar(fixed, broke)
        return Paired(n, mean, mean - half, mean + half, p, "mcnemar", fixed, broke)
    if spread == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
    else:
        p = 2 * _normal_sf(abs(mean) / (spread / math.sqrt(n)))
    return Paired(n, mean, mean - half, mean + half, min(1.0, p), "normal")


def mean_interval(values: np.ndarray, level: float = 0.95) -> Interval | None:
    """Student's t interval of the mean of a few values (seeds): None for fewer than two."""
    data = values[np.isfinite(values)].astype(np.float64)
    n = int(data.size)
    if n < 2:
        return None
    half = t_quantile(1 - (1 - level) / 2, n - 1) * float(data.std(ddof=1)) / math.sqrt(n)
    mean = float(data.mean())
    return Interval(mean - half, mean + half, n, "student-t")


def t_quantile(q: float, df: int) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom (``q`` > 0.5)."""
    lo, hi = 0.0, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * regularized_beta(df / (df + t * t), df / 2, 0.5)
    return 1 - tail if t >= 0 else tail


def binomial_interval(hits: int, n: int) -> Interval | None:
    """:func:`clopper_pearson` as an :class:`Interval` (None for no trials)."""
    if n <= 0:
        return None
    low, high = clopper_pearson(hits, n)
    return Interval(low, high, n, "clopper-pearson")


def mcnemar(b: int, c: int) -> float:
    """The exact two-sided McNemar p-value of ``b`` and ``c`` discordant pairs."""
    k, m = min(b, c), b + c
    if m == 0:
        return 1.0
    # P(X <= k) for X ~ Binomial(m, 1/2), summed in log space: 2.0**m overflows a float
    # past about a thousand discordant pairs (a 3 % change on 100k samples has 3,000)
    log_half = m * math.log(0.5)
    terms = [math.lgamma(m + 1) - math.lgamma(i + 1) - math.lgamma(m - i + 1) for i in range(k + 1)]
    top = max(terms)
    tail = math.exp(top + log_half) * sum(math.exp(t - top) for t in terms)
    return min(1.0, 2 * tail)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval of ``k`` successes in ``n`` trials."""
    alpha = 1 - level
    low = 0.0 if k == 0 else beta_quantile(alpha / 2, k, n - k + 1)
    high = 1.0 if k == n else beta_quantile(1 - alpha / 2, k + 1, n - k)
    return low, high


def beta_quantile(q: float, a: float, b: float) -> float:
    """``x`` with ``I_x(a, b) = q`` (the regularized incomplete beta), by bisection."""
    lo, hi = 0.0, 1.0
    for _ in range(100):  # 2^-100: far below double precision
        mid = (lo + hi) / 2
        if regularized_beta(mid, a, b) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def regularized_beta(x: float, a: float, b: float) -> float:
    """``I_x(a, b)`` by its continued fraction (Lentz), accurate to ~1e-14."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    log_front += a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 10_000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return result


def _z(level: float) -> float:
    return Z95 if level == 0.95 else math.sqrt(2) * _erfinv(level)


def _normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def _erfinv(y: float) -> float:
    lo, hi = 0.0, 10.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if math.erf(mid) < y:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


__all__ = [
    "SIGNIFICANT",
    "Interval",
    "Paired",
    "Summary",
    "binomial_interval",
    "clopper_pearson",
    "interval",
    "is_binary",
    "mcnemar",
    "mean_interval",
    "paired",
    "seed_of",
    "t_quantile",
]
