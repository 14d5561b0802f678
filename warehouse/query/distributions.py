"""The distributions behind the evidence: normal, Student's t, beta and binomial, exactly.

No scipy at run time (it is a test dependency only: the tests compare every function here with
it). The normal distribution is the standard library's; the others come from the regularized
incomplete beta function ``I_x(a, b)`` (a continued fraction, accurate to ~1e-14), and their
quantiles from a Newton iteration kept inside a bisection bracket, so a quantile costs a few
evaluations rather than a hundred.
"""

from __future__ import annotations

import math
from statistics import NormalDist

_NORMAL = NormalDist()


def normal_cdf(z: float) -> float:
    """P(Z <= z) for a standard normal."""
    return _NORMAL.cdf(z)


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal, accurate far into the tail."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def normal_quantile(q: float) -> float:
    """The ``q`` quantile of the standard normal (0 < q < 1)."""
    return _NORMAL.inv_cdf(q)


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (``inf``: the normal)."""
    if math.isinf(df):
        return normal_sf(t)
    tail = 0.5 * regularized_beta(df / (df + t * t), df / 2, 0.5)
    return tail if t >= 0 else 1 - tail


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    return 1 - t_sf(t, df)


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|): the two-sided p-value of a t statistic."""
    if math.isinf(df):
        return min(1.0, 2 * normal_sf(abs(t)))
    return min(1.0, regularized_beta(df / (df + t * t), df / 2, 0.5))


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom."""
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_quantile(1 - q, df)
    if math.isinf(df):
        return normal_quantile(q)
    # P(|T| > t) = I_{df/(df+t^2)}(df/2, 1/2) = 2(1 - q)
    x = beta_quantile(2 * (1 - q), df / 2, 0.5)
    return math.sqrt(df * (1 - x) / x) if x > 0 else math.inf


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return regularized_beta(1 - p, n - k, k + 1)


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


def binomial_two_sided(k: int, n: int, p: float) -> float:
    """The two-sided p-value of ``k`` successes in ``n`` trials under success rate ``p``:
    twice the smaller tail (the test whose inversion is Clopper-Pearson's interval)."""
    if p <= 0.0:
        return 1.0 if k == 0 else 0.0
    if p >= 1.0:
        return 1.0 if k == n else 0.0
    lower = binomial_cdf(k, n, p)
    upper = 1.0 - binomial_cdf(k - 1, n, p)
    return min(1.0, 2 * min(lower, upper))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval of ``k`` successes in ``n`` trials."""
    alpha = 1 - level
    low = 0.0 if k == 0 else beta_quantile(alpha / 2, k, n - k + 1)
    high = 1.0 if k == n else beta_quantile(1 - alpha / 2, k + 1, n - k)
    return low, high


def beta_quantile(q: float, a: float, b: float) -> float:
    """``x`` with ``I_x(a, b) = q``: Newton steps on the beta density, falling back to
    bisection whenever a step would leave the bracket that holds the root."""
    if q <= 0.0:
        return 0.0
    if q >= 1.0:
        return 1.0
    lo, hi = 0.0, 1.0
    x = _beta_start(q, a, b)
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    for _ in range(200):
        f = regularized_beta(x, a, b) - q
        if f == 0.0:
            return x
        if f < 0:
            lo = x
        else:
            hi = x
        density = math.exp(log_norm + (a - 1) * math.log(x) + (b - 1) * math.log1p(-x))
        step = f / density if density > 0 else math.inf
        guess = x - step
        if not lo < guess < hi:
            guess = (lo + hi) / 2
        if abs(guess - x) <= 1e-16 * max(x, 1e-300) or hi - lo <= 1e-17:
            return guess
        x = guess
    return x


def _beta_start(q: float, a: float, b: float) -> float:
    """A first guess: the normal approximation to the beta, kept inside (0, 1)."""
    mean = a / (a + b)
    sd = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    guess = mean + normal_quantile(q) * sd
    return min(max(guess, 1e-12), 1 - 1e-12)


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
    for m in range(1, 100_000):
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


__all__ = [
    "beta_quantile",
    "binomial_cdf",
    "binomial_two_sided",
    "clopper_pearson",
    "mcnemar",
    "normal_cdf",
    "normal_quantile",
    "normal_sf",
    "regularized_beta",
    "t_cdf",
    "t_quantile",
    "t_sf",
    "t_two_sided",
]
