"""The rules behind the situations an audit added to the calibration suite (unequal clusters,
few discordant pairs, ties between seeds, rows picked as the best of many), checked on exact
cases and against independent computations: each failed before its fix."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sp

from tests.query import reference
from warehouse.query import stats
from warehouse.query.aggregates import Aggregate
from warehouse.query.replicates import lucky_seed

SEED = 27_2027
RATIO = Aggregate("ratio", ("matches", "length"))


def within(rate: float, level: float, trials: int) -> bool:
    """At most ``level`` plus three Monte-Carlo standard errors."""
    return rate <= level + 3 * math.sqrt(level * (1 - level) / trials)


def test_cr2_reduces_to_students_t_with_equal_weights_and_to_statsmodels_cr1_df() -> None:
    """Equal clusters: the bias-reduced variance is CR1's and the degrees of freedom G - 1;
    one unit per sample: Student's t exactly."""
    rng = np.random.default_rng(SEED + 2)
    x = rng.normal(0.5, 0.2, 40)
    got = stats.interval(x)
    assert got is not None
    assert (got.low, got.high) == pytest.approx(
        sp.t.interval(0.95, 39, loc=x.mean(), scale=sp.sem(x)), rel=1e-12
    )
    cluster = np.repeat(np.arange(8), 5)
    sums = np.bincount(cluster, weights=x)
    clustered = stats.interval(x, clusters=cluster)
    assert clustered is not None
    mean = x.mean()
    se = math.sqrt(8 / 7 * float(np.sum((sums - 5 * mean) ** 2))) / 40
    half = sp.t.ppf(0.975, 7) * se
    assert (clustered.low, clustered.high) == pytest.approx((mean - half, mean + half), rel=1e-12)


def test_bell_mccaffrey_degrees_of_freedom_match_the_matrix_formula() -> None:
    """The O(G) closed form against Satterthwaite's formula on the G x G matrices of Bell and
    McCaffrey (2002), for the default working model and for any unit variances."""
    rng = np.random.default_rng(SEED + 3)
    for _ in range(20):
        den = rng.integers(1, 40, int(rng.integers(3, 30))).astype(float)
        variances = rng.random(den.size) + 0.01
        assert stats.bell_mccaffrey_df(den) == pytest.approx(
            reference.bell_mccaffrey_df(den, den), rel=1e-9
        )
        assert stats.bell_mccaffrey_df(den, variances) == pytest.approx(
            reference.bell_mccaffrey_df(den, variances), rel=1e-9
        )


def test_the_working_model_is_scipys_non_negative_least_squares() -> None:
    """The degrees of freedom's working variances ``a*h + b*h^2``: scipy's NNLS fit."""
    rng = np.random.default_rng(SEED + 10)
    for _ in range(50):
        den = rng.integers(1, 60, 25).astype(float)
        share = den / den.sum()
        residual = rng.normal(0, 1, 25) * den ** rng.uniform(0.3, 1.2)
        assert stats.working_variances(residual, share) == pytest.approx(
            reference.working_variances(residual, share), rel=1e-7, abs=1e-12
        )


def test_one_broken_sample_does_not_bound_the_gap_by_one_sample() -> None:
    """One discordant pair in 50: the old interval was [-0.02, +0.0195]; a true gap of 3
    points fits these data (p well above 5 %), so the interval holds it."""
    a = np.ones(50)
    b = np.ones(50)
    b[0] = 0.0
    c = stats.paired(a, b)
    assert c is not None
    assert c.p_at(-0.03) > 0.05
    assert c.low < -0.03


def test_tango_score_statistic_matches_its_restricted_maximum_likelihood() -> None:
    """The score test's constrained estimate, found numerically from the multinomial
    likelihood, gives the same statistic as the closed form."""
    from scipy.optimize import minimize_scalar

    from warehouse.query.engines import tango_z

    fixed, broke, n, delta = 9, 3, 80, 0.04

    def negative_log_likelihood(p21: float) -> float:
        p12 = p21 + delta
        rest = 1 - p12 - p21
        return -(
            fixed * math.log(p12) + broke * math.log(p21) + (n - fixed - broke) * math.log(rest)
        )

    found = minimize_scalar(
        negative_log_likelihood,
        bounds=(1e-9, (1 - delta) / 2 - 1e-9),
        method="bounded",
        options={"xatol": 1e-13},
    )
    p21 = float(found.x)
    expected = (fixed - broke - n * delta) / math.sqrt(n * (2 * p21 + delta * (1 - delta)))
    assert tango_z(fixed, broke, n, delta) == pytest.approx(expected, rel=1e-6)


def test_seeds_whose_scores_tie_do_not_make_the_best_one_lucky() -> None:
    """Scores on 50 samples move in steps of 0.02: with three seeds, two of them tie one time
    in ten, and 'the best lies beyond the others' zero spread' flagged 13 % of ordinary
    groups. Others that agree exactly cannot say how far a seed may fall: no call."""
    assert lucky_seed(np.array([0.80, 0.80, 0.82])) is None
    rng = np.random.default_rng(SEED + 6)
    trials = 2000
    flagged = sum(bool(lucky_seed(rng.binomial(50, 0.8, 3) / 50)) for _ in range(trials))
    assert within(flagged / trials, 0.05, trials), flagged / trials


def test_a_selected_comparison_keeps_its_p_and_interval_in_agreement() -> None:
    """Bonferroni for a pick of K: p times K, the interval at level 1 - 0.05/K, the smallest
    detectable gap at 0.05/K: the interval excludes 0 exactly when p < 0.05."""
    from warehouse.query.stats import selected

    rng = np.random.default_rng(SEED + 9)
    for _ in range(200):
        a = rng.normal(0, 1, 30)
        b = a + rng.normal(rng.normal(0, 0.5), 1, 30)
        c = stats.paired(a, b)
        assert c is not None
        s = selected(c, 7)
        assert s.p == pytest.approx(min(1.0, 7 * c.p))
        assert (s.low > 0 or s.high < 0) == (s.p < 0.05)
        assert s.bounds() == pytest.approx(c.bounds(1 - 0.05 / 7))
        assert s.mde() == pytest.approx(c.mde(0.05 / 7))
