"""The statistics, checked against scipy and statsmodels, exact computations and planted
effects (not against themselves)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from tests.query import reference
from warehouse.query import distributions as dist
from warehouse.query import stats


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed exactly term by term."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


@pytest.mark.parametrize(("k", "n"), [(0, 10), (1, 10), (5, 10), (9, 10), (10, 10), (37, 120)])
def test_clopper_pearson_bounds_have_their_defining_tail_probabilities(k: int, n: int) -> None:
    low, high = dist.clopper_pearson(k, n)
    if k > 0:  # P(X >= k | p = low) = 2.5 %
        assert 1 - binomial_cdf(k - 1, n, low) == pytest.approx(0.025, abs=1e-9)
    else:
        assert low == 0.0
    if k < n:  # P(X <= k | p = high) = 2.5 %
        assert binomial_cdf(k, n, high) == pytest.approx(0.025, abs=1e-9)
    else:
        assert high == 1.0


@pytest.mark.parametrize(("k", "n"), [(3, 1_000_000), (900_000, 1_000_000), (12, 40)])
def test_clopper_pearson_matches_statsmodels_at_any_size(k: int, n: int) -> None:
    from statsmodels.stats.proportion import proportion_confint

    expected = proportion_confint(k, n, alpha=0.05, method="beta")
    assert dist.clopper_pearson(k, n) == pytest.approx(expected, rel=1e-9)


@given(
    q=st.floats(0.51, 0.9999),
    df=st.one_of(st.integers(1, 500).map(float), st.floats(1.0, 300.0)),
)
@settings(max_examples=60, deadline=None)
def test_t_quantiles_and_tails_match_scipy(q: float, df: float) -> None:
    t = dist.t_quantile(q, df)
    assert t == pytest.approx(sp.t.ppf(q, df), rel=1e-9)
    assert dist.t_sf(t, df) == pytest.approx(1 - q, rel=1e-8)
    assert dist.t_two_sided(-t, df) == pytest.approx(2 * (1 - q), rel=1e-8)


@given(
    n=st.integers(1, 400),
    frac=st.floats(0.0, 1.0),
    p=st.floats(0.01, 0.99),
)
@settings(max_examples=60, deadline=None)
def test_binomial_tails_match_scipy(n: int, frac: float, p: float) -> None:
    k = round(frac * n)
    assert dist.binomial_cdf(k, n, p) == pytest.approx(sp.binom.cdf(k, n, p), rel=1e-9, abs=1e-300)
    lower, upper = sp.binom.cdf(k, n, p), sp.binom.sf(k - 1, n, p)
    assert dist.binomial_two_sided(k, n, p) == pytest.approx(min(1, 2 * min(lower, upper)))


def test_mcnemar_matches_textbook_cases_and_statsmodels() -> None:
    from statsmodels.stats.contingency_tables import mcnemar

    assert dist.mcnemar(0, 0) == 1.0
    assert dist.mcnemar(7, 7) == 1.0
    assert dist.mcnemar(0, 10) == pytest.approx(2 / 1024)
    for b, c in ((3, 7), (30, 5), (1400, 1600)):
        table = [[100, b], [c, 100]]
        assert dist.mcnemar(b, c) == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-9)


def test_a_binary_column_gets_the_exact_interval_of_its_count() -> None:
    values = np.array([1] * 90 + [0] * 10, dtype=np.float64)
    got = stats.interval(values)
    assert got is not None
    assert (got.low, got.high) == dist.clopper_pearson(90, 100)
    assert (got.n, got.method) == (100, "clopper-pearson")


def test_a_continuous_column_gets_students_t_interval_at_every_size() -> None:
    """Issue 27, item 7: the percentile bootstrap covered 88 % at n = 10."""
    rng = np.random.default_rng(1)
    for n in (10, 1000, 20_000):
        values = rng.normal(0.7, 0.1, size=n)
        got = stats.interval(values)
        assert got is not None
        expected = sp.t.interval(0.95, n - 1, values.mean(), sp.sem(values))
        assert (got.low, got.high) == pytest.approx(expected, rel=1e-12)
        assert got.method == "student-t"


def test_missing_values_are_not_samples() -> None:
    got = stats.interval(np.array([1.0, np.nan, 0.0, np.inf]))
    assert got is not None
    assert got.n == 2


def test_identical_runs_differ_in_nothing() -> None:
    a = (np.random.default_rng(3).random(1000) < 0.9).astype(float)
    got = stats.paired(a, a.copy())
    assert got is not None
    assert (got.diff, got.p, got.fixed, got.broke) == (0.0, 1.0, 0, 0)
    assert not got.significant
    low, high = got.bounds()
    assert low < 0 < high  # no discordant pair in 1,000 still allows a small difference
    # the larger of P(no discordant pair) = 2.5 % and Tango's bound z^2 / (n + z^2)
    z2 = sp.norm.ppf(0.975) ** 2
    assert high == pytest.approx(max(1 - 0.025 ** (1 / 1000), z2 / (1000 + z2)))


def planted(n: int, accuracy: float, gain: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Run A right on ``accuracy`` of ``n`` samples; run B fixes ``gain * n`` more of A's
    errors than it breaks, with 2 % of the samples flipped each way on top."""
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
    mde = got.mde()
    assert mde is not None
    assert mde < 0.02


def test_a_planted_tenth_of_a_percent_on_500_samples_is_not() -> None:
    a, b = planted(500, 0.90, 0.002, seed=5)
    got = stats.paired(a, b)
    assert got is not None
    assert not got.significant
    assert got.low < 0 < got.high
    mde = got.mde()
    assert mde is not None
    assert mde > 0.002


@given(
    n=st.integers(20, 3000),
    accuracy=st.floats(0.5, 0.99),
    churn=st.floats(0.0, 0.2),
    gain=st.floats(-0.05, 0.05),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=200, deadline=None)
def test_the_exact_paired_p_value_and_interval_always_agree(
    n: int, accuracy: float, churn: float, gain: float, seed: int
) -> None:
    """Issue 27, item 7: the exact McNemar p and the Wald interval disagreed in 1.9 % of
    comparisons. Now the interval inverts the very test: p < 0.05 iff 0 is outside it, and
    so for every other null value and level."""
    rng = np.random.default_rng(seed)
    a = (rng.random(n) < accuracy).astype(float)
    flip = rng.random(n) < churn
    b = np.where(flip, 1 - a, a)
    b = np.where((a == 0) & (rng.random(n) < max(gain, 0) * 3), 1.0, b)
    got = stats.paired(a, b)
    assert got is not None
    low, high = got.low, got.high
    assert (got.p < 0.05) == (not low <= 0.0 <= high) or math.isclose(got.p, 0.05, rel_tol=1e-9)
    for delta in (low - 1e-9, high + 1e-9):
        assert got.p_at(delta) < 0.05 or math.isclose(got.p_at(delta), 0.05, rel_tol=1e-6)
    low99, high99 = got.bounds(0.99)
    assert low99 <= low
    assert high <= high99


def test_five_fixes_and_no_break_are_not_significant_and_the_interval_says_so() -> None:
    """The case Hypothesis found against the old code: McNemar p = 0.0625, while the Wald
    interval [+0.002, +0.031] excluded 0."""
    a = np.array([0.0] * 5 + [1.0] * 292)
    b = np.ones(297)
    got = stats.paired(a, b)
    assert got is not None
    assert got.p == pytest.approx(0.0625)
    assert got.low < 0 < got.high


def test_a_continuous_paired_test_is_students_t_and_agrees_with_scipy() -> None:
    """Issue 27, item 7: the normal (z) test rejected 7.5 % at n = 10."""
    rng = np.random.default_rng(6)
    a = rng.normal(0.5, 0.1, 10)
    b = a + 0.03 + rng.normal(0, 0.05, 10)
    got = stats.paired(a, b)
    assert got is not None
    assert got.test == "paired-t"
    assert got.p == pytest.approx(sp.ttest_rel(b, a).pvalue, rel=1e-9)
    d = b - a
    assert (got.low, got.high) == pytest.approx(
        sp.t.interval(0.95, 9, d.mean(), sp.sem(d)), rel=1e-9
    )


def test_two_proportions_without_shared_samples() -> None:
    from statsmodels.stats.proportion import confint_proportions_2indep

    got = stats.unpaired(np.array([1.0] * 80 + [0.0] * 20), np.array([1.0] * 70 + [0.0] * 30))
    assert got is not None
    assert got.test == "agresti-caffo"
    assert got.design == "unpaired"
    assert got.diff == pytest.approx(-0.1)
    expected = confint_proportions_2indep(70, 100, 80, 100, method="agresti-caffo")
    assert got.bounds() == pytest.approx(expected, rel=1e-9)


def test_welch_without_shared_samples_matches_scipy() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.normal(0.5, 0.1, 40), rng.normal(0.56, 0.2, 25)
    got = stats.unpaired(a, b)
    assert got is not None
    assert got.test == "welch"
    assert got.p == pytest.approx(sp.ttest_ind(b, a, equal_var=False).pvalue, rel=1e-9)
    seeds = stats.welch(a[:3], b[:4])
    assert seeds is not None
    assert seeds.p == pytest.approx(sp.ttest_ind(b[:4], a[:3], equal_var=False).pvalue, rel=1e-9)


def test_clustered_paired_difference_matches_statsmodels() -> None:
    import statsmodels.api as sm

    rng = np.random.default_rng(8)
    cluster = np.repeat(np.arange(60), 7)
    shift = rng.normal(0, 0.3, 60)[cluster]
    a = (rng.random(cluster.size) < 0.6 + 0.1 * np.tanh(shift)).astype(float)
    b = np.where(rng.random(cluster.size) < 0.2, 1 - a, a)
    got = stats.paired(a, b, clusters=cluster)
    assert got is not None
    assert got.test == "clustered-t"
    assert got.clusters == 60
    fit = sm.OLS(b - a, np.ones(cluster.size)).fit(cov_type="cluster", cov_kwds={"groups": cluster})
    assert got.se == pytest.approx(float(fit.bse[0]), rel=1e-9)


def test_the_ratio_interval_is_the_mean_interval_when_every_weight_is_one() -> None:
    rng = np.random.default_rng(9)
    x = rng.gamma(2.0, 1.0, 300)
    ratio = stats.ratio_interval(x, np.ones_like(x))
    mean = stats.interval(x)
    assert ratio is not None
    assert mean is not None
    assert (ratio.low, ratio.high) == pytest.approx((mean.low, mean.high), rel=1e-12)


def test_a_corpus_ratios_paired_difference_is_weighted_least_squares_with_hc2() -> None:
    """Two systems' sum(matches)/sum(length) on the same sentences: the difference is the WLS
    mean of (mb - ma)/length weighted by length, its standard error statsmodels' HC2 (the
    CR2 of one sentence per unit), on Bell-McCaffrey's degrees of freedom."""
    import statsmodels.api as sm

    rng = np.random.default_rng(10)
    length = rng.integers(1, 40, 500).astype(float)
    ma = np.floor(length * rng.uniform(0.3, 0.8, 500))
    mb = np.minimum(length, ma + rng.integers(0, 3, 500))
    got = stats.paired_ratio(ma, length, mb, length)
    assert got is not None
    fit = sm.WLS((mb - ma) / length, np.ones(500), weights=length).fit(cov_type="HC2")
    assert got.diff == pytest.approx(float(fit.params[0]), rel=1e-12)
    assert got.se == pytest.approx(float(fit.bse[0]), rel=1e-9)
    residual = (mb - ma) - got.diff * length
    df = reference.linearized_df(residual, length / length.sum())
    assert got.p == pytest.approx(2 * sp.t.sf(got.diff / float(fit.bse[0]), df), rel=1e-7)
    assert got.low > 0
    assert got.p < 0.05


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.7062047361747), (2, 4.30265272974946), (4, 2.77644510519779), (30, 2.04227245630124)],
)
def test_t_quantiles_match_published_tables(df: int, expected: float) -> None:
    assert dist.t_quantile(0.975, df) == pytest.approx(expected, rel=1e-9)


def test_three_seeds_get_a_wide_t_interval() -> None:
    values = np.array([0.90, 0.92, 0.94])
    got = stats.mean_interval(values)
    assert got is not None
    half = dist.t_quantile(0.975, 2) * values.std(ddof=1) / math.sqrt(3)
    assert (got.low, got.high) == pytest.approx((0.92 - half, 0.92 + half))
    assert stats.mean_interval(np.array([0.9])) is None


def test_holm_matches_statsmodels() -> None:
    from statsmodels.stats.multitest import multipletests

    ps = [0.01, 0.04, 0.03, 0.005, 0.5, 0.2]
    assert stats.holm(ps) == pytest.approx(list(multipletests(ps, method="holm")[1]))


def test_the_minimum_detectable_effect_is_the_gap_found_80_percent_of_the_time() -> None:
    """A planted gap equal to the MDE is detected about 80 % of the time (power check on a
    paired t test, 400 trials)."""
    rng = np.random.default_rng(11)
    n, sd = 200, 0.3
    noise = rng.normal(0, 1, n)
    base = stats.paired(np.zeros(n), sd * (noise - noise.mean()) / noise.std(ddof=1))
    assert base is not None
    mde = base.mde()
    assert mde is not None
    hits = 0
    for _ in range(400):
        d = rng.normal(mde, sd, n)
        c = stats.paired(np.zeros(n), d)
        assert c is not None
        hits += c.significant
    assert 0.72 <= hits / 400 <= 0.88
