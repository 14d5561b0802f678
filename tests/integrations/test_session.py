"""The rules every integration shares: splits by name, steps that never pass ``epoch`` or
``step`` as a metric, joining the open run, and the frameworks' install check."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import warehouse
from tests.integrations.frameworks import REQUIRE, require, stored_runs, stored_steps
from warehouse.integrations.session import RunSession, dataset_splits, log_step, split_of


@pytest.mark.parametrize(
    ("name", "split", "metric"),
    [
        pytest.param("val_loss", "val", "loss", id="keras-val"),
        pytest.param("loss", "train", "loss", id="no-prefix"),
        pytest.param("train/acc", "train", "acc", id="slash"),
        pytest.param("eval_loss", "val", "loss", id="transformers-eval"),
        pytest.param("test_f1_macro", "test", "f1_macro", id="test-keeps-the-rest"),
        pytest.param("Validation/acc", "val", "acc", id="case"),
        pytest.param("val_", "train", "val_", id="nothing-after-the-prefix"),
        pytest.param("value_loss", "train", "value_loss", id="not-a-prefix"),
    ],
)
def test_a_names_prefix_says_its_split(name: str, split: str, metric: str) -> None:
    assert split_of(name, "train") == (split, metric)


def test_evaluation_sets_sharing_a_split_keep_their_own_names() -> None:
    assert dataset_splits(["training", "valid_0"]) == {"training": "train", "valid_0": "val"}
    assert dataset_splits(["valid_0", "valid_1"]) == {"valid_0": "valid_0", "valid_1": "valid_1"}
    assert dataset_splits(["train", "eval", "test"]) == {
        "train": "train",
        "eval": "val",
        "test": "test",
    }


NUMBERS = st.floats(allow_nan=False, allow_infinity=False, width=64)
NAMES = st.sampled_from(["loss", "lr", "grad_norm", "epoch", "step", "acc"])


@given(step=st.integers(0, 10_000), values=st.dictionaries(NAMES, NUMBERS, max_size=6))
@example(step=3, values={"epoch": 1.5, "step": 3.0, "loss": 0.25})
@example(step=3, values={"epoch": 2.0, "step": 7.0})
def test_a_value_named_epoch_or_step_never_reaches_log_step_as_a_metric(
    step: int, values: dict[str, float]
) -> None:
    calls = []

    class Run:  # records what log_step is given, with ActiveRun.log_step's own signature
        def log_step(self, step: int, epoch: int | None = None, **metrics: float) -> None:
            calls.append((step, epoch, metrics))

    log_step(Run(), step, values)  # type: ignore[arg-type]
    [(got_step, epoch, metrics)] = calls
    assert got_step == step
    assert "epoch" not in metrics
    assert "step" not in metrics
    rest = {k: v for k, v in values.items() if k not in ("epoch", "step")}
    assert {k: v for k, v in metrics.items() if k in rest} == rest
    if "epoch" in values:
        progress = values["epoch"]
        if progress.is_integer():
            assert epoch == int(progress)
            assert "epoch_progress" not in metrics
        else:
            assert metrics["epoch_progress"] == progress
            assert epoch == max(math.ceil(progress) - 1, 0)  # the epoch it falls in
    else:
        assert epoch is None
    if "step" in values and values["step"] != step:
        assert metrics["step_value"] == values["step"]


def test_transformers_log_dicts_record_through_a_real_run(home: Path) -> None:
    with warehouse.start_run(experiment="t") as run:
        log_step(run, 4, {"loss": 0.5, "learning_rate": 1e-3, "epoch": 0.5})
        log_step(run, 8, {"eval_loss": 0.4, "epoch": 1.0})
    docs = [
        (d["step"], d["epoch"], d["metrics"])
        for d in stored_steps(home, run.run_id)
        if d["metrics"]
    ]
    assert docs == [
        (4, 0, {"loss": 0.5, "learning_rate": 1e-3, "epoch_progress": 0.5}),
        (8, 1, {"eval_loss": 0.4}),
    ]


def test_an_integration_joins_the_open_run_and_leaves_its_end_to_it(home: Path) -> None:
    with warehouse.start_run(experiment="outer", config={"a": 1}) as outer:
        session = RunSession("inner", {"b": 2}, {})
        assert session.open() is outer
        session.log_final({"val": {"acc": 0.5}})
        session.end("completed")  # not its run: nothing happens
        assert outer.record.ended_at is None
    [run] = stored_runs(home)
    assert run["experiment"] == "outer"
    assert run["config"] == {"a": 1}
    assert run["metrics"] == {"val": {"acc": 0.5}}


def test_metrics_given_after_its_own_run_ended_are_written(home: Path) -> None:
    session = RunSession("own", None, {"tags": ["x"]})
    session.open({"lr": 0.1})
    session.end("completed")
    session.log_final({"test": {"acc": 0.75}})  # an evaluation after training
    [run] = stored_runs(home)
    assert run["status"] == "completed"
    assert run["metrics"] == {"test": {"acc": 0.75}}
    assert run["config"] == {"lr": 0.1}
    assert run["tags"] == ["x"]


def test_a_missing_framework_skips_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(REQUIRE, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"pip install -e '\.\[keras\]'"):
        require("a_framework_that_is_not_there", "keras")


def test_a_missing_framework_fails_where_ci_requires_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception, match=REQUIRE):
        require("a_framework_that_is_not_there", "keras")
