"""The general reader's rules (``warehouse/watch/parsers/general.py``), each on lines of the
forms it names, and the examples the generated logs found (``test_generated_logs.py``)."""

from __future__ import annotations

import pytest

from warehouse.watch.parsers import OutputReader, Point
from warehouse.watch.parsers.general import read_pairs


def points(text: str) -> list[Point]:
    reader = OutputReader()
    return reader.feed(text.encode()) + reader.close()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the capital Epoch line (it read nothing)
        (
            "Epoch 1/5: train_loss=0.52 val_acc=0.81\nEpoch 2/5: train_loss=0.42 val_acc=0.85\n",
            [
                (1, 1, {"train_loss": 0.52, "val_acc": 0.81}),
                (2, 2, {"train_loss": 0.42, "val_acc": 0.85}),
            ],
        ),
        # XGBoost and LightGBM: [N], "name:value" and "set's metric: value"
        (
            "[0]\ttrain-rmse:1.94221\teval-rmse:1.82461\n",
            [(0, None, {"train-rmse": 1.94221, "eval-rmse": 1.82461})],
        ),
        (
            "[7]\ttraining's l2: 0.2\tvalid_1's auc: 0.85287\n",
            [(7, None, {"training's l2": 0.2, "valid_1's auc": 0.85287})],
        ),
        # scikit-learn's MLP: "Iteration N, loss = v"
        ("Iteration 3, loss = 0.52123456\n", [(3, None, {"loss": 0.52123456})]),
        # the ImageNet example's meters: the current value, not the average
        (
            "Epoch: [1][ 6/25]\tTime  0.245 ( 0.122)\tLoss 2.2718e+00 (2.2923e+00)"
            "\tAcc@1  12.50 ( 15.62)\n",
            [(6, 1, {"Time": 0.245, "Loss": 2.2718, "Acc@1": 12.5})],
        ),
        # nanoGPT: units are not values, percent is
        (
            "iter 10: loss 2.3012, time 12.34ms, mfu 1.23%\n",
            [(10, None, {"loss": 2.3012, "mfu": 1.23})],
        ),
        (
            "step 250: train loss 2.1234, val loss 2.2345\n",
            [(250, None, {"train loss": 2.1234, "val loss": 2.2345})],
        ),
        # detectron2: a date in brackets is no counter; "0:00:10" and "0M" are no values
        (
            "[11/24 19:50:13 d2.utils.events]:  eta: 0:00:10  iter: 19  total_loss: 2.3"
            "  lr: 0.0002  max_mem: 0M\n",
            [(19, None, {"total_loss": 2.3, "lr": 0.0002})],
        ),
        # a logging prefix, "key=value" positions
        ("INFO:root:step 5 loss=1.7650 acc=0.5614\n", [(5, None, {"loss": 1.765, "acc": 0.5614})]),
        # one-off lines are not read, even with pairs
        ("lr: 0.001, batch_size: 32\ndone in 3.2 s\nProcessed 100 samples in 3.2 s\n", []),
    ],
)
def test_lines_naming_their_position(text: str, expected: list[Point]) -> None:
    assert points(text) == expected


def test_counters_continue_over_rounds_of_their_total() -> None:
    """The PyTorch MNIST example: ``[samples/total]`` restarting each epoch."""
    text = (
        "Train Epoch: 1 [0/640 (0%)]\tLoss: 1.621390\n"
        "Train Epoch: 1 [512/640 (80%)]\tLoss: 1.611736\n"
        "Train Epoch: 2 [0/640 (0%)]\tLoss: 1.5\n"
    )
    assert [(s, e) for s, e, _ in points(text)] == [(0, 1), (512, 1), (640, 2)]


def test_a_batch_counter_without_its_total_is_not_placed_once_it_restarts() -> None:
    text = "at batch 9: loss 1.3954\nat batch 19: loss 0.9353\nat batch 9: loss 0.4203\n"
    assert points(text) == [(9, None, {"loss": 1.3954}), (19, None, {"loss": 0.9353})]


def test_epoch_values_go_to_the_last_step_when_batches_are_the_clock() -> None:
    """Issue 30, defect 5: an epoch line after step lines is at the last step, not at step
    ``epoch``; so is a Keras-like epoch line printed by hand after tqdm-like steps."""
    text = "step=10 loss=0.5\nstep=20 loss=0.4\nEpoch 1/3 - val_loss: 0.45\nepoch=1 acc=0.8\n"
    got = points(text)
    assert got[-1] == (20, 1, {"loss": 0.4, "val_loss": 0.45, "acc": 0.8})


def test_a_repeating_line_is_a_series_at_the_clock() -> None:
    text = (
        "Iteration 1, loss = 0.9\nValidation score: 0.5\n"
        "Iteration 2, loss = 0.8\nValidation score: 0.6\n"
    )
    got = sorted(points(text), key=lambda p: p[0])
    assert got == [
        (1, None, {"loss": 0.9}),
        (1, None, {"Validation score": 0.5}),
        (2, None, {"loss": 0.8}),
        (2, None, {"Validation score": 0.6}),
    ]


def test_a_series_before_any_clock_is_numbered_by_its_showings() -> None:
    assert points("loss: 0.5, acc: 0.8\nloss: 0.4, acc: 0.85\n") == [
        (1, None, {"loss": 0.5, "acc": 0.8}),
        (2, None, {"loss": 0.4, "acc": 0.85}),
    ]


def test_a_line_repeated_with_the_same_numbers_is_not_a_series() -> None:
    assert points("lr: 0.001\nlr: 0.001\nlr: 0.001\n") == []


def test_a_table_under_its_header() -> None:
    """scikit-learn's gradient boosting (verbose): "Remaining Time" has units, not values."""
    text = (
        "      Iter       Train Loss      OOB Improve   Remaining Time \n"
        "         1           1.2737           0.0863            0.02s\n"
        "         2           1.1888           0.0992            0.01s\n"
    )
    assert points(text) == [
        (1, None, {"Train Loss": 1.2737, "OOB Improve": 0.0863}),
        (2, None, {"Train Loss": 1.1888, "OOB Improve": 0.0992}),
    ]


def test_an_evaluation_label_names_the_split() -> None:
    got = points("Test: [1/8]\tTime  0.000 ( 0.000)\tLoss 2.2538e+00 (2.2538e+00)\n")
    assert got == [(1, None, {"test_Time": 0.0, "test_Loss": 2.2538})]


# ---- found by the generated logs ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a value's sign changed the line's template: its counter and its series were lost
        (
            "Epoch: [1][ 2/6] | a:2.249\rEpoch: [1][ 2/6] | a:-2.498\nEpoch: [2][ 2/6] | a:-0.2\n",
            [(2, 1, {"a": -2.498}), (8, 2, {"a": -0.2})],
        ),
        (
            "b_i=-2.289e+01\nstep 4 x=1\nb_i=5.000e-01\n",
            [(4, None, {"x": 1.0}), (1, None, {"b_i": -22.89}), (4, None, {"b_i": 0.5})],
        ),
        # a bare counter at the line's start
        ("2/15, e@3 = 1.001000 - zoq = 1.2\n", [(2, None, {"e@3": 1.001, "zoq": 1.2})]),
        # [E][i/M] with one batch an epoch; rounds counted from the first one shown
        (
            "Epoch: [2][ 1/1] a 0.5\nEpoch: [3][ 1/1] a 0.4\n",
            [(1, 2, {"a": 0.5}), (2, 3, {"a": 0.4})],
        ),
        # headings with digits and brackets
        (
            "        Iter        zxk[1]          Jo@5\n           3      0.500000       -1.70\n",
            [(3, None, {"zxk[1]": 0.5, "Jo@5": -1.7})],
        ),
        # a step line cut by double spaces is no table heading
        (
            "step 1 Rbh 0.084  Uzkcm@4 -20.15  u[5] -470.80\n",
            [(1, None, {"Rbh": 0.084, "Uzkcm@4": -20.15, "u[5]": -470.8})],
        ),
        # names of several words after a tab or " - ", then a space
        ("Epoch: [1][ 1/2] - jfq0's gtdvtu\t-50.0000\n", [(1, 1, {"jfq0's gtdvtu": -50.0})]),
        (
            "step 3 | Tq esdeua 0.5000\tgu's l 5.00000e-01\n",
            [(3, None, {"Tq esdeua": 0.5, "gu's l": 0.5})],
        ),
        # Keras' form is a counter then a bar, a time or " - ": this one is not Keras'
        (
            "1/6 i9[2]: 0.50 - ag[2]: 0.50\n2/6 i9[2]: 0.50 - ag[2]: 0.50\n",
            [(1, None, {"i9[2]": 0.5, "ag[2]": 0.5}), (2, None, {"i9[2]": 0.5, "ag[2]": 0.5})],
        ),
    ],
)
def test_examples_the_generated_logs_found(text: str, expected: list[Point]) -> None:
    assert points(text) == expected


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("loss 0.5 acc 0.9", ["loss", "acc"]),
        ("Test set: Average loss: 0.1000, Accuracy: 9800/10000 (98%)", ["Average loss"]),
        ("{'accuracy': 0.81, 'f1': 0.77}", ["accuracy", "f1"]),
        ("decrease in loss 0.5", []),
        ("took 3.2 s", []),
        ("eta: 0:00:10", []),
    ],
)
def test_pairs(text: str, names: list[str]) -> None:
    assert list(read_pairs(text)[0]) == names


def test_an_outer_bar_after_a_cleared_inner_bar_is_not_placed_at_its_last_count() -> None:
    """Issue 30, defect 4: nested tqdm bars with tqdm's defaults; an inner bar cleared at its
    end (``leave=False``) is last drawn a few steps short of its total, so the outer bar's
    ``val_loss`` was recorded there (2-3 steps off). Its place is unknown: left out."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
    import scoring

    for stem in ("nested_default_cleared__pipe", "nested_default_cleared__tty100"):
        score = scoring.score(stem)
        assert (score.wrong, score.invented) == ([], []), stem
        assert score.recovered_visible >= 0.8 * score.visible
