"""The statistics, checked against exact computations and planted effects (not themselves)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from warehouse.query import stats


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed exactly term by term."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


@pytest.mark.parametrize(("k", "n"), [(0, 10), (1, 10), (5, 10), (9, 10), (10, 10), (37, 120)])
def test_clopper_pearson_bounds_have_their_defining_tail_probabilities(k: int, n: int) -> None:
    low, high = stats.clopper_pearson(k, n)
    if k > 0:  # P(X >= k | p = low) = 2.5 %
        assert 1 - binomial_cdf(k - 1, n, low) == pytest.approx(0.025, abs=1e-9)
    else:
        assert low == 0.0
    if k < n:  # P(X <= k | p = high) = 2.5 %
        assert binomial_cdf(k, n, high) == pytest.approx(0.025, abs=1e-9)
    else:
        assert high == 1.0


@pytest.mark.parametrize(("x", "a", "b"), [(0.3, 2.0, 5.0), (0.7, 8.0, 3.0), (0.5, 0.5, 0.5)])
def test_the_regularized_beta_equals_its_integral(x: float, a: float, b: float) -> None:
    # midpoint rule over t = sin^2(u) (smooth at both ends, even for a, b < 1)
    steps = 200_000
    top = math.asin(math.sqrt(x))
    u = (np.arange(steps) + 0.5) * top / steps
    t = np.sin(u) ** 2
    integrand = t ** (a - 1) * (1 - t) ** (b - 1) * 2 * np.sin(u) * np.cos(u)
    beta = math.exp(math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    assert stats.regularized_beta(x, a, b) == pytest.approx(
        float(integrand.sum() * top / steps) / beta, abs=1e-6
    )


def test_mcnemar_matches_textbook_cases() -> None:
    assert stats.mcnemar(0, 0) == 1.0
    assert stats.mcnemar(7, 7) == 1.0
    assert stats.mcnemar(0, 10) == pytest.approx(2 / 1024)
    assert stats.mcnemar(2, 10) == pytest.approx(2 * (1 + 12 + 66) / 4096)


def test_a_binary_column_gets_the_exact_interval_of_its_count() -> None:
    values = np.array([1] * 90 + [0] * 10, dtype=np.float64)
    got = stats.interval(values, "run", "val", "acc")
    assert got is not None
    assert (got.low, got.high) == stats.clopper_pearson(90, 100)
    assert (got.n, got.method) == (100, "clopper-pearson")


def test_the_bootstrap_is_reproducible_from_its_key_and_sensible() -> None:
    rng = np.random.default_rng(1)
    values = rng.normal(0.7, 0.1, size=1000)
    one = stats.interval(values, "run-a", "val", "iou")
    again = stats.interval(values, "run-a", "val", "iou")
    assert one == again
    assert one is not None
    assert one.method == "bootstrap"
    assert one.low < values.mean() < one.high
    normal = stats.Z95 * values.std(ddof=1) / math.sqrt(values.size)
    assert (one.high - one.low) / 2 == pytest.approx(normal, rel=0.1)


def test_large_samples_get_the_normal_interval() -> None:
    values = np.random.default_rng(2).normal(0.5, 0.2, size=stats.BOOTSTRAP_MAX_N + 1)
    got = stats.interval(values, "k")
    assert got is not None
    half = stats.Z95 * values.std(ddof=1) / math.sqrt(values.size)
    assert (got.low, got.high) == pytest.approx((values.mean() - half, values.mean() + half))
    assert got.method == "normal"


def test_missing_values_are_not_samples() -> None:
    got = stats.interval(np.array([1.0, np.nan, 0.0, np.inf]), "k")
    assert got is not None
    assert got.n == 2


def test_identical_runs_differ_in_nothing() -> None:
    a = (np.random.default_rng(3).random(1000) < 0.9).astype(float)
    got = stats.paired(a, a.copy())
    assert got is not None
    assert (got.diff, got.p, got.fixed, got.broke) == (0.0, 1.0, 0, 0)
    assert not got.significant


def planted(n: int, accuracy: float, gain: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Run A right on ``accuracy`` of ``n`` samples; run B fixes ``gain * n`` more of A's
    errors than it breaks, with 2 % of the samples flipped each way on top (real runs
    disagree on many samples even when one is better)."""
    rng = np.random.default_rng(seed)
    a = (rng.random(n) < accuracy).astype(float)
    b = a.copy()
    churn = n // 50
    wrong = rng.permutation(np.flatnonzero(a == 0))
    right = rng.permutation(np.flatnonzero(a == 1))
    b[wrong[: round(gain * n) + churn]] = 1
    b[right[:churn]] = 0
    return a, b


def test_a_planted_two_percent_gain_on_10k_samples_is_detected() -> None:
    a, b = planted(10_000, 0.90, 0.02, seed=4)
    got = stats.paired(a, b)
    assert got is not None
    assert got.diff == pytest.approx(0.02)
    assert got.significant
    assert got.low > 0


def test_a_planted_tenth_of_a_percent_on_500_samples_is_not() -> None:
    a, b = planted(500, 0.90, 0.002, seed=5)
    got = stats.paired(a, b)
    assert got is not None
    assert not got.significant
    assert got.low < 0 < got.high


def test_continuous_pairs_use_the_normal_test() -> None:
    rng = np.random.default_rng(6)
    a = rng.normal(0.5, 0.1, 400)
    got = stats.paired(a, a + 0.05 + rng.normal(0, 0.01, 400))
    assert got is not None
    assert got.test == "normal"
    assert got.significant
    assert got.low < 0.05 < got.high


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.7062047361747), (2, 4.30265272974946), (4, 2.77644510519779), (30, 2.04227245630124)],
)
def test_t_quantiles_match_published_tables(df: int, expected: float) -> None:
    assert stats.t_quantile(0.975, df) == pytest.approx(expected, rel=1e-9)


def test_the_t_cdf_of_one_degree_is_the_cauchy_cdf() -> None:
    for t in (-3.0, -0.5, 0.0, 1.0, 7.0):
        assert stats.t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)


def test_three_seeds_get_a_wide_t_interval() -> None:
    values = np.array([0.90, 0.92, 0.94])
    got = stats.mean_interval(values)
    assert got is not None
    half = stats.t_quantile(0.975, 2) * values.std(ddof=1) / math.sqrt(3)
    assert (got.low, got.high) == pytest.approx((0.92 - half, 0.92 + half))
    assert stats.mean_interval(np.array([0.9])) is None


def test_mcnemar_is_exact_for_few_pairs_and_finite_for_many() -> None:
    """Small counts: the textbook sum of binomial coefficients. Thousands of discordant
    pairs (a 3 % change on 100k samples) overflowed 2.0**m; the log-space sum gives the
    continuity-corrected normal approximation's answer there."""
    import math

    from warehouse.query.stats import mcnemar

    assert mcnemar(3, 7) == pytest.approx(2 * sum(math.comb(10, i) for i in range(4)) / 2**10)
    assert mcnemar(5, 5) == 1.0
    b, c = 1400, 1600
    z = (abs(b - c) - 1) / math.sqrt(b + c)  # with the continuity correction
    normal = math.erfc(z / math.sqrt(2))
    assert mcnemar(b, c) == pytest.approx(normal, rel=0.02)
    assert 0.0 < mcnemar(10, 3000) < 1e-300 or mcnemar(10, 3000) == 0.0
