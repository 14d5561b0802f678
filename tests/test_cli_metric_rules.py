"""The evidence commands answer the question the metric and the data allow, or say they
cannot (issue 27 items 2, 3, 5, 9-11; issue 32 item 7)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import warehouse
from tests.helpers import run_main
from warehouse.query.gate import INCONCLUSIVE


@pytest.fixture(autouse=True)
def outside_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs recorded outside any git tree: the setups do not depend on this checkout's state."""
    monkeypatch.chdir(tmp_path)


def translations(n: int, skill: float, seed: int) -> list[dict[str, float]]:
    """Sentences of varied length. ``skill`` raises the matches of long sentences (which
    dominate the corpus ratio) and lowers those of short ones (which dominate the mean of the
    per-sentence ratios)."""
    rng = np.random.default_rng(seed)
    length = np.where(np.arange(n) % 2 == 0, 40.0, 4.0)
    rate = np.where(length > 10, 0.45 + skill, 0.55 - skill) + rng.normal(0, 0.03, n)
    matches = np.clip(np.round(length * rate), 0, length)
    return [
        {"sample_id": f"s{i}", "matches": m, "length": x, "bleu": m / x}
        for i, (m, x) in enumerate(zip(matches, length, strict=True))
    ]


def record_corpus(experiment: str, rows: list[dict[str, float]], declare: bool) -> str:
    corpus = sum(r["matches"] for r in rows) / sum(r["length"] for r in rows)
    declared = {"bleu": "sum(matches)/sum(length)"} if declare else None
    with warehouse.start_run(experiment) as run:
        run.log_samples("val", rows, metric_columns=declared)
        run.log_metrics("val", {"bleu": corpus})
    return run.run_id


@pytest.mark.parametrize("declare", [False, True], ids=["undeclared", "declared"])
def test_a_corpus_metric_is_never_judged_on_its_per_sample_mean(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], declare: bool
) -> None:
    """Issue 27, item 2: A (corpus 0.64) ranks above B (0.58), while B's per-sentence mean is
    higher; the old gate failed A, the better run, on the per-sentence column."""
    rows_a, rows_b = translations(400, 0.2, 1), translations(400, 0.05, 2)
    a = record_corpus("alpha", rows_a, declare)
    b = record_corpus("beta", rows_b, declare)
    mean = [np.mean([r["bleu"] for r in rows]) for rows in (rows_a, rows_b)]
    assert mean[0] < mean[1]  # the per-sample column ranks them the other way
    args = ["check", a, "--against", b, "--metric", "val.bleu"]
    code, out, _ = run_main(args, monkeypatch, capsys)
    if not declare:
        assert code == INCONCLUSIVE, out
        assert "mean(bleu)" in out
        assert "sum(matches)/sum(length)" in out
    else:
        assert code == 0, out
        assert out.startswith("not significantly worse: sum(matches)/sum(length) +")
        code, out, _ = run_main(["check", b, "--against", a, "--metric", "val.bleu"],
                                monkeypatch, capsys)  # fmt: skip
        assert code == 1, out
        assert "linearized-t" in out  # the ratio itself, not a per-sample mean
    code, out, _ = run_main(["query", "leaderboard", "-m", "val.bleu", "-f", "json"],
                            monkeypatch, capsys)  # fmt: skip
    top, second = json.loads(out)
    assert (top["experiment"], second["experiment"]) == ("alpha", "beta")
    if declare:
        assert top["vs_next_diff"] < 0
        assert top["vs_next_p"] < 0.05
        assert top["ci_low"] < top["best_score"] < top["ci_high"]
    else:
        assert top["vs_next_p"] is None
        assert top["ci_low"] is None
        assert "mean(bleu)" in top["no_evidence"]


def record_acc(experiment: str, correct: list[bool], ids: list[str], seed: int = 0) -> str:
    with warehouse.start_run(experiment, config={"model": experiment, "seed": seed}) as run:
        run.log_samples(
            "val", [{"sample_id": i, "correct": c} for i, c in zip(ids, correct, strict=True)]
        )
        run.log_metrics("val", {"acc": sum(correct) / len(correct)})
    return run.run_id


def test_the_gate_without_shared_sample_ids_tests_unpaired(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27, item 3: 0.7998 against 0.8000 exited 1 with "no per-sample results on both
    runs", although both had them (under other ids)."""
    n = 5000
    ref = record_acc("ref", [i % 5000 < 4000 for i in range(n)], [f"a{i}" for i in range(n)])
    run = record_acc("run", [i % 5000 < 3999 for i in range(n)], [f"b{i}" for i in range(n)])
    code, out, _ = run_main(["check", run, "--against", ref], monkeypatch, capsys)
    assert code == 0, out
    assert "unpaired (too few shared)" in out
    assert "agresti-caffo" in out


def test_the_gate_without_samples_is_inconclusive_never_failed(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, acc in (("ref", 0.8), ("run", 0.7)):
        with warehouse.start_run(name) as r:
            r.log_metrics("val", {"acc": acc})
    code, out, _ = run_main(["check", "best:run", "--against", "best:ref"], monkeypatch, capsys)
    assert code == INCONCLUSIVE, out
    assert out.startswith("inconclusive: no per-sample results")


def test_a_best_of_k_reference_is_tested_at_a_corrected_level(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27, item 9: `check --against best` of 20 equal runs failed 17.7 %: the best of
    K is optimistic. The line says so and the level is 0.05/K."""
    ids = [str(i) for i in range(300)]
    rng = np.random.default_rng(5)
    runs = [record_acc(f"exp{k}", list(rng.random(300) < 0.8), ids, seed=k) for k in range(5)]
    code, out, _ = run_main(["check", runs[0]], monkeypatch, capsys)
    assert "the reference is the best of 4 runs, so tested at 0.05/4" in out
    assert code in (0, 1)


def test_two_seeds_of_one_setup_are_never_a_regression(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27, item 10: two seeds of one config were "significantly different" 34.5 % of the
    time; true of the two models, but not of the setup."""
    ids = [str(i) for i in range(2000)]
    first = record_acc("exp", [i % 10 < 9 for i in range(2000)], ids, seed=1)
    second = record_acc("exp", [i % 10 < 8 for i in range(2000)], ids, seed=2)
    code, out, _ = run_main(["check", second, "--against", first], monkeypatch, capsys)
    assert code == 0, out
    assert "seeds of one setup" in out
    assert "the runs themselves: worse" in out
    code, out, _ = run_main(["check", second, "--against", first, "--no-seeds"],
                            monkeypatch, capsys)  # fmt: skip
    assert code == 1, out


def test_the_gate_compares_setups_across_their_seeds(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [str(i) for i in range(500)]
    rng = np.random.default_rng(6)
    refs = [record_acc("ref", list(rng.random(500) < 0.90), ids, seed=s) for s in range(4)]
    mine = [record_acc("new", list(rng.random(500) < 0.80), ids, seed=s) for s in range(3)]
    code, out, _ = run_main(["check", mine[0], "--against", refs[0]], monkeypatch, capsys)
    assert code == 1, out
    assert out.startswith("worse: setup val.acc -0.09")
    assert "welch over 3 against 4 seeds" in out


def test_replicates_count_distinct_seeds_not_runs(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32, item 7: a seed recorded twice is one seed."""
    ids = [str(i) for i in range(50)]
    for seed in (1, 1, 2):
        record_acc("exp", [int(i) % 10 < 8 + (seed == 2) for i in ids], ids, seed=seed)
    code, out, err = run_main(["query", "replicates", "-f", "json"], monkeypatch, capsys)
    assert code == 0, err
    (group,) = json.loads(out)
    assert (group["n_seeds"], group["n_runs"]) == (2, 3)
    assert group["mean"] == pytest.approx((0.8 + 0.9) / 2)  # one value per seed
    assert group["lucky_seed"] is None
    assert "fewer than 3 seeds" in err


def test_by_group_never_ranks_one_seed_above_six(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27, item 5: a 1-seed group at 0.95 ranked above a 6-seed group at 0.90."""
    ids = [str(i) for i in range(100)]
    record_acc("lucky", [int(i) < 95 for i in ids], ids, seed=0)
    for seed in range(6):
        record_acc("steady", [int(i) < 90 + seed % 2 for i in ids], ids, seed=seed)
    code, out, err = run_main(["query", "leaderboard", "--by-group", "-f", "json"],
                              monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["experiment"], r["rank"], r["single_seed"]) for r in rows] == [
        ("steady", 1, False),
        ("lucky", None, True),
    ]
    code, out, err = run_main(["query", "over-time", "--by-group", "-f", "json"],
                              monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    points = json.loads(out)
    assert [(p["experiment"], p["is_new_best"]) for p in points] == [
        ("lucky", False),
        ("steady", True),
    ]
    assert points[-1]["best_so_far"] == pytest.approx(0.905)


def test_the_leaderboard_prints_the_smallest_detectable_gap_beside_its_mark(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27, item 11: `≈` often means "too few samples to tell"."""
    ids = [str(i) for i in range(200)]
    record_acc("alpha", [int(i) < 180 for i in ids], ids)
    record_acc("beta", [int(i) < 178 for i in ids], ids)
    monkeypatch.setenv("COLUMNS", "200")
    code, out, err = run_main(["query", "leaderboard"], monkeypatch, capsys)
    assert code == 0, err
    alpha = next(line for line in out.splitlines() if " alpha " in f" {line} ")
    assert "≈ ±0.0" in alpha
    code, out, _ = run_main(["query", "leaderboard", "-f", "json"], monkeypatch, capsys)
    top = json.loads(out)[0]
    assert top["vs_next_mde"] > abs(top["vs_next_diff"])
    assert f"±{top['vs_next_mde']:.2g}" in alpha


README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")


def test_the_readmes_declaration_example_runs_and_records_the_ratios_interval(
    home: Path,
) -> None:
    block = next(b for b in README.split("```python")[1:] if "metric_columns=" in b)
    namespace: dict[str, object] = {}
    exec(compile(block.split("```", 1)[0], "README.md", "exec"), namespace)
    run = namespace["run"]
    ci = run.record.metrics_ci["val"]["bleu"]  # type: ignore[attr-defined]
    assert ci["aggregate"] == "sum(matches)/sum(length)"
    assert ci["method"] == "clustered-t"
    assert ci["clusters"] == 2


def test_the_sign_of_vs_next_diff_is_the_one_the_readme_states(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32, item 7: ``vs_next_diff`` is the next row's score minus this row's, for a
    higher-is-better metric and for a loss alike."""
    assert "`vs_next_diff` is **the next row's score minus this row's**" in README
    code, out, _ = run_main(["query", "leaderboard", "--help"], monkeypatch, capsys)
    assert "vs_next_diff: the next row's score minus this row's" in " ".join(out.split())
    ids = [str(i) for i in range(300)]
    for name, right in (("good", 290), ("bad", 240)):
        with warehouse.start_run(name) as run:
            rows = [{"sample_id": i, "correct": int(i) < right, "err": float(int(i) >= right)}
                    for i in ids]  # fmt: skip
            run.log_samples("val", rows)
            run.log_metrics("val", {"acc": right / 300, "err": 1 - right / 300})
    for metric, sign in (("val.acc", -1), ("val.err", 1)):
        code, out, err = run_main(["query", "leaderboard", "-m", metric, "-f", "json"],
                                  monkeypatch, capsys)  # fmt: skip
        assert code == 0, err
        top, second = json.loads(out)
        assert top["experiment"] == "good"
        assert top["vs_next_diff"] == pytest.approx(second["best_score"] - top["best_score"])
        assert sign * top["vs_next_diff"] > 0


def test_clustered_samples_get_no_slice_interval_that_assumes_independence(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {"sample_id": i, "passage": i // 10, "label": "ab"[i % 2], "correct": i % 3 != 0}
        for i in range(300)
    ]
    with warehouse.start_run("qa") as run:
        run.log_samples("val", rows, cluster="passage")
        run.log_metrics("val", {"acc": sum(r["correct"] for r in rows) / 300})
    code, out, err = run_main(["query", "slices", "--by", "label", "-f", "json"],
                              monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    found = json.loads(out)
    assert [r["n"] for r in found] == [150, 150]
    assert all(r["ci_low"] is None and r["ci_high"] is None for r in found)


def test_a_best_of_k_row_carries_an_interval_widened_for_the_pick(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27, item 9: a row is the best of its experiment's runs; its recorded interval
    stays as Kibana draws it, and best_of_low/high widen it to level 1 - 0.05/K."""
    from warehouse.query.distributions import clopper_pearson

    ids = [str(i) for i in range(400)]
    for right in (300, 320, 310, 305):
        record_acc("exp", [int(i) < right for i in ids], ids, seed=right)
    code, out, err = run_main(["query", "leaderboard", "-f", "json"], monkeypatch, capsys)
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["run_count"] == 4
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(clopper_pearson(320, 400))
    widened = clopper_pearson(320, 400, level=1 - 0.05 / 4)
    assert (row["best_of_low"], row["best_of_high"]) == pytest.approx(widened)
    assert row["best_of_low"] < row["ci_low"]
