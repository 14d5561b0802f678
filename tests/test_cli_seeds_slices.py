"""The CLI flags over the seed and slice views: `over-time --by-group`, `check --slice`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import warehouse
from tests.helpers import run_main


def record(experiment: str, seed: int, correct: list[bool], labels: list[str]) -> str:
    with warehouse.start_run(experiment, config={"model": experiment, "seed": seed}) as run:
        run.log_samples(
            "val",
            [
                {"sample_id": f"s{i}", "correct": c, "label": label}
                for i, (c, label) in enumerate(zip(correct, labels, strict=True))
            ],
        )
        run.log_metrics("val", {"acc": sum(correct) / len(correct)})
    return run.run_id


def test_over_time_by_group_ranks_seed_means(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = ["x"] * 10
    for seed, right in enumerate([9, 7, 7]):  # a lucky 0.9 seed, mean 0.767
        record("lucky", seed, [True] * right + [False] * (10 - right), labels)
    for seed in range(3):  # later: 0.8 every time
        record("steady", seed, [True] * 8 + [False] * 2, labels)
    code, out, err = run_main(
        ["query", "over-time", "--by-group", "-f", "json"], monkeypatch, capsys
    )
    assert code == 0, err
    points = json.loads(out)
    assert [(p["experiment"], p["is_new_best"]) for p in points] == [
        ("lucky", True),
        ("steady", True),
    ]
    assert points[-1]["best_so_far"] == pytest.approx(0.8)
    code, _, err = run_main(["query", "over-time", "--by-group", "-i", "day"], monkeypatch, capsys)
    assert code == 2
    assert "leave out --interval" in err


def test_check_with_slice_fails_on_a_slice_the_overall_score_hides(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    n = 400
    labels = ["seven" if i % 4 == 0 else "other" for i in range(n)]
    ref = [True] * n
    cand = list(ref)
    sevens = [i for i in range(n) if labels[i] == "seven"][:30]
    for i in sevens:  # 30 of the 100 sevens break ...
        cand[i] = False
    reference = record("ref", 0, ref, labels)
    candidate = record("cand", 0, cand, labels)
    args = ["check", candidate, "--against", reference, "--metric", "val.acc"]
    code, out, _ = run_main(args, monkeypatch, capsys)
    assert code == 1  # 30 broken of 400 is already significant overall
    code, out, _ = run_main([*args, "--margin", "0.1"], monkeypatch, capsys)
    assert code == 0, out  # ... but within a 0.1 margin overall (-0.075) ...
    code, out, _ = run_main([*args, "--margin", "0.1", "--slice", "label"], monkeypatch, capsys)
    assert code == 1, out  # ... while the sevens lost 0.3, beyond the margin
    assert "label=seven" in out
