"""The calibration suite: simulations with known truth (``calibration.py``), seeded, sized to
run in about a minute. Null rates stay within Monte-Carlo error of 5 % (at or below it for the
tests that are conservative by design), intervals cover at least 93 % at a nominal 95 %, and
the documented effects are found. ``benchmarks/calibration.py`` runs bigger versions."""

from __future__ import annotations

import math

import pytest

from tests.query.calibration import ALPHA, SCENARIOS, Scenario, clustered_null, unclustered_null

pytestmark = pytest.mark.slow
SEED = 20_270_527


def error(rate: float, trials: int) -> float:
    """Three Monte-Carlo standard errors of a rate near ``rate``."""
    return 3 * math.sqrt(rate * (1 - rate) / trials)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_scenario_is_calibrated(scenario: Scenario) -> None:
    rate = scenario.run(scenario.ci_trials, SEED)
    margin = error(scenario.nominal, scenario.ci_trials)
    if scenario.kind == "null":
        assert rate <= scenario.nominal + margin, f"false positives {rate:.3f}"
        if not scenario.conservative:
            assert rate >= scenario.nominal - margin, f"far below its level: {rate:.3f}"
    elif scenario.kind == "coverage":
        assert rate >= 0.93, f"coverage {rate:.3f}"
    else:
        assert rate >= scenario.nominal - error(max(scenario.nominal, 0.95), scenario.ci_trials)
        if not scenario.conservative:  # a power promised (the MDE's): not far above it either
            assert rate <= scenario.nominal + margin


def test_clusters_matter_where_samples_share_a_passage() -> None:
    """The same data as the clustered null, tested as independent samples: far above 5 %."""
    trials = 300
    naive = unclustered_null(trials, SEED)
    assert naive > ALPHA + error(ALPHA, trials)
    assert clustered_null(trials, SEED) < naive
