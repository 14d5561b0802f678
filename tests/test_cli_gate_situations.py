"""The gate and the leaderboard in situations an audit planted after issue 27: runs without a
config, reruns of one seed, a seed that collapsed, a cluster column only one run logged, a
column asked for that is not there, and rows picked as the best of several runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import warehouse
from tests.helpers import run_main
from warehouse.query import stats
from warehouse.query.gate import WORSE


@pytest.fixture(autouse=True)
def outside_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs recorded outside any git tree: the setups do not depend on this checkout's state."""
    monkeypatch.chdir(tmp_path)


IDS = [str(i) for i in range(1000)]


def record(
    experiment: str,
    correct: np.ndarray,
    config: dict[str, Any] | None = None,
    extra: dict[str, list[Any]] | None = None,
    cluster: str | None = None,
) -> str:
    rows = [{"sample_id": i, "correct": bool(c)} for i, c in zip(IDS, correct, strict=False)]
    for name, values in (extra or {}).items():
        for row, value in zip(rows, values, strict=True):
            row[name] = value
    with warehouse.start_run(experiment, config=config) as run:
        run.log_samples("val", rows, cluster=cluster)
        run.log_metrics("val", {"acc": float(np.mean(correct))})
    return run.run_id


def fewer(correct: np.ndarray, broken: int) -> np.ndarray:
    worse = correct.copy()
    worse[np.flatnonzero(worse)[:broken]] = False
    return worse


BASE = np.random.default_rng(1).random(1000) < 0.85


def test_runs_recorded_without_a_config_are_not_seeds_of_one_setup(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two config-less runs of one experiment were "seeds of one setup", so a drop of 8
    points passed the gate (exit 0): every config-less run was the same setup."""
    ref = record("exp", BASE)
    run = record("exp", fewer(BASE, 80))
    code, out, _ = run_main(["check", run, "--against", ref], monkeypatch, capsys)
    assert code == WORSE, out
    assert out.startswith("worse: correct -0.08")
    assert "seeds of one setup" not in out


def test_a_rerun_of_one_config_and_seed_is_judged_on_its_samples(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same config and the same seed, run again (data or code outside the config
    changed): not two seeds, so its samples decide."""
    config = {"lr": 0.1, "seed": 3}
    ref = record("exp", BASE, config)
    run = record("exp", fewer(BASE, 80), config)
    code, out, _ = run_main(["check", run, "--against", ref], monkeypatch, capsys)
    assert code == WORSE, out
    assert "seeds of one setup" not in out


def test_a_seed_far_below_its_setups_other_seeds_fails(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Seeds of one setup: with two or more other seeds, the run's seed is judged against
    them (a t prediction bound), so a seed that collapsed fails, and an ordinary one passes."""
    rng = np.random.default_rng(2)
    ref = record("exp", BASE, {"lr": 0.1, "seed": 0})
    for seed, broken in ((1, 10), (2, 5), (3, 15)):
        record("exp", fewer(BASE, broken + int(rng.integers(0, 3))), {"lr": 0.1, "seed": seed})
    collapsed = record("exp", fewer(BASE, 200), {"lr": 0.1, "seed": 4})
    code, out, _ = run_main(["check", collapsed, "--against", ref], monkeypatch, capsys)
    assert code == WORSE, out
    assert "is this seed unusually bad?" in out
    ordinary = record("exp", fewer(BASE, 12), {"lr": 0.1, "seed": 5})
    code, out, _ = run_main(["check", ordinary, "--against", ref], monkeypatch, capsys)
    assert code == 0, out
    assert "is this seed unusually bad?" in out


def test_a_cluster_column_logged_by_one_run_clusters_the_paired_test(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run declared its passages, the reference logged none: the samples are the same,
    so is their passage. The gate exited 2 ("no sample column 'passage'")."""
    passage = [int(i) // 10 for i in IDS]
    ref = record("ref", BASE, {"m": "ref"})
    run = record("run", fewer(BASE, 30), {"m": "run"}, {"passage": passage}, cluster="passage")
    code, out, _ = run_main(["check", run, "--against", ref], monkeypatch, capsys)
    assert code in (0, WORSE), out
    assert "clustered-t over 1,000 shared samples in 100 clusters" in out
    expected = stats.paired(BASE.astype(float), fewer(BASE, 30).astype(float), clusters=passage)
    assert expected is not None
    assert f"p = {expected.p:.3g}" in out


def test_a_column_asked_for_that_the_runs_lack_is_a_usage_error(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--column label`` (text) was answered "inconclusive" (6), as if the data could not
    tell; the user named a column that is not a numeric one: exit 2, with the reason."""
    labels = ["ab"[int(i) % 2] for i in IDS]
    ref = record("ref", BASE, {"m": "ref"}, {"label": labels})
    run = record("run", BASE, {"m": "run"}, {"label": labels})
    code, _, err = run_main(["check", run, "--against", ref, "--column", "label"],
                            monkeypatch, capsys)  # fmt: skip
    assert code == 2, err
    assert "label" in err


def test_the_leaderboard_tests_a_lead_picked_from_several_runs_as_a_pick(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The top row is its experiment's best of 3 runs on these samples: its lead over the
    next row is Bonferroni-corrected for the pick (p times 3, the interval at 1 - 0.05/3)."""
    rng = np.random.default_rng(3)
    runs = [BASE ^ (rng.random(1000) < 0.05) for _ in range(3)]
    for correct in runs:
        record("many", correct, {"m": "many"})
    other = fewer(BASE, 100)
    record("one", other, {"m": "one"})
    code, out, err = run_main(["query", "leaderboard", "-f", "json"], monkeypatch, capsys)
    assert code == 0, err
    top, second = json.loads(out)
    assert (top["experiment"], top["run_count"], second["experiment"]) == ("many", 3, "one")
    best = max(runs, key=lambda c: c.mean())
    plain = stats.paired(best.astype(float), other.astype(float))
    assert plain is not None
    assert top["vs_next_p"] == pytest.approx(min(1.0, 3 * plain.p))
    assert (top["vs_next_ci_low"], top["vs_next_ci_high"]) == pytest.approx(
        plain.bounds(1 - 0.05 / 3)
    )
    assert top["vs_next_mde"] == pytest.approx(plain.mde(0.05 / 3))


def test_the_leaderboard_clusters_a_comparison_when_the_next_run_declared_clusters(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the next row's run declared its passages: the comparison was tested as if the
    questions were independent (its clusters were read from the upper row only)."""
    passage = [int(i) // 10 for i in IDS]
    record("top", BASE, {"m": "top"})
    record("next", fewer(BASE, 30), {"m": "next"}, {"passage": passage}, cluster="passage")
    code, out, err = run_main(["query", "leaderboard", "-f", "json"], monkeypatch, capsys)
    assert code == 0, err
    top = json.loads(out)[0]
    expected = stats.paired(BASE.astype(float), fewer(BASE, 30).astype(float), clusters=passage)
    assert expected is not None
    assert top["vs_next_p"] == pytest.approx(expected.p)


def test_by_group_tests_a_lead_picked_from_several_setups_as_a_pick(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--by-group``: the top row is its experiment's best of 3 configurations (2 seeds
    each); Welch's test of its lead over the next row is corrected for that pick."""
    scores = {0.1: (0, 6), 0.2: (30, 34), 0.3: (20, 25)}  # lr -> samples broken per seed
    for lr, broken in scores.items():
        for seed, k in enumerate(broken):
            record("sweep", fewer(BASE, k), {"lr": lr, "seed": seed})
    for seed, k in enumerate((40, 49)):
        record("single", fewer(BASE, k), {"lr": 0.1, "seed": seed})
    code, out, err = run_main(["query", "leaderboard", "--by-group", "-f", "json"],
                              monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    top, second = json.loads(out)
    assert (top["experiment"], second["experiment"]) == ("sweep", "single")
    means = [np.mean([fewer(BASE, k).mean() for k in ks]) for ks in ((0, 6), (40, 49))]
    assert top["mean"] == pytest.approx(means[0])
    plain = stats.welch(
        np.array([fewer(BASE, k).mean() for k in (0, 6)]),
        np.array([fewer(BASE, k).mean() for k in (40, 49)]),
    )
    assert plain is not None
    assert top["vs_next_p"] == pytest.approx(min(1.0, 3 * plain.p))
    assert top["vs_next_mde"] == pytest.approx(plain.mde(0.05 / 3))


def test_a_diff_of_a_best_run_is_tested_as_a_pick(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``query diff best:many RUN``: ``best:many`` is the best of 3 runs on these samples,
    so the summary's p is corrected for that pick, and says so; a named pair is not."""
    rng = np.random.default_rng(4)
    runs = [BASE ^ (rng.random(1000) < 0.05) for _ in range(3)]
    for correct in runs:
        record("many", correct, {"m": "many"})
    other = fewer(BASE, 100)
    named = record("one", other, {"m": "one"})
    best = max(runs, key=lambda c: c.mean())
    plain = stats.paired(other.astype(float), best.astype(float))
    assert plain is not None
    code, _, err = run_main(["query", "diff", named, "best:many"], monkeypatch, capsys)
    assert code == 0, err
    assert f"p = {min(1.0, 3 * plain.p):.3g}" in err
    assert "tested as a pick of 3" in err
    best_id = json.loads(
        run_main(["query", "best", "-q", "experiment:many", "-f", "json"], monkeypatch, capsys)[1]
    )[0]["run_id"]
    code, _, err = run_main(["query", "diff", named, best_id], monkeypatch, capsys)
    assert f"p = {plain.p:.3g}" in err
    assert "pick" not in err


def test_a_percentage_beside_a_fraction_is_refused_for_what_it_is(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run declared ``100*mean(correct)`` and logged 69, the other logged 0.85: the gate
    blamed the declaring run ("a percentage? declare ..."), which had declared it. Their
    scores are on two scales: inconclusive, saying so; ``--column`` compares the samples."""
    ref = record("ref", BASE, {"m": "ref"})
    with warehouse.start_run("run", config={"m": "run"}) as run:
        worse = fewer(BASE, 80)
        run.log_samples(
            "val",
            [{"sample_id": i, "correct": bool(c)} for i, c in zip(IDS, worse, strict=True)],
            metric_columns={"acc": "100*mean(correct)"},
        )
        run.log_metrics("val", {"acc": 100 * float(worse.mean())})
    code, out, _ = run_main(["check", run.run_id, "--against", ref], monkeypatch, capsys)
    assert code == 6, out
    assert "compute acc differently" in out
    assert "100*mean(correct)" in out
    args = ["check", run.run_id, "--against", ref, "--column", "correct"]
    code, out, _ = run_main(args, monkeypatch, capsys)
    assert code == WORSE, out
