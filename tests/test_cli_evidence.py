"""`warehouse query diff` and `warehouse check` as a user (or a CI job) runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import warehouse
from tests.helpers import run_main


def record(experiment: str, right: set[int], n: int = 400) -> str:
    with warehouse.start_run(experiment) as run:
        run.log_samples(
            "val",
            [
                {"sample_id": i, "correct": i in right, "output": f"img{i}".encode()}
                for i in range(n)
            ],
        )
        run.log_metrics("val", {"acc": len(right) / n})
    return run.run_id


@pytest.fixture
def runs(home: Path) -> tuple[str, str]:
    """A baseline right on samples 0-339 and a candidate that fixes 340-379, breaks 0-4."""
    baseline = record("baseline", set(range(340)))
    candidate = record("candidate", set(range(5, 380)))
    return baseline, candidate


def test_diff_lists_fixed_and_broken_samples_with_a_summary(
    runs: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = runs[0]
    code, out, err = run_main(
        ["query", "diff", baseline[:8], "best", "-f", "json"], monkeypatch, capsys
    )
    assert code == 0, err
    rows = json.loads(out)
    assert sorted(r["sample_id"] for r in rows if r["change"] == "fixed") == [
        str(i) for i in sorted(range(340, 380), key=str)
    ]
    assert sorted(r["sample_id"] for r in rows if r["change"] == "broke") == [
        "0",
        "1",
        "2",
        "3",
        "4",
    ]
    assert "fixed 40 · broke 5 · same 355" in err
    assert all(r["a_output_uri"] and r["b_output_uri"] for r in rows)


def test_diff_downloads_both_outputs_side_by_side(
    runs: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    baseline, candidate = runs
    out_dir = tmp_path / "flips"
    code, _, err = run_main(
        ["query", "diff", baseline, candidate, "--download", str(out_dir)], monkeypatch, capsys
    )
    assert code == 0, err
    assert (out_dir / "a" / "0").read_bytes() == b"img0"
    assert (out_dir / "b" / "379").read_bytes() == b"img379"
    assert len(list((out_dir / "a").iterdir())) == 45


def test_check_exits_1_for_a_worse_run_and_0_for_a_better_one(
    runs: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline, candidate = runs
    code, out, _ = run_main(["check", baseline, "--against", candidate], monkeypatch, capsys)
    assert code == 1
    assert out.startswith("worse: correct -0.0875")
    assert "broken: 340, 341" in out
    code, out, _ = run_main(["check", candidate, "--against", baseline], monkeypatch, capsys)
    assert code == 0
    assert out.startswith("not significantly worse")
    code, _, _ = run_main(
        ["check", baseline, "--against", candidate, "--margin", "0.1"], monkeypatch, capsys
    )
    assert code == 0  # worse, but within the tolerated margin


def test_check_exit_codes_for_usage_and_missing_runs(
    runs: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(["check", "ffffffffffff"], monkeypatch, capsys)[0] == 4
    assert run_main(["check", runs[0], "--margin", "-1"], monkeypatch, capsys)[0] == 2
    assert run_main(["check", runs[0], "--metric", "acc"], monkeypatch, capsys)[0] == 2


@pytest.fixture
def seeded(home: Path) -> dict[str, list[str]]:
    """Two experiments, three seeds each, samples with a label column."""
    ids: dict[str, list[str]] = {}
    for experiment, accuracy in (("wide", 0.9), ("narrow", 0.8)):
        for seed in range(3):
            cfg = {"model": experiment, "seed": seed}
            with warehouse.start_run(experiment, cfg) as run:
                right = {i for i in range(200) if (i * 7 + seed) % 100 < accuracy * 100}
                run.log_samples(
                    "val",
                    [
                        {"sample_id": i, "label": ["a", "b"][i % 2], "correct": i in right}
                        for i in range(200)
                    ],
                )
                run.log_metrics("val", {"acc": len(right) / 200})
            ids.setdefault(experiment, []).append(run.run_id)
    return ids


def test_slices_replicates_hardest_and_by_group_from_the_cli(
    seeded: dict[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_main(
        ["query", "slices", "--by", "label", "-f", "json"], monkeypatch, capsys
    )
    assert code == 0, err
    rows = json.loads(out)
    assert {r["label"] for r in rows} == {"a", "b"}
    assert {"experiment", "run_id", "n", "mean", "ci_low", "ci_high", "gap"} <= set(rows[0])
    code, out, err = run_main(["query", "replicates", "-f", "json"], monkeypatch, capsys)
    assert code == 0, err
    groups = json.loads(out)
    assert sorted((g["experiment"], g["n_seeds"]) for g in groups) == [("narrow", 3), ("wide", 3)]
    code, out, err = run_main(
        ["query", "samples", "--hardest", "-x", "wide", "-n", "3", "-f", "json"],
        monkeypatch,
        capsys,
    )
    assert code == 0, err
    assert [r["runs"] for r in json.loads(out)] == [3, 3, 3]
    code, out, err = run_main(
        ["query", "leaderboard", "--by-group", "-f", "json"], monkeypatch, capsys
    )
    assert code == 0, err
    assert [r["experiment"] for r in json.loads(out)] == ["wide", "narrow"]


def test_the_leaderboard_marks_a_lead_that_is_not_significant(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """alpha beats beta by one sample (McNemar on 1 discordant pair: p = 1), beta beats gamma
    on 179 samples, all one way (p far below 0.05): only alpha's row gets the ≈."""
    record("alpha", set(range(380)))
    record("beta", set(range(379)))
    record("gamma", set(range(200)))
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, err = run_main(["query", "leaderboard"], monkeypatch, capsys)
    assert code == 0, err
    lines = out.splitlines()
    marks = {}
    for line in lines:
        words = line.split()
        if len(words) > 2 and words[1] in ("alpha", "beta", "gamma"):
            marks[words[1]] = "≈" in words
    assert marks == {"alpha": True, "beta": False, "gamma": False}
    assert any(
        line.startswith("≈ ±d: not significantly better than the next row") for line in lines
    )
    code, out, _ = run_main(["query", "leaderboard", "-f", "json"], monkeypatch, capsys)
    assert "≈" not in out  # the marker is for people; scripts read vs_next_p
    rows = json.loads(out)
    assert [r["vs_next_p"] >= 0.05 for r in rows[:2]] == [True, False]


def test_a_leaderboard_without_a_doubtful_lead_has_no_marker(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    record("alpha", set(range(380)))
    record("gamma", set(range(200)))
    code, out, err = run_main(["query", "leaderboard"], monkeypatch, capsys)
    assert code == 0, err
    assert "≈" not in out
