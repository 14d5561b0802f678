"""A run stores a metric's 95 % interval only when its samples describe the logged score."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats as scipy_stats

import warehouse
from tests.query import reference
from warehouse.query import stats
from warehouse.query.distributions import clopper_pearson
from warehouse.stores.local import LocalStore


def stored(home: Path, run_id: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((home / "runs" / f"{run_id}.json").read_text())
    return data


def cis_of(home: Path, run_id: str, split: str = "val") -> dict[str, dict[str, object]]:
    found: dict[str, dict[str, object]] = stored(home, run_id)["metrics_ci"][split]  # type: ignore[index]
    return found


def stored_column(home: Path, run_id: str, split: str, column: str) -> np.ndarray:
    """The column as the store holds it, read back independently of the recorder."""
    with LocalStore(home) as store:
        table = pa.Table.from_batches(list(store.sample_batches(run_id, split, [column])))
    values: np.ndarray = table.column(column).to_numpy(zero_copy_only=False).astype(float)
    return values


def test_accuracy_gets_the_exact_interval_of_its_correct_column(home: Path) -> None:
    rng = np.random.default_rng(0)
    correct = rng.random(2000) < 0.93
    with warehouse.start_run("ci") as run:
        run.log_samples("val", pa.table({"sample_id": range(2000), "correct": correct}))
        run.log_metrics("val", {"acc": float(correct.mean())})
    values = stored_column(home, run.run_id, "val", "correct")
    low, high = clopper_pearson(int(values.sum()), values.size)
    assert cis_of(home, run.run_id)["acc"] == {
        "low": low,
        "high": high,
        "n": 2000,
        "method": "clopper-pearson",
        "column": "correct",
        "aggregate": "mean(correct)",
    }


def test_a_continuous_metric_gets_students_t_interval_of_its_column(home: Path) -> None:
    rng = np.random.default_rng(1)
    iou = rng.normal(0.6, 0.1, 800)
    rows = [{"sample_id": i, "iou": float(v)} for i, v in enumerate(iou)]
    with warehouse.start_run("ci") as run:
        run.log_metrics("val", {"iou": float(iou.mean())})
        run.log_samples("val", rows)
    ci = cis_of(home, run.run_id)["iou"]
    values = stored_column(home, run.run_id, "val", "iou")
    expected = scipy_stats.t.interval(0.95, values.size - 1, values.mean(), scipy_stats.sem(values))
    assert (ci["low"], ci["high"]) == pytest.approx(expected, rel=1e-12)
    assert ci["method"] == "student-t"


def test_metric_columns_say_which_column_a_metric_is_the_mean_of(home: Path) -> None:
    with warehouse.start_run("ci") as run:
        run.log_samples(
            "val",
            [{"sample_id": i, "hit": i % 4 != 0, "correct": True} for i in range(100)],
            metric_columns={"recall": "hit"},
        )
        run.log_metrics("val", {"recall": 0.75, "acc": 1.0, "loss": 0.3})
    cis = cis_of(home, run.run_id)
    assert cis["recall"]["column"] == "hit"
    assert (cis["recall"]["low"], cis["recall"]["high"]) == pytest.approx(clopper_pearson(75, 100))
    assert cis["acc"]["column"] == "correct"  # accuracy-like names default to `correct`
    assert "loss" not in cis  # no column the rule can find: no interval rather than a guess


def corpus_rows(n: int, seed: int) -> tuple[list[dict[str, float]], float, float]:
    """Sentences with ``matches`` of ``length``: long sentences score better, so the corpus
    ratio sum(matches)/sum(length) is far above the mean of the per-sentence ratios."""
    rng = np.random.default_rng(seed)
    length = rng.integers(2, 60, n).astype(float)
    matches = np.floor(length * np.clip(length / 70 + rng.normal(0, 0.1, n), 0, 1))
    rows = [
        {"sample_id": i, "matches": m, "length": x, "bleu": m / x}
        for i, (m, x) in enumerate(zip(matches, length, strict=True))
    ]
    return rows, float(matches.sum() / length.sum()), float((matches / length).mean())


def test_a_corpus_metric_gets_no_interval_of_its_per_sample_column_without_a_declaration(
    home: Path,
) -> None:
    """Issue 27, item 1: corpus BLEU 0.641 was drawn as [0.483, 0.499], the interval of the
    per-sentence column's mean."""
    rows, corpus, per_sample = corpus_rows(1000, 2)
    assert corpus - per_sample > 0.05
    with warehouse.start_run("mt") as run:
        run.log_samples("val", rows)
        run.log_metrics("val", {"bleu": corpus})
    ci = cis_of(home, run.run_id)["bleu"]
    assert "low" not in ci
    assert "high" not in ci
    reason = str(ci["reason"])
    assert f"{corpus:.6g}" in reason
    assert "mean(bleu)" in reason
    assert "sum(matches)/sum(length)" in reason  # what to declare


def test_a_declared_corpus_metric_gets_the_interval_of_the_ratio_itself(home: Path) -> None:
    rows, corpus, _ = corpus_rows(1000, 3)
    with warehouse.start_run("mt") as run:
        run.log_samples("val", rows, metric_columns={"bleu": "sum(matches)/sum(length)"})
        run.log_metrics("val", {"bleu": corpus})
    ci = cis_of(home, run.run_id)["bleu"]
    assert ci["aggregate"] == "sum(matches)/sum(length)"
    assert ci["method"] == "linearized-t"
    assert float(ci["low"]) < corpus < float(ci["high"])  # type: ignore[arg-type]
    # the ratio is weighted least squares of matches/length on a constant, weights length:
    # statsmodels' HC2 standard error is the linearized CR2 one (one unit per sentence)
    import statsmodels.api as sm

    m = np.array([r["matches"] for r in rows], dtype=float)
    x = np.array([r["length"] for r in rows], dtype=float)
    fit = sm.WLS(m / x, np.ones_like(x), weights=x).fit(cov_type="HC2")
    assert float(fit.params[0]) == pytest.approx(corpus, rel=1e-12)
    df = reference.linearized_df(m - corpus * x, x / x.sum())
    half = scipy_stats.t.ppf(0.975, df) * float(fit.bse[0])
    assert (ci["low"], ci["high"]) == pytest.approx((corpus - half, corpus + half), rel=1e-9)


def test_a_percentage_is_refused_with_the_declaration_that_fixes_it(home: Path) -> None:
    """Issue 27, item 1: acc logged as 85.4 with a 0/1 column was shown as [0.841, 0.866]."""
    correct = [i % 1000 < 854 for i in range(1000)]
    with warehouse.start_run("pct") as run:
        run.log_samples("val", [{"sample_id": i, "correct": c} for i, c in enumerate(correct)])
        run.log_metrics("val", {"acc": 85.4})
    ci = cis_of(home, run.run_id)["acc"]
    assert "low" not in ci
    assert "100*mean(correct)" in str(ci["reason"])
    with warehouse.start_run("pct") as run:
        run.log_samples(
            "val",
            [{"sample_id": i, "correct": c} for i, c in enumerate(correct)],
            metric_columns={"acc": "100*mean(correct)"},
        )
        run.log_metrics("val", {"acc": 85.4})
    ci = cis_of(home, run.run_id)["acc"]
    low, high = clopper_pearson(854, 1000)
    assert (ci["low"], ci["high"]) == pytest.approx((100 * low, 100 * high))


def test_a_score_of_the_full_set_with_samples_of_a_subset_gets_no_interval(home: Path) -> None:
    """Issue 27, item 1: 0.91 on the full set, samples of a 2k subset (mean 0.559)."""
    subset = [i % 100 < 56 for i in range(2000)]
    with warehouse.start_run("subset") as run:
        run.log_samples("val", [{"sample_id": i, "correct": c} for i, c in enumerate(subset)])
        run.log_metrics("val", {"acc": 0.91})
    ci = cis_of(home, run.run_id)["acc"]
    assert "low" not in ci
    assert "0.91" in str(ci["reason"])
    assert "2,000" in str(ci["reason"])


def test_a_rounded_score_still_gets_its_interval(home: Path) -> None:
    """The tolerance: a tenth of the interval's half-width, so rounding to 4 digits passes."""
    correct = [i % 7 != 0 for i in range(700)]  # 0.857142...
    with warehouse.start_run("rounded") as run:
        run.log_samples("val", [{"sample_id": i, "correct": c} for i, c in enumerate(correct)])
        run.log_metrics("val", {"acc": 0.8571})
    assert "low" in cis_of(home, run.run_id)["acc"]


@pytest.mark.parametrize(
    ("logged", "declared", "kept"),
    [
        pytest.param(0.854, None, True, id="three-decimals"),
        pytest.param(85.4, "100*mean(correct)", True, id="percent-one-decimal"),
        pytest.param(0.85, None, False, id="rounded-coarser-than-the-interval"),
        pytest.param(85.0, "100*mean(correct)", False, id="whole-percent"),
    ],
)
def test_a_score_rounded_finer_than_its_interval_still_gets_it(
    home: Path, logged: float, declared: str | None, kept: bool
) -> None:
    """0.85432 over 100k samples (half-width 0.0022) logged as 0.854 was refused: a tenth of
    the half-width is 0.00022. A rounding finer than the interval is the same score; one
    coarser than it (0.85, 85 %) may hide another score, so it is still refused."""
    correct = np.arange(100_000) < 85_432
    table = pa.table({"sample_id": np.arange(correct.size), "correct": correct})
    with warehouse.start_run("rounded") as run:
        run.log_samples("val", table, metric_columns={"acc": declared} if declared else None)
        run.log_metrics("val", {"acc": logged})
    ci = cis_of(home, run.run_id)["acc"]
    assert ("low" in ci) is kept, ci
    if kept:
        scale = 100.0 if declared else 1.0
        low, high = clopper_pearson(85_432, 100_000)
        assert (ci["low"], ci["high"]) == pytest.approx((scale * low, scale * high))


def test_large_offsets_do_not_cancel_in_the_streamed_variance(home: Path) -> None:
    """Issue 27, item 7: above 5,000 samples, sum(x^2) - n*mean^2 gave 1e8 ± 1 a width of 0."""
    n = 20_000
    values = 1e8 + np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    table = pa.table({"sample_id": np.arange(n), "latency": values})
    with warehouse.start_run("offset") as run:
        run.log_samples("val", pa.Table.from_batches(table.to_batches(max_chunksize=3_000)))
        run.log_metrics("val", {"latency": float(values.mean())})
    ci = cis_of(home, run.run_id)["latency"]
    half = (float(ci["high"]) - float(ci["low"])) / 2  # type: ignore[arg-type]
    expected = scipy_stats.t.ppf(0.975, n - 1) * values.std(ddof=1) / np.sqrt(n)
    assert half == pytest.approx(expected, rel=1e-6)


def test_a_declared_cluster_widens_the_interval_to_the_clustered_one(home: Path) -> None:
    """500 passages x 10 questions that share their passage's difficulty: the interval
    treats each passage as one unit (statsmodels' cluster-robust mean agrees)."""
    import statsmodels.api as sm

    rng = np.random.default_rng(8)
    passage = np.repeat(np.arange(500), 10)
    p = np.clip(rng.normal(0.7, 0.2, 500), 0, 1)[passage]
    correct = rng.random(passage.size) < p
    rows = pa.table({"sample_id": np.arange(passage.size), "passage": passage, "correct": correct})
    with warehouse.start_run("qa") as run:
        run.log_samples("val", rows, cluster="passage")
        run.log_metrics("val", {"acc": float(correct.mean())})
    ci = cis_of(home, run.run_id)["acc"]
    assert ci["method"] == "clustered-t"
    assert ci["clusters"] == 500
    assert ci["cluster"] == "passage"
    fit = sm.OLS(correct.astype(float), np.ones(passage.size)).fit(
        cov_type="cluster", cov_kwds={"groups": passage}
    )
    se = float(fit.bse[0])
    half = (float(ci["high"]) - float(ci["low"])) / 2  # type: ignore[arg-type]
    # statsmodels' small-sample factor is G/(G-1) * (N-1)/(N-K), with K = 1 here: ours
    assert half / scipy_stats.t.ppf(0.975, 499) == pytest.approx(se, rel=1e-9)
    naive = stats.binomial_interval(int(correct.sum()), int(correct.size))
    assert naive is not None
    assert half > 1.5 * naive.half_width


def test_the_interval_recorded_equals_the_one_from_the_stored_samples(home: Path) -> None:
    """Streamed batch by batch or computed from the stored column: one answer."""
    rng = np.random.default_rng(9)
    values = rng.gamma(2.0, 0.3, 12_345)
    table = pa.table({"sample_id": np.arange(values.size), "err": values})
    with warehouse.start_run("stream") as run:
        run.log_samples("val", pa.Table.from_batches(table.to_batches(max_chunksize=1_000)))
        run.log_metrics("val", {"err": float(values.mean())})
    ci = cis_of(home, run.run_id)["err"]
    again = stats.interval(stored_column(home, run.run_id, "val", "err"))
    assert again is not None
    assert (ci["low"], ci["high"]) == pytest.approx((again.low, again.high), rel=1e-12)
