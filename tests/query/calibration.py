"""Simulations with known truth for the calibration suite (``test_calibration.py``, sized for
CI) and its bigger version (``benchmarks/calibration.py``).

Each scenario draws data whose truth is known, runs the package's own code on it, and returns
how often it rejected (a null scenario: the false-positive rate, to be at most the test's
level) or how often an interval covered the truth (coverage, to be at least 95 %), or how
often a planted effect was found (power). Every scenario takes the number of trials and a
seed, so a rate is reproducible and its Monte-Carlo error is ``sqrt(r (1 - r) / trials)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from warehouse.query import stats
from warehouse.query.aggregates import Aggregate
from warehouse.query.evidence import Samples
from warehouse.query.gate import WORSE, judge
from warehouse.query.replicates import lucky_seed

ALPHA = stats.SIGNIFICANT
MEAN_CORRECT = Aggregate("mean", ("correct",))


@dataclass(frozen=True)
class Scenario:
    """A simulation: ``run(trials, seed)`` gives a rate; ``kind`` says what it must be."""

    name: str
    kind: str  # "null" (rate <= nominal), "coverage" (rate >= nominal), "power"
    nominal: float
    run: Callable[[int, int], float]
    ci_trials: int  # the trials the CI suite runs
    conservative: bool = False  # null: below its level by design (exact, Holm, Bonferroni);
    # power: at least the nominal (else: the power promised, within Monte-Carlo error)


def _difficulty(rng: np.random.Generator, n: int) -> np.ndarray:
    """Per-sample chance of being right: most samples easy, some hard (a real test set)."""
    return rng.beta(4.0, 1.2, n)


def paired_binary_null(trials: int, seed: int, n: int = 1000) -> float:
    """Two runs of equal skill on the same samples (each right with the sample's chance):
    McNemar's exact test."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        p = _difficulty(rng, n)
        a, b = (rng.random(n) < p).astype(float), (rng.random(n) < p).astype(float)
        c = stats.paired(a, b)
        hits += c is not None and c.significant
    return hits / trials


def paired_t_null_small(trials: int, seed: int, n: int = 10) -> float:
    """Continuous per-sample scores, n = 10, no true difference: Student's t (the normal
    test rejected 7.5 % here)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        a = rng.normal(0.6, 0.1, n)
        b = a + rng.normal(0, 0.05, n)
        c = stats.paired(a, b)
        hits += c is not None and c.significant
    return hits / trials


def unpaired_binary_null(trials: int, seed: int, n: int = 500) -> float:
    """Two runs of equal accuracy on different samples: two proportions (Agresti-Caffo)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        a = (rng.random(n) < 0.8).astype(float)
        b = (rng.random(n + 137) < 0.8).astype(float)
        c = stats.unpaired(a, b)
        hits += c is not None and c.significant
    return hits / trials


def unpaired_welch_null(trials: int, seed: int) -> float:
    """Equal means, unequal spreads and sizes (30 and 50): Welch's t."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        c = stats.unpaired(rng.normal(0.5, 0.05, 30), rng.normal(0.5, 0.2, 50))
        hits += c is not None and c.significant
    return hits / trials


def _passages(rng: np.random.Generator, passages: int, per: int) -> tuple[np.ndarray, ...]:
    """Two equal runs on questions grouped by passage: a passage both runs find hard or easy
    together, and which run does better on it varies by passage (shared, not independent)."""
    return _on_passages(rng, np.full(passages, per))


def _on_passages(rng: np.random.Generator, sizes: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`_passages` with passages of these sizes."""
    passages = int(sizes.size)
    cluster = np.repeat(np.arange(passages), sizes)
    base = rng.beta(3.0, 1.5, passages)[cluster]
    tilt = rng.normal(0, 0.15, passages)[cluster]
    a = (rng.random(cluster.size) < np.clip(base + tilt, 0, 1)).astype(float)
    b = (rng.random(cluster.size) < np.clip(base - tilt, 0, 1)).astype(float)
    return a, b, cluster


def clustered_null(trials: int, seed: int, passages: int = 500, per: int = 10) -> float:
    """500 passages x 10 questions, two equal runs: the clustered paired test (treating the
    questions as independent gave 11.3 % here)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        a, b, cluster = _passages(rng, passages, per)
        c = stats.paired(a, b, clusters=cluster)
        hits += c is not None and c.significant
    return hits / trials


def unclustered_null(trials: int, seed: int, passages: int = 500, per: int = 10) -> float:
    """The same data tested as if the questions were independent (what the cluster column
    fixes): far above 5 %."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        a, b, _ = _passages(rng, passages, per)
        c = stats.paired(a, b)
        hits += c is not None and c.significant
    return hits / trials


def _sentences(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    length = rng.integers(2, 60, n).astype(float)
    rate = np.clip(0.3 + length / 120 + rng.normal(0, 0.1, n), 0, 1)  # long ones score higher
    ma = rng.binomial(length.astype(int), rate).astype(float)
    mb = rng.binomial(length.astype(int), rate).astype(float)
    return ma, mb, length


def corpus_null(trials: int, seed: int, n: int = 300) -> float:
    """Two equal systems on the same sentences, scored by sum(matches)/sum(length): the
    linearized paired t of the ratio itself."""
    rng = np.random.default_rng(seed)
    ratio = Aggregate("ratio", ("matches", "length"))
    hits = 0
    for _ in range(trials):
        ma, mb, length = _sentences(rng, n)
        c = ratio.paired({"matches": ma, "length": length}, {"matches": mb, "length": length})
        hits += c is not None and c.significant
    return hits / trials


def _samples(run_id: str, correct: np.ndarray, labels: np.ndarray | None = None) -> Samples:
    other = {} if labels is None else {"label": list(labels)}
    return Samples(run_id, np.arange(correct.size).astype(str).astype(object),
                   {"correct": correct}, None, other)  # fmt: skip


def slices_null(trials: int, seed: int, slices: int = 10, n: int = 2000) -> float:
    """The gate with ``--slice`` over ``slices`` labels, two equal runs: the overall test and
    the slices' as one Holm family (uncorrected, 10 slices failed 16 %, 40 slices 38 %)."""
    rng = np.random.default_rng(seed)
    labels = np.asarray([str(i % slices) for i in range(n)], dtype=object)
    hits = 0
    for _ in range(trials):
        p = _difficulty(rng, n)
        ref = _samples("ref", (rng.random(n) < p).astype(float), labels)
        run = _samples("run", (rng.random(n) < p).astype(float), labels)
        verdict = judge(ref, run, MEAN_CORRECT, sign=1.0, slice_by="label", min_n=30)
        hits += verdict.code == WORSE
    return hits / trials


def best_of_k_null(trials: int, seed: int, k: int = 20, n: int = 1000) -> float:
    """``check RUN --against best`` where RUN and the K candidates are equally good: the
    reference is the best of K on these samples, so the gate tests at 0.05/K (uncorrected,
    20 equal runs failed 17.7 %)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        p = _difficulty(rng, n)
        runs = (rng.random((k + 1, n)) < p).astype(float)
        best = 1 + int(np.argmax(runs[1:].mean(axis=1)))
        verdict = judge(_samples("ref", runs[best]), _samples("run", runs[0]), MEAN_CORRECT,
                        sign=1.0, alpha=ALPHA / k)  # fmt: skip
        hits += verdict.code == WORSE
    return hits / trials


def seeds_null(trials: int, seed: int) -> float:
    """Two setups of equal mean, 3 seeds each (seed spread 1 point): Welch across seeds."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        c = stats.welch(rng.normal(0.9, 0.01, 3), rng.normal(0.9, 0.01, 3))
        hits += c is not None and c.significant
    return hits / trials


def lucky_null(trials: int, seed: int) -> float:
    """Ordinary seed groups of 3 to 6 seeds: how often one is called lucky."""
    rng = np.random.default_rng(seed)
    hits = 0
    for t in range(trials):
        hits += bool(lucky_seed(rng.normal(0.9, 0.01, 3 + t % 4)))
    return hits / trials


def _cover(low: float, high: float, truth: float) -> bool:
    return low <= truth <= high


def cp_coverage(trials: int, seed: int, n: int = 50, p: float = 0.9) -> float:
    rng = np.random.default_rng(seed)
    covered = 0
    for _ in range(trials):
        ci = stats.interval((rng.random(n) < p).astype(float))
        covered += ci is not None and _cover(ci.low, ci.high, p)
    return covered / trials


def t_coverage_small(trials: int, seed: int, n: int = 10) -> float:
    """A continuous score at n = 10 (the percentile bootstrap covered 88 % here)."""
    rng = np.random.default_rng(seed)
    covered = 0
    for _ in range(trials):
        ci = stats.interval(rng.normal(0.7, 0.1, n))
        covered += ci is not None and _cover(ci.low, ci.high, 0.7)
    return covered / trials


def t_coverage_skewed(trials: int, seed: int, n: int = 30) -> float:
    """A skewed score (gamma, shape 2) at n = 30."""
    rng = np.random.default_rng(seed)
    covered = 0
    for _ in range(trials):
        ci = stats.interval(rng.gamma(2.0, 0.5, n))
        covered += ci is not None and _cover(ci.low, ci.high, 1.0)
    return covered / trials


def clustered_coverage(trials: int, seed: int, passages: int = 500, per: int = 10) -> float:
    """500 passages x 10 questions; the truth is the mean of the passages' chances (the
    unclustered interval covered 71 % here)."""
    rng = np.random.default_rng(seed)
    covered = 0
    cluster = np.repeat(np.arange(passages), per)
    truth = 3.0 / 4.5  # the mean of Beta(3, 1.5)
    for _ in range(trials):
        p = rng.beta(3.0, 1.5, passages)[cluster]
        ci = stats.interval((rng.random(cluster.size) < p).astype(float), clusters=cluster)
        covered += ci is not None and _cover(ci.low, ci.high, truth)
    return covered / trials


def ratio_coverage(trials: int, seed: int, n: int = 500) -> float:
    """A corpus ratio sum(matches)/sum(length) over n sentences: its linearized interval
    against the ratio of the expectations."""
    rng = np.random.default_rng(seed)
    ratio = Aggregate("ratio", ("matches", "length"))
    lengths = np.arange(2, 60).astype(float)
    rates = np.clip(0.3 + lengths / 120, 0, 1)
    truth = float((lengths * rates).sum() / lengths.sum())
    covered = 0
    for _ in range(trials):
        length = rng.choice(lengths, n)
        matches = rng.binomial(length.astype(int), np.clip(0.3 + length / 120, 0, 1))
        ci = ratio.interval({"matches": matches.astype(float), "length": length})
        covered += ci is not None and _cover(ci.low, ci.high, truth)
    return covered / trials


def paired_diff_coverage(trials: int, seed: int, n: int = 1000) -> float:
    """Run B right 2 points more often than A on the same samples: the exact paired
    interval of B - A covers the true +0.02."""
    rng = np.random.default_rng(seed)
    covered = 0
    for _ in range(trials):
        p = _difficulty(rng, n)
        a = (rng.random(n) < p).astype(float)
        b = (rng.random(n) < np.minimum(p + 0.02 / 0.9, 1)).astype(float)
        truth = float(np.mean(np.minimum(p + 0.02 / 0.9, 1) - p))
        c = stats.paired(a, b)
        covered += c is not None and _cover(c.low, c.high, truth)
    return covered / trials


def best_of_k_coverage(trials: int, seed: int, k: int = 5, n: int = 500) -> float:
    """The leaderboard's interval of the best of K runs (their true accuracies 0.80-0.82),
    widened for the selection: covers the selected run's true accuracy (unadjusted: 26 %)."""
    rng = np.random.default_rng(seed)
    truths = np.linspace(0.80, 0.82, k)
    covered = 0
    for _ in range(trials):
        runs = (rng.random((k, n)) < truths[:, None]).astype(float)
        best = int(np.argmax(runs.mean(axis=1)))
        ci = stats.interval(runs[best], level=1 - ALPHA / k)
        covered += ci is not None and _cover(ci.low, ci.high, float(truths[best]))
    return covered / trials


def paired_power_2_points(trials: int, seed: int, n: int = 10_000) -> float:
    """The documented effect: +2 points on 10k samples, paired (0/1 columns); B's chance on
    each sample is raised in proportion to A's room, 0.02 on average."""
    rng = np.random.default_rng(seed)
    hits = 0
    room = 1.2 / 5.2  # E[1 - p] for p ~ Beta(4, 1.2)
    for _ in range(trials):
        p = _difficulty(rng, n)
        a = (rng.random(n) < p).astype(float)
        b = (rng.random(n) < p + 0.02 * (1 - p) / room).astype(float)
        c = stats.paired(a, b)
        hits += c is not None and c.significant and c.diff > 0
    return hits / trials


def mde_power(trials: int, seed: int, n: int = 200) -> float:
    """A true difference equal to the printed MDE is found about 80 % of the time."""
    rng = np.random.default_rng(seed)
    noise = rng.normal(0, 1, n)
    base = stats.paired(np.zeros(n), 0.3 * (noise - noise.mean()) / noise.std(ddof=1))
    assert base is not None
    mde = base.mde()
    assert mde is not None
    hits = 0
    for _ in range(trials):
        c = stats.paired(np.zeros(n), rng.normal(mde, 0.3, n))
        hits += c is not None and c.significant
    return hits / trials


def lucky_power(trials: int, seed: int) -> float:
    """A seed 5 points above five others (seed spread 0.5 point) is called lucky."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(trials):
        scores = np.append(rng.normal(0.9, 0.005, 5), 0.95)
        hits += bool(lucky_seed(scores))
    return hits / trials


def _one_big_passage(rng: np.random.Generator, passages: int) -> tuple[np.ndarray, ...]:
    """Two equal runs on questions grouped by passage, half of them in one passage and the
    rest in passages of 5 (a benchmark with one big source)."""
    sizes = np.full(passages, 5)
    sizes[0] = 5 * passages
    return _on_passages(rng, sizes)


def _share(trials: int, seed: int, event: Callable[[np.random.Generator], bool]) -> float:
    """How often ``event`` happens in ``trials`` seeded draws."""
    rng = np.random.default_rng(seed)
    return sum(bool(event(rng)) for _ in range(trials)) / trials


def _significant(c: stats.Comparison | None) -> bool:
    return c is not None and c.significant


def big_passage_null(trials: int, seed: int, passages: int = 30) -> float:
    """One passage holds half the questions: the CR2 variance with Bell-McCaffrey's degrees
    of freedom (CR1 on G - 1 rejected 28 % here)."""

    def trial(rng: np.random.Generator) -> bool:
        a, b, cluster = _one_big_passage(rng, passages)
        return _significant(stats.paired(a, b, clusters=cluster))

    return _share(trials, seed, trial)


def big_passage_coverage(trials: int, seed: int, passages: int = 30) -> float:
    """The same passages: one run's clustered interval (CR1 covered 72 % here)."""

    def trial(rng: np.random.Generator) -> bool:
        a, _, cluster = _one_big_passage(rng, passages)
        ci = stats.interval(a, clusters=cluster)
        return ci is not None and _cover(ci.low, ci.high, 3.0 / 4.5)

    return _share(trials, seed, trial)


def uneven_passages_null(trials: int, seed: int, passages: int = 30) -> float:
    """30 passages of lognormal sizes (1 to ~100 questions; CR1 rejected 9.8 % here, CR2
    with degrees of freedom for independent samples within passages 6.1 %)."""

    def trial(rng: np.random.Generator) -> bool:
        sizes = np.maximum(1, rng.lognormal(2.0, 1.0, passages).astype(int))
        a, b, cluster = _on_passages(rng, sizes)
        return _significant(stats.paired(a, b, clusters=cluster))

    return _share(trials, seed, trial)


def small_corpus_null(trials: int, seed: int) -> float:
    """Two equal systems on ten sentences (the percentile bootstrap rejected 9.8 % here)."""
    return corpus_null(trials, seed, n=10)


def accurate_pair_coverage(trials: int, seed: int, n: int = 50) -> float:
    """95 % against 98 % on 50 samples: about three discordant pairs. The exact interval
    conditional on them covered the true +3 points 88 % of the time; joined with Tango's."""

    def trial(rng: np.random.Generator) -> bool:
        c = stats.paired((rng.random(n) < 0.95).astype(float), (rng.random(n) < 0.98).astype(float))
        return c is not None and _cover(c.low, c.high, 0.03)

    return _share(trials, seed, trial)


def tied_seeds_null(trials: int, seed: int) -> float:
    """Three seeds scored on 50 samples: scores move in steps of 0.02 and two of them tie
    one time in ten ("beyond a zero spread" called 13 % of such groups lucky)."""
    return _share(trials, seed, lambda rng: bool(lucky_seed(rng.binomial(50, 0.8, 3) / 50)))


def leaderboard_pick_null(trials: int, seed: int, k: int = 20, n: int = 1000) -> float:
    """The leaderboard's top row, the best of 20 equal runs, against one equal run: its lead
    tested as a pick (uncorrected, "significant" 17 % of the time)."""

    def trial(rng: np.random.Generator) -> bool:
        p = _difficulty(rng, n)
        runs = (rng.random((k + 1, n)) < p).astype(float)
        best = int(np.argmax(runs[:k].mean(axis=1)))
        top, picked = (best, k) if runs[best].mean() >= runs[k].mean() else (k, 1)
        c = MEAN_CORRECT.paired({"correct": runs[top]}, {"correct": runs[k if top != k else best]})
        return c is not None and stats.selected(c, picked).significant

    return _share(trials, seed, trial)


def group_pick_null(trials: int, seed: int, groups: int = 30, seeds: int = 5) -> float:
    """``--by-group``: an experiment's best of 30 configurations (5 seeds each) against one
    equal configuration, Welch across seeds, tested as a pick (uncorrected: 18 %)."""

    def trial(rng: np.random.Generator) -> bool:
        many = rng.normal(0.9, 0.01, (groups, seeds))
        best = many[int(np.argmax(many.mean(axis=1)))]
        other = rng.normal(0.9, 0.01, seeds)
        leads = best.mean() >= other.mean()
        c = stats.welch(best, other) if leads else stats.welch(other, best)
        return c is not None and stats.selected(c, groups if leads else 1).significant

    return _share(trials, seed, trial)


def seed_against_its_setup_null(trials: int, seed: int, others: int = 3) -> float:
    """The gate on two seeds of one setup: an ordinary seed against its setup's 3 other
    seeds (a t prediction bound), one-sided at 2.5 %."""

    def trial(rng: np.random.Generator) -> bool:
        c = stats.prediction(rng.normal(0.9, 0.01, others), float(rng.normal(0.9, 0.01)))
        return c is not None and c.p_worse(1.0) < ALPHA

    return _share(trials, seed, trial)


SCENARIOS = [
    Scenario("paired 0/1, equal runs (McNemar)", "null", ALPHA, paired_binary_null, 600, True),
    Scenario("paired scores, n = 10 (t)", "null", ALPHA, paired_t_null_small, 2000),
    Scenario("unpaired 0/1 (two proportions)", "null", ALPHA, unpaired_binary_null, 1000),
    Scenario("unpaired scores (Welch)", "null", ALPHA, unpaired_welch_null, 2000),
    Scenario("clustered, 500 x 10 (cluster t)", "null", ALPHA, clustered_null, 400),
    Scenario("clustered, one passage of half (CR2)", "null", ALPHA, big_passage_null, 800),
    Scenario("clustered, 30 uneven passages (CR2)", "null", ALPHA, uneven_passages_null, 2000),
    Scenario("corpus ratio (linearized t)", "null", ALPHA, corpus_null, 300),
    Scenario("corpus ratio, 10 sentences", "null", ALPHA, small_corpus_null, 1000),
    Scenario("check --slice, 10 slices (Holm)", "null", ALPHA, slices_null, 300, True),
    Scenario("check --against best of 20", "null", ALPHA, best_of_k_null, 300, True),
    Scenario("seeds, 3 against 3 (Welch)", "null", ALPHA, seeds_null, 2000, True),
    Scenario("lucky_seed, 3-6 ordinary seeds", "null", ALPHA, lucky_null, 2000, True),
    Scenario("lucky_seed, 3 seeds on 50 samples", "null", ALPHA, tied_seeds_null, 2000, True),
    Scenario("leaderboard, best of 20 against 1", "null", ALPHA, leaderboard_pick_null, 600, True),
    Scenario("--by-group, best of 30 setups", "null", ALPHA, group_pick_null, 2000, True),
    Scenario(
        "check, a seed against 3 others", "null", ALPHA / 2, seed_against_its_setup_null, 4000
    ),
    Scenario("interval: 0/1, n = 50 (exact)", "coverage", 0.95, cp_coverage, 2000),
    Scenario("interval: scores, n = 10 (t)", "coverage", 0.95, t_coverage_small, 2000),
    Scenario("interval: skewed, n = 30 (t)", "coverage", 0.95, t_coverage_skewed, 2000),
    Scenario("interval: clustered 500 x 10", "coverage", 0.95, clustered_coverage, 400),
    Scenario("interval: one passage of half", "coverage", 0.95, big_passage_coverage, 800),
    Scenario("interval: corpus ratio, n = 500", "coverage", 0.95, ratio_coverage, 1000),
    Scenario("interval: paired difference", "coverage", 0.95, paired_diff_coverage, 600),
    Scenario(
        "interval: paired, 95 % vs 98 %, n = 50", "coverage", 0.95, accurate_pair_coverage, 1000
    ),
    Scenario("interval: best of 5 (leaderboard)", "coverage", 0.95, best_of_k_coverage, 1000),
    Scenario("power: +2 points, 10k paired", "power", 0.90, paired_power_2_points, 100, True),
    Scenario("power: a gap of the MDE", "power", 0.80, mde_power, 600),
    Scenario("power: lucky seed +5 of 6", "power", 0.80, lucky_power, 400, True),
]
