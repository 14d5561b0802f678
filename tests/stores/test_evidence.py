"""Diffs, the regression gate and the leaderboard's evidence, on every store, checked against
plain Python over the same samples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest

from warehouse.models import Run, RunStatus, resolve_metric
from warehouse.query import evidence, gate, leaderboard_evidence, setups
from warehouse.stores.base import Store

METRIC = resolve_metric("val.acc")


def mcnemar(fixed: int, broke: int) -> float:
    """The p-value of the paired 0/1 test: the larger of McNemar's exact and asymptotic
    p-values (the exact conditional test joined with Tango's score test, which is McNemar's
    asymptotic one at 0), computed by statsmodels."""
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    table = [[0, broke], [fixed, 0]]
    exact = sm_mcnemar(table, exact=True).pvalue
    asymptotic = sm_mcnemar(table, exact=False, correction=False).pvalue if fixed + broke else 1.0
    return float(max(exact, asymptotic))


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def record(store: Store, run_id: str, experiment: str, correct: dict[str, bool], day: int) -> None:
    acc = sum(correct.values()) / len(correct)
    doc = Run(
        run_id=run_id,
        experiment=experiment,
        status=RunStatus.COMPLETED,
        started_at=T0 + timedelta(days=day),
        ended_at=T0 + timedelta(days=day, hours=1),
        metrics={"val": {"acc": acc}},
        sample_counts={"val": len(correct)},
    ).to_doc()
    store.write_runs([doc])
    ids = list(correct)
    batch = pa.record_batch(
        {
            "sample_id": ids,
            "correct": [correct[i] for i in ids],
            "output_uri": [f"file:///out/{run_id}/{i}.png" for i in ids],
        }
    )
    store.write_samples(run_id, experiment, "val", [batch])


@pytest.fixture
def planted(store: Store) -> tuple[dict[str, bool], dict[str, bool]]:
    """Run b fixes 30 of run a's errors and breaks 5 of its right answers, over 1,000 samples;
    each run also has 10 samples the other lacks."""
    rng = np.random.default_rng(7)
    shared = [f"s{i:04d}" for i in range(1000)]
    a = {s: bool(rng.random() < 0.85) for s in shared}
    b = dict(a)
    wrong = [s for s in shared if not a[s]]
    right = [s for s in shared if a[s]]
    for s in wrong[:30]:
        b[s] = True
    for s in right[:5]:
        b[s] = False
    a.update({f"a-only-{i}": True for i in range(10)})
    b.update({f"b-only-{i}": False for i in range(10)})
    record(store, "run-a", "baseline", a, 1)
    record(store, "run-b", "candidate", b, 2)
    return a, b


def test_diff_lists_exactly_the_flipped_samples(
    store: Store, planted: tuple[dict[str, bool], dict[str, bool]]
) -> None:
    a, b = planted
    got = evidence.diff(
        store,
        evidence.resolve_run(store, "run-a", METRIC),
        evidence.resolve_run(store, "run-b", METRIC),
        metric=METRIC,
    )
    shared = sorted(set(a) & set(b))
    expected = {s: ("fixed" if b[s] else "broke") for s in shared if a[s] != b[s]}
    assert {r["sample_id"]: r["change"] for r in got.rows} == expected
    assert got.counts() == {"fixed": 30, "broke": 5, "changed": 0, "same": 965}
    assert (got.only_a, got.only_b) == (10, 10)
    row = next(r for r in got.rows if r["change"] == "fixed")
    assert row["a_output_uri"] == f"file:///out/run-a/{row['sample_id']}.png"
    assert row["b_output_uri"] == f"file:///out/run-b/{row['sample_id']}.png"
    c = got.comparison
    assert c is not None
    assert (c.fixed, c.broke, c.n) == (30, 5, 1000)
    assert c.diff == pytest.approx(25 / 1000)
    assert c.p == pytest.approx(mcnemar(30, 5))
    assert c.significant
    assert "fixed 30 · broke 5 · same 965" in got.summary()


def test_the_same_run_twice_differs_in_nothing(
    store: Store, planted: tuple[dict[str, bool], dict[str, bool]]
) -> None:
    run = evidence.resolve_run(store, "run-a", METRIC)
    got = evidence.diff(store, run, run, metric=METRIC)
    assert got.rows == []
    assert got.comparison is not None
    assert got.comparison.p == 1.0


def test_best_and_best_of_an_experiment_name_runs(
    store: Store, planted: tuple[dict[str, bool], dict[str, bool]]
) -> None:
    assert evidence.resolve_run(store, "best", METRIC)["run_id"] == "run-b"
    assert evidence.resolve_run(store, "best:baseline", METRIC)["run_id"] == "run-a"


def test_the_gate_fails_a_worse_run_and_passes_a_better_one(
    store: Store, planted: tuple[dict[str, bool], dict[str, bool]]
) -> None:
    a = evidence.resolve_run(store, "run-a", METRIC)
    b = evidence.resolve_run(store, "run-b", METRIC)
    worse = gate.check(store, a, b, metric=METRIC)
    assert worse.code == 1
    assert worse.line.startswith("worse: correct -0.025")
    assert len(worse.broken) == 30  # the samples b got right and a does not
    better = gate.check(store, b, a, metric=METRIC)
    assert better.code == 0
    lenient = gate.check(store, a, b, metric=METRIC, margin=0.05)
    assert lenient.code == 0  # worse, but not by more than 5 points


def test_the_leaderboard_carries_intervals_and_a_paired_gap(
    store: Store, planted: tuple[dict[str, bool], dict[str, bool]]
) -> None:
    from warehouse.query import views

    rows = views.leaderboard(store, "val.acc", evidence=True)
    assert [r["experiment"] for r in rows] == ["candidate", "baseline"]
    top, second = rows
    assert top["vs_next_diff"] == pytest.approx(-25 / 1000)  # the next one is 2.5 points worse
    assert top["vs_next_p"] == pytest.approx(mcnemar(30, 5))
    assert second["vs_next_diff"] is None  # nothing after the last row
    assert set(leaderboard_evidence.LEADERBOARD_EVIDENCE) <= set(top)


def _with_labels(
    store: Store, run_id: str, correct: dict[str, bool], labels: dict[str, str]
) -> None:
    acc = sum(correct.values()) / len(correct)
    store.write_runs(
        [
            Run(
                run_id=run_id,
                experiment=run_id,
                status=RunStatus.COMPLETED,
                ended_at=T0,
                metrics={"val": {"acc": acc}},
                sample_counts={"val": len(correct)},
            ).to_doc()
        ]
    )
    ids = list(correct)
    batch = pa.record_batch(
        {
            "sample_id": ids,
            "correct": [correct[i] for i in ids],
            "label": [labels[i] for i in ids],
            "size": [float(i[1:]) for i in ids],
        }
    )
    store.write_samples(run_id, run_id, "val", [batch])


def test_the_gate_fails_on_a_slice_the_overall_score_hides(store: Store) -> None:
    """The candidate breaks 40 of label 7's 200 samples and fixes 40 elsewhere: the overall
    score does not move (p = 1), label 7 is significantly worse, and only with --slice is the
    gate red; the slice figures equal plain Python over the same samples."""
    ids = [f"s{i:04d}" for i in range(2000)]
    labels = {s: str(i % 10) for i, s in enumerate(ids)}
    ref = {s: i % 4 != 0 for i, s in enumerate(ids)}  # 75 % right everywhere
    cand = dict(ref)
    sevens_right = [s for s in ids if labels[s] == "7" and ref[s]]
    others_wrong = [s for s in ids if labels[s] != "7" and not ref[s]]
    for s in sevens_right[:40]:
        cand[s] = False
    for s in others_wrong[:40]:
        cand[s] = True
    _with_labels(store, "ref", ref, labels)
    _with_labels(store, "cand", cand, labels)
    run = evidence.resolve_run(store, "cand", METRIC)
    reference = evidence.resolve_run(store, "ref", METRIC)

    overall = gate.check(store, run, reference, metric=METRIC)
    assert overall.code == 0
    assert overall.comparison is not None
    assert overall.comparison.p == pytest.approx(1.0)

    gated = gate.check(store, run, reference, metric=METRIC, slice_by="label", min_n=100)
    assert gated.code == 1
    assert "label=7" in gated.line
    (worst, *rest) = gate.slice_checks(store, run, reference, METRIC, "label", min_n=100)
    sevens = [s for s in ids if labels[s] == "7"]
    expected = np.mean([cand[s] for s in sevens]) - np.mean([ref[s] for s in sevens])
    assert worst.value == "7"
    assert worst.comparison.diff == pytest.approx(expected)
    assert worst.comparison.n == len(sevens)
    assert worst.comparison.p == pytest.approx(mcnemar(0, 40))
    assert not any(s.worse(0.0) for s in rest)  # 4-5 fixes per other label: no evidence

    tiny = gate.check(store, run, reference, metric=METRIC, slice_by="label", min_n=500)
    assert tiny.code == 0  # every slice is below --min-n: nothing to judge per slice

    binned = gate.slice_checks(store, run, reference, METRIC, "size:bins=4", min_n=100)
    assert sum(s.comparison.n for s in binned) == len(ids)


def test_the_leaderboard_reads_each_best_run_once_and_holds_two_at_most(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory of a leaderboard's evidence stays flat in its length: a run's samples are
    read once and let go after its second comparison (issue 16: memory at 100k runs)."""
    from warehouse.query import views

    rng = np.random.default_rng(3)
    ids = [f"s{i}" for i in range(200)]
    for n in range(6):
        correct = {s: bool(rng.random() < 0.5 + n * 0.05) for s in ids}
        record(store, f"run-{n}", f"exp-{n}", correct, n)
    reads: list[str] = []
    held: list[int] = []
    real_table, real_compare = evidence.sample_table, leaderboard_evidence._compare

    def counting_table(st: Store, run_id: str, *args: object) -> object:
        reads.append(run_id)
        return real_table(st, run_id, *args)  # type: ignore[arg-type]

    def watching(*args: object) -> object:
        result = real_compare(*args)  # type: ignore[arg-type]
        held.append(len(args[-1]))  # type: ignore[arg-type]
        return result

    monkeypatch.setattr(evidence, "sample_table", counting_table)
    monkeypatch.setattr(leaderboard_evidence, "_compare", watching)
    rows = views.leaderboard(store, "val.acc", evidence=True)
    assert len(rows) == 6
    assert sorted(reads) == sorted(f"run-{n}" for n in range(6))  # each once
    assert len(held) == 5
    assert max(held) <= 2


def test_the_gate_counts_the_runs_a_best_reference_was_picked_from(
    store: Store, planted: tuple[dict[str, bool], dict[str, bool]]
) -> None:
    """``best`` is the best of the scored runs in scope (the judged one left out); a named run
    was picked from nothing."""
    record(store, "run-c", "baseline", {"s0000": True}, 3)
    assert gate.selection_size(store, "best", METRIC, exclude="run-a") == 2
    assert gate.selection_size(store, "best:baseline", METRIC, exclude="run-a") == 1
    assert gate.selection_size(store, "best:baseline", METRIC) == 2
    assert gate.selection_size(store, "run-b", METRIC, exclude="run-a") == 1


def test_a_setups_seeds_are_its_runs_of_one_config_and_commit(store: Store) -> None:
    """Seeds of one setup: same experiment, config without seeds and commit; a seed run twice
    counts once (the mean of its runs)."""
    from warehouse.models import config_hash

    def seeded(run_id: str, seed: int, acc: float, commit: str) -> dict[str, object]:
        config = {"lr": 0.1, "seed": seed}
        doc = Run(
            run_id=run_id,
            experiment="exp",
            status=RunStatus.COMPLETED,
            ended_at=T0,
            config=config,
            config_hash_noseed=config_hash(config, ("seed",)),
            metrics={"val": {"acc": acc}},
        ).to_doc()
        doc["git"]["commit"] = commit
        store.write_runs([doc])
        return doc

    first = seeded("s1", 1, 0.80, "abc")
    seeded("s1-again", 1, 0.82, "abc")
    seeded("s2", 2, 0.90, "abc")
    seeded("other-code", 3, 0.10, "def")
    scores = setups.seed_scores(store, first, METRIC, ("seed",))
    assert sorted(scores.values()) == pytest.approx([0.81, 0.90])
