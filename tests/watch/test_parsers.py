"""What ``warehouse watch`` reads: real captures of Keras 3, tf-keras, Lightning (tqdm and Rich),
tqdm (flat, nested, clipped), transformers and JSON lines (fixtures/), and odd input."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest

from warehouse.watch.parsers import Frame, FrameReader, OutputReader, Point, split_metrics
from warehouse.watch.parsers.general import GeneralLines
from warehouse.watch.parsers.json_lines import JsonLines
from warehouse.watch.parsers.keras import Keras
from warehouse.watch.parsers.results_table import ResultsTable
from warehouse.watch.parsers.rich import read_metrics
from warehouse.watch.parsers.tqdm import Tqdm
from warehouse.watch.parsers.transformers import TransformersLog

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import scoring

CAPTURES = scoring.captures()


def points_of(data: bytes, chunk: int | None = None) -> list[Point]:
    reader = OutputReader()
    size = chunk or max(len(data), 1)
    out: list[Point] = []
    for start in range(0, len(data), size):
        out += reader.feed(data[start : start + size])
    return out + reader.close()


def one(parser: JsonLines | Keras | Tqdm | TransformersLog, text: str) -> dict[str, float] | None:
    readings = parser.parse(Frame(text))
    return None if not readings else readings[0].metrics


# ---- the targets, over every capture ------------------------------------------------------------
def test_every_capture_is_read_without_a_wrong_or_invented_value_and_95_percent_recovered() -> None:
    scores = [scoring.score(stem) for stem in CAPTURES]
    report = scoring.table(scores)
    print("\n" + report)
    assert {s.family for s in scores} >= {
        "keras3", "tf_keras", "lightning_tqdm", "lightning_rich", "tqdm_flat", "tqdm_nested",
        "transformers", "json_lines",
    }  # fmt: skip
    assert [w for s in scores for w in s.wrong] == [], report
    assert [w for s in scores for w in s.invented] == [], report
    visible = sum(s.visible for s in scores)
    assert sum(s.recovered_visible for s in scores) >= 0.95 * visible, report


@pytest.mark.parametrize("stem", [s for s in CAPTURES if s.endswith("__pipe")])
@pytest.mark.parametrize("chunk", [1, 7, 4093])
def test_points_do_not_depend_on_how_the_bytes_arrive(stem: str, chunk: int) -> None:
    for suffix in ("stdout", "stderr"):
        data = (scoring.HERE / f"{stem}.{suffix}").read_bytes()
        assert points_of(data, chunk) == points_of(data)


def test_each_family_gives_points_from_its_pipe_capture() -> None:
    for stem in CAPTURES:
        if stem.endswith("__pipe"):
            score = scoring.score(stem)
            assert score.recovered > 0 or not score.visible, stem  # hgb prints a summary only


# ---- families on their own ----------------------------------------------------------------------
def test_lightning_tqdm_gives_no_v_num_and_no_stale_val_repeats() -> None:
    points, _ = scoring.replay("lightning_tqdm__pipe")
    assert all("v_num" not in metrics for _, _, metrics in points)
    val_steps = [step for step, _, metrics in points if "val_loss" in metrics]
    assert val_steps == [16, 32, 48]  # each epoch's end, once
    assert {epoch for _, epoch, _ in points} == {0, 1, 2}  # as printed: Lightning counts from 0


def test_keras_names_with_spaces_are_read() -> None:
    line = "12/12 - 1s - 85ms/step - accuracy: 0.6693 - top 2 acc: 0.8828 - val_top 2 acc: 1.0000"
    assert one(Keras(), line) == {"accuracy": 0.6693, "top 2 acc": 0.8828, "val_top 2 acc": 1.0}


def test_keras_eta_is_not_a_metric_and_ordinary_dash_lines_are_not_keras() -> None:
    assert one(Keras(), " 1/12 [=>....] - ETA: 7s - loss: 2.2920 - acc: 0.2500") == {
        "loss": 2.292,
        "acc": 0.25,
    }
    assert one(Keras(), "2024-05-01 12:00:00 - root - INFO - loss: 0.5") is None


def test_keras_epoch_lines_number_steps_over_epochs() -> None:
    data = (
        b"Epoch 1/2\n10/10 - 0s - loss: 0.5 - val_loss: 0.6\n"
        b"Epoch 2/2\n10/10 - 0s - loss: 0.4 - val_loss: 0.5\n"
    )
    assert points_of(data) == [
        (10, 1, {"loss": 0.5, "val_loss": 0.6}),
        (20, 2, {"loss": 0.4, "val_loss": 0.5}),
    ]


@pytest.mark.parametrize(
    "evaluate",
    [
        b"2/2 - 0s - 4ms/step - accuracy: 0.6875 - loss: 0.7454\n",  # verbose=2
        b"1/2 \xe2\x94\x81\xe2\x94\x81 0s 6ms/step - accuracy: 0.7188 - loss: 0.6593"
        b"2/2 \xe2\x94\x81\xe2\x94\x81 0s 3ms/step - accuracy: 0.6875 - loss: 0.7454\n",  # 1
    ],
    ids=["verbose2", "verbose1"],
)
def test_keras_evaluate_after_fit_is_neither_steps_nor_final_training_metrics(
    evaluate: bytes,
) -> None:
    # Keras 3.15.1: fit(epochs=2, validation_split=0.25), then evaluate(x_test, y_test)
    fit = (
        b"Epoch 1/2\n"
        b"6/6 - 0s - 5ms/step - accuracy: 0.6875 - loss: 0.6280 - val_accuracy: 0.6094 - "
        b"val_loss: 0.7299\n"
        b"Epoch 2/2\n"
        b"6/6 - 0s - 4ms/step - accuracy: 0.6927 - loss: 0.6214 - val_accuracy: 0.6250 - "
        b"val_loss: 0.7223\n"
    )
    reader = OutputReader()
    points = reader.feed(fit + evaluate) + reader.close()
    assert [step for step, _, _ in points] == [6, 12]
    assert reader.assembler.latest == {
        "accuracy": 0.6927, "loss": 0.6214, "val_accuracy": 0.625, "val_loss": 0.7223
    }  # fmt: skip


def test_a_print_on_the_bars_line_leaves_its_pairs_whole() -> None:
    line = (
        "epoch 0:  18%|█▊        | 7/40 [00:00<00:00, 425.82it/s, acc=0.208, loss=1.58, "
        "lr=0.000913][ckpt] saved checkpoints/step_8.pt (8 batches seen)"
    )
    assert one(Tqdm(), line) == {"acc": 0.208, "loss": 1.58, "lr": 0.000913}


def test_epoch_lines_printed_by_hand_are_one_point_per_epoch() -> None:
    data = b"Epoch 1/5 - loss: 0.4644 - acc: 0.9492\nEpoch 2/5 - loss: 0.3727 - acc: 0.9688\n"
    assert points_of(data) == [
        (1, 1, {"loss": 0.4644, "acc": 0.9492}),
        (2, 2, {"loss": 0.3727, "acc": 0.9688}),
    ]
    assert points_of(b"Epoch 1/5 - starting\n") == []  # no metric: not an epoch line


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("INFO:root:step 5 loss=1.7650 acc=0.5614", (5, None, {"loss": 1.765, "acc": 0.5614})),
        (
            "2026-11-24 19:50:13,669 INFO train: step=5 loss=1.7650 acc=0.5614",
            (5, None, {"loss": 1.765, "acc": 0.5614}),
        ),
        ("epoch=2 global_step=120 loss=0.31 lr=3e-4", (120, 2, {"loss": 0.31, "lr": 3e-4})),
        ("iter: 7, loss=nan", (7, None, {"loss": math.nan})),
        ("lr=0.001 batch_size=32", None),  # a config print: no position
        ("Total optimization steps = 27", None),
        ("step=3 done", None),  # no metric
    ],
)
def test_log_lines_naming_their_step(
    line: str, expected: tuple[int, int | None, dict[str, float]] | None
) -> None:
    if expected is None:  # no point of the run, even printed twice
        assert points_of(f"{line}\n{line}\n".encode()) == []
        return
    readings = GeneralLines().parse(Frame(line))
    assert readings is not None
    (reading,) = readings
    assert (reading.step, reading.epoch) == expected[:2]
    assert reading.metrics.keys() == expected[2].keys()
    for name, value in expected[2].items():
        got = reading.metrics[name]
        assert got == value or (math.isnan(got) and math.isnan(value))


def test_an_epoch_log_line_attaches_to_the_last_step() -> None:
    data = b"step=5 loss=0.9\nstep=10 loss=0.8\nepoch=1 val_loss=0.85\n"
    assert points_of(data) == [(5, None, {"loss": 0.9}), (10, 1, {"loss": 0.8, "val_loss": 0.85})]


def test_an_outer_bar_follows_inner_bars_that_carry_no_values() -> None:
    # tqdm: val_* on the outer bar only; inner "Epoch N" bars (leave=False) show no postfix;
    # the outer bar is drawn first, when it is made
    data = b"\rTraining:   0%|    | 0/2 [00:00<?, ?it/s]"
    for epoch in (1, 2):
        data += b"".join(
            b"\n\rEpoch %d: %d%%|#   | %d/3 [00:00<00:00, 9.00it/s]\x1b[A" % (epoch, 33 * n, n)
            for n in (1, 2, 3)
        )
        data += b"\rTraining: %d%%|#   | %d/2 [00:00<00:00, 9it/s, val_loss=0.%d]" % (
            50 * (epoch - 1),
            epoch - 1,
            9 - epoch,
        )
    assert [(step, m) for step, _, m in points_of(data)] == [
        (3, {"val_loss": 0.8}),
        (6, {"val_loss": 0.7}),
    ]


def test_a_stale_tqdm_counter_places_each_drawing_at_its_step_when_they_add_up() -> None:
    # tqdm(loader) + set_postfix each batch, default mininterval: the iterator moves the
    # counter only at its own (timed) drawings, set_postfix draws at every step
    frames = [(0, "loss=1.4"), (0, "loss=1.34"), (0, "loss=1.35"), (3, "loss=1.35")]
    frames += [(3, "loss=1.2"), (3, "loss=1.1"), (5, "loss=1.1")]
    points = points_of(bar_frames("", 5, frames))
    assert [(step, m["loss"]) for step, _, m in points] == [
        (0, 1.4), (1, 1.34), (2, 1.35), (3, 1.2), (4, 1.1),
    ]  # fmt: skip


def test_a_stale_tqdm_counter_whose_drawings_do_not_add_up_is_not_guessed() -> None:
    # three drawings at counter 0, then the counter moves by 5: which steps they were is unknown
    frames = [(0, "loss=1.4"), (0, "loss=1.34"), (0, "loss=1.35"), (5, "loss=1.35")]
    assert [(step, m["loss"]) for step, _, m in points_of(bar_frames("", 9, frames))] == [(0, 1.4)]


def test_accelerate_style_epoch_dict_lines() -> None:
    data = b"epoch 0: {'accuracy': 0.796875, 'f1': 0.7796610169491526}\n"
    assert points_of(data) == [(0, 0, {"accuracy": 0.796875, "f1": 0.7796610169491526})]


def test_a_clipped_tqdm_bar_keeps_its_complete_pairs_only() -> None:
    line = "epoch 0:  5%| | 2/40 [00:00<00:00, 437.15it/s, acc=0.0645, loss=1.87, lr=0.00"
    assert one(Tqdm(), line) == {"acc": 0.0645, "loss": 1.87}
    cut_mid_name = "Epoch 0:   6%|▋  | 1/16 [00:00<00:00, 58.14it/s, v_num=0, train_loss_st"
    assert one(Tqdm(), cut_mid_name) == {}


def test_nested_tqdm_bars_keep_their_own_positions() -> None:
    data = (
        b"\rTraining:   0%|          | 0/2 [00:00<?, ?it/s]\n"
        + b"".join(
            b"\n\rEpoch 1:  50%%|#   | %d/2 [00:00<00:00, 9it/s, loss=0.%d]\x1b[A" % (n, 9 - n)
            for n in (1, 2)
        )
        + b"\r                \x1b[A\rTraining:  50%|#   | 1/2 [00:00<00:00, 9it/s, val_loss=0.5]"
    )
    assert points_of(data) == [(1, 1, {"loss": 0.8}), (2, 1, {"loss": 0.7, "val_loss": 0.5})]


def bar_frames(label: str, total: int, frames: list[tuple[int, str]]) -> bytes:
    """tqdm redraws of one bar (``\\r`` before each), ended by a newline."""
    drawn = (
        f"\r{label}: {100 * n // total}%|#   | {n}/{total} [00:00<00:00, 9.00it/s, {post}]"
        for n, post in frames
    )
    return "".join(drawn).encode() + b"\n"


def test_a_bar_drawn_after_a_finished_bar_counts_its_own_steps() -> None:
    data = b"".join(
        bar_frames(f"epoch {e}", 2, [(n, f"loss=0.{9 - 2 * e - n}") for n in (1, 2)])
        for e in (0, 1)
    ) + bar_frames("finetune", 3, [(n, f"train_acc=0.{n}") for n in (1, 2, 3)])
    points = points_of(data)
    assert [(step, m) for step, _, m in points if "train_acc" in m] == [
        (1, {"train_acc": 0.1}),
        (2, {"train_acc": 0.2}),
        (3, {"train_acc": 0.3}),
    ]  # its own counter, not the finished epoch bars' step 4
    assert [step for step, _, m in points if "loss" in m] == [1, 2, 3, 4]


def test_a_shorter_last_epoch_continues_the_step_count() -> None:
    # Lightning with max_steps: the last epoch's bar has a smaller total, same label
    data = bar_frames("Epoch 0", 3, [(n, f"train_loss_step=0.{9 - n}") for n in (1, 2, 3)])
    data += bar_frames("Epoch 1", 2, [(n, f"train_loss_step=0.{5 - n}") for n in (1, 2)])
    points = points_of(data)
    assert [(step, epoch) for step, epoch, _ in points] == [
        (1, 0), (2, 0), (3, 0), (4, 1), (5, 1),
    ]  # fmt: skip
    assert points[-1][2] == {"train_loss_step": 0.3}


def test_validation_values_arriving_mid_epoch_are_recorded_once() -> None:
    # Lightning's val_check_interval=0.5: val_* join the bar in the middle of an epoch and
    # stay on it, unchanged, until the next validation
    frames = [(n, f"train_loss_step=0.{9 - n}") for n in (1, 2)]
    frames += [(n, f"train_loss_step=0.{9 - n}, val_loss=1.26") for n in (3, 4)]
    frames += [(n, f"train_loss_step=0.{9 - n}, val_loss=1.09") for n in (5, 6)]
    points = points_of(bar_frames("Epoch 0", 6, frames))
    assert [(step, m["val_loss"]) for step, _, m in points if "val_loss" in m] == [
        (3, 1.26),
        (5, 1.09),
    ]
    assert [step for step, _, m in points if "train_loss_step" in m] == [1, 2, 3, 4, 5, 6]


def test_a_step_printing_the_values_of_the_step_before_is_still_recorded() -> None:
    # Lightning draws each step twice: the new counter with the old values, then the new values
    frames = [(1, "loss=0.9"), (2, "loss=0.9"), (2, "loss=0.8"), (3, "loss=0.8"), (3, "loss=0.8")]
    frames += [(4, "loss=0.8"), (4, "loss=0.7")]
    points = points_of(bar_frames("Epoch 0", 5, frames))
    assert [(step, m["loss"]) for step, _, m in points] == [(1, 0.9), (2, 0.8), (3, 0.8), (4, 0.7)]


def test_the_last_frame_drawn_again_at_the_end_is_not_a_step() -> None:
    frames = [(1, "loss=0.9"), (2, "loss=0.9"), (2, "loss=0.9")]  # tqdm's close() redraw
    assert [step for step, _, _ in points_of(bar_frames("epoch 0", 2, frames))] == [1]


def test_a_unit_scaled_bar_gives_final_values_but_no_steps() -> None:
    # tqdm(unit_scale=True): "2.00k/5.00k" is no step to put a value at
    data = b"".join(
        b"\rtrain:  %d%%|##   | %d.00k/5.00k [00:00<00:00, 9.46Mit/s, loss=%s]" % (20 * n, n, v)
        for n, v in ((1, b"1"), (2, b"0.5"), (3, b"0.333"))
    )
    reader = OutputReader()
    assert reader.feed(data) + reader.close() == []
    assert reader.assembler.latest == {"loss": 0.333}


def test_a_keras_epoch_value_equal_to_the_epoch_before_is_still_recorded() -> None:
    data = (
        b"Epoch 1/3\n10/10 - 0s - loss: 0.5 - val_accuracy: 0.7250\n"
        b"Epoch 2/3\n10/10 - 0s - loss: 0.4 - val_accuracy: 0.7250\n"
        b"Epoch 3/3\n10/10 - 0s - loss: 0.3 - val_accuracy: 0.7250\n"
    )
    assert [m.get("val_accuracy") for _, _, m in points_of(data)] == [0.725, 0.725, 0.725]


# Lightning 2.6.6's results tables, as printed after trainer.test / trainer.validate
RICH_TABLE = """\
┏━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃        Test metric        ┃       DataLoader 0        ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│         test_acc          │           0.75            │
│         test_loss         │    0.6166943907737732     │
└───────────────────────────┴───────────────────────────┘
[{'test_loss': 0.6166943907737732, 'test_acc': 0.75}]
"""
PLAIN_TABLE = """\
────────────────────────────────────────────────────────────────────────────────────────
       Test metric             DataLoader 0
────────────────────────────────────────────────────────────────────────────────────────
        test_acc                   0.75
        test_loss           0.6166943907737732
────────────────────────────────────────────────────────────────────────────────────────
"""


@pytest.mark.parametrize("table", [RICH_TABLE, PLAIN_TABLE], ids=["rich", "plain"])
def test_lightning_results_table_rows_are_final_metrics(table: str) -> None:
    reader = OutputReader()
    assert reader.feed(table.encode()) + reader.close() == []  # no step: no point
    assert reader.assembler.latest == {"test_acc": 0.75, "test_loss": 0.6166943907737732}
    assert split_metrics(reader.assembler.latest) == {
        "test": {"acc": 0.75, "loss": 0.6166943907737732}
    }


def table_metrics(text: str) -> dict[str, float]:
    parser = ResultsTable()
    readings = [r for line in text.splitlines() for r in parser.parse(Frame(line)) or []]
    readings += parser.close()
    assert all(r.final for r in readings)
    return {k: v for r in readings for k, v in r.metrics.items()}


def test_a_results_table_with_two_dataloaders_names_each_column() -> None:
    text = """\
┃        Test metric        ┃       DataLoader 0        ┃       DataLoader 1        ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│         test_acc          │           0.75            │            0.5            │
│         test_loss         │           0.61            │                           │
└───────────────────────────┴───────────────────────────┴───────────────────────────┘"""
    assert table_metrics(text) == {
        "test_acc/dataloader_idx_0": 0.75,
        "test_acc/dataloader_idx_1": 0.5,
        "test_loss/dataloader_idx_0": 0.61,
    }


def test_one_table_per_dataloader_in_a_narrow_terminal_names_each() -> None:
    # Lightning 2.6.6 at 64 columns: a table per dataloader, one after the other
    table = """\
┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃         Test metric          ┃         DataLoader {n}          ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│           test_acc           │      {acc}       │
└──────────────────────────────┴───────────────────────────────┘
"""
    text = table.format(n=0, acc="0.75") + table.format(n=1, acc="0.6458333134651184")
    reader = OutputReader()
    assert reader.feed(text.encode() + b"Testing done\n") + reader.close() == []
    assert reader.assembler.latest == {
        "test_acc/dataloader_idx_0": 0.75,
        "test_acc/dataloader_idx_1": 0.6458333134651184,
    }


def test_a_rich_bar_drawn_before_the_table_does_not_override_it() -> None:
    # the bar's row is read where it ends, so the table's full-precision value comes last
    bar = (
        "Epoch 1/1  ━━━━━━━━━━━━━━━━━━━━━━━━━ 16/16 0:00:00 • 0:00:00 255.51it/s v_num: 0.000\n"
        + " " * 72
        + "val_loss: 0.883\n"
    )
    table = RICH_TABLE.replace("Test metric", "Validate metric").replace("test_loss", "val_loss")
    reader = OutputReader()
    reader.feed((bar + table).encode())
    reader.close()
    assert reader.assembler.latest["val_loss"] == 0.6166943907737732


def test_a_results_table_cell_cut_in_a_narrow_terminal_is_skipped() -> None:
    text = """\
┃ Test metric  ┃ DataLoader 0 ┃
┡━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━┩
│   test_acc   │     0.75     │
│  test_loss   │ 1234.567891  │
│              │     2345     │
│ test_accura… │     0.5      │
│ test_accuracy_macro │ 0.6 │
│ _averaged    │              │
└──────────────┴──────────────┘"""
    assert table_metrics(text) == {"test_acc": 0.75}  # cut by a wrap or by Rich's "…"


def test_transformers_dict_lines_are_counted_and_keep_the_fractional_epoch() -> None:
    data = (
        b"{'loss': '2.287', 'grad_norm': '0.4539', 'learning_rate': '0.0027', 'epoch': '0.2222'}\n"
        b"{'eval_loss': '2.1', 'eval_accuracy': '0.73', 'epoch': '1'}\n"
        b"{'lr': 0.1, 'batch_size': 32}\n"  # a config print: not the Trainer's
    )
    assert points_of(data) == [
        (1, None, {"loss": 2.287, "grad_norm": 0.4539, "learning_rate": 0.0027, "epoch": 0.2222}),
        (2, None, {"eval_loss": 2.1, "eval_accuracy": 0.73, "epoch": 1.0}),
    ]
    reader = OutputReader()
    reader.feed(data)
    reader.close()
    assert reader.assembler.final_metrics()["val"] == {"loss": 2.1, "accuracy": 0.73}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "v_num: 0.000\ntrain_loss_step:\n0.005 lr: 0.01",
            {"train_loss_step": 0.005, "lr": 0.01},
            id="name-and-value-on-two-lines",
        ),
        pytest.param("learning_ra…\n0.010 val_loss: 0.190", {"val_loss": 0.19}, id="cut-name"),
        pytest.param("learning_rate_no\nw: 0.010 acc: 1.0", {"acc": 1.0}, id="folded-name"),
        pytest.param("loss: 0.0\n05 acc: 1.0", {"acc": 1.0}, id="folded-value"),
        pytest.param("loss: 0.01…", {}, id="cut-value"),
    ],
)
def test_rich_metrics_are_taken_only_when_complete(text: str, expected: dict[str, float]) -> None:
    assert read_metrics(text)[0] == expected


def test_rich_in_a_pipe_gives_the_epoch_values_of_its_last_drawing() -> None:
    points, latest = scoring.replay("lightning_rich__pipe")
    assert [step for step, _, _ in points] == [48]  # epoch 2 of 16 batches, 0-based
    # names Rich cut with "…" (learning_rate_no…, val_accuracy_mac…) are left out
    assert set(points[0][2]) == {
        "train_loss_step",
        "train_accuracy",
        "val_loss",
        "train_loss_epoch",
    }
    assert latest == points[0][2]


def rich_drawing(counter: int, loss: str) -> bytes:
    """One drawing of Lightning's Rich bar in a terminal: back to the line's start, erase it."""
    bar = "━" * counter + "╸" + "━" * (16 - counter)
    row = f"Epoch 0/2  {bar} {counter}/16 0:00:00 • 0:00:01 255.51it/s v_num: 0.000 loss: {loss}"
    return b"\r\x1b[2K" + row.encode()


def test_rich_in_a_terminal_takes_a_step_drawn_twice_alike_never_one_drawn_once() -> None:
    # the timer thread may draw after the counter moved, before the step's values were set:
    # a lone drawing may show the step before's values; a second drawing at the same counter
    # comes only once something changed after the first: the values shown then are the step's
    draws = [(1, "1.500"), (3, "1.200"), (3, "1.200"), (5, "0.900"), (5, "0.800"), (9, "0.7")]
    assert points_of(b"".join(rich_drawing(c, loss) for c, loss in draws)) == [
        (3, 0, {"loss": 1.2}),
        (5, 0, {"loss": 0.8}),
    ]


def test_rich_in_a_terminal_keeps_each_epochs_last_training_values() -> None:
    # Lightning's defaults, drawn live (held out, issue 30 defect 3): the training row at its
    # end, drawn again under the validation bar, holds the epoch's last step for certain
    points, _ = scoring.replay("lightning_rich_defaults__tty100")
    expected = json.loads(
        (scoring.HERE / "lightning_rich_defaults__tty100.expected.json").read_text()
    )
    last = {e["step"] + 1: e["value"] for e in expected["points"] if e["metric"] == "train_loss"}
    got = {step: m["train_loss"] for step, _, m in points if "train_loss" in m}
    assert {24, 48, 72} <= set(got)
    assert all(abs(value - last[step]) <= 5e-4 for step, value in got.items())


# ---- JSON lines ---------------------------------------------------------------------------------
def test_json_epoch_lines_are_one_point_per_epoch_and_a_stepless_metric_is_final() -> None:
    data = b"".join(
        b'{"metric": "%s", "value": %d.5, "epoch": %d}\n' % (name, e, e)
        for e in (1, 2, 3)
        for name in (b"loss", b"acc")
    )
    data += b'{"metric": "final_accuracy", "value": 0.81}\n'
    reader = OutputReader()
    points = reader.feed(data) + reader.close()
    assert points == [(e, e, {"loss": e + 0.5, "acc": e + 0.5}) for e in (1, 2, 3)]
    assert reader.assembler.latest["final_accuracy"] == 0.81


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param('{"metric": "loss", "value": 0.3, "step": 10}', {"loss": 0.3}, id="step"),
        pytest.param('{"metric": "acc", "value": "0.9", "step": "7"}', {"acc": 0.9}, id="strings"),
        pytest.param('{"step": 4, "loss": 0.2, "note": "x"}', {"loss": 0.2}, id="flat"),
        pytest.param('{"step": "3", "loss": "0.25"}', {"loss": 0.25}, id="flat-strings"),
        pytest.param(
            '{"step": 3, "train": {"loss": 0.2, "acc": "0.9"}, "val": {"loss": 0.3}}',
            {"train/loss": 0.2, "train/acc": 0.9, "val/loss": 0.3},
            id="nested",
        ),
        pytest.param(
            '{"step": 1, "a": {"b": {"c": {"d": {"e": {"f": 1.0}}}}}, "g": 2}',
            {"g": 2.0},
            id="too-deep-is-data",
        ),
        pytest.param('{"metric": "loss", "value": 0.3, "step": 10', None, id="truncated"),
        pytest.param('{"metric": "loss", "value": null, "step": 1}', None, id="null-value"),
        pytest.param('{"metric": "ok", "value": true}', None, id="bool-value"),
        pytest.param('{"level": "info", "msg": "loaded 3 files"}', None, id="json-log-line"),
        pytest.param("{" * 100_000 + "}", None, id="deep-nesting"),
    ],
)
def test_json_lines(line: str, expected: dict[str, float] | None) -> None:
    assert one(JsonLines(), line) == expected


def test_json_non_finite_values_come_through_as_floats() -> None:
    got = one(JsonLines(), '{"metric": "loss", "value": NaN, "step": 1}')
    assert got is not None
    assert math.isnan(got["loss"])


@pytest.mark.parametrize(
    "line",
    [
        "2024-05-01 12:00:00,123 - root - INFO - starting training",
        "INFO: using device cuda:0",
        "see https://example.org/?a=1&b=2",
        "Epoch 3 starting",
        "x = y",
        "{'lr': 0.1, 'epochs': 3}",
    ],
)
def test_ordinary_log_lines_give_nothing(line: str) -> None:
    assert points_of(line.encode() + b"\n") == []


# ---- the stream normalisation -------------------------------------------------------------------
def test_frames_fold_crlf_even_across_chunks_and_keep_redraws_apart() -> None:
    reader = FrameReader()
    frames = reader.feed(b"a=1\rb=2\r") + reader.feed(b"\nc=3\n") + reader.close()
    assert [(f.text, f.ended) for f in frames] == [("a=1", "\r"), ("b=2", "\n"), ("c=3", "\n")]


def test_frames_resolve_backspaces_and_drop_escape_codes() -> None:
    reader = FrameReader()
    [frame] = reader.feed(b"\x1b[1m2/23\x1b[0m loss: 1.5\b\b\b2.5\x1b]0;title\x07\n")
    assert frame.text == "2/23 loss: 2.5"


def test_a_multibyte_character_split_across_chunks_survives() -> None:
    data = "1/3 ━━━ - loss: 0.5\n".encode()
    cut = data.index("━".encode()) + 1
    reader = FrameReader()
    assert reader.feed(data[:cut]) == []
    assert [f.text for f in reader.feed(data[cut:])] == ["1/3 ━━━ - loss: 0.5"]


def test_a_huge_line_without_end_is_cut_instead_of_growing_forever() -> None:
    reader = FrameReader()
    for _ in range(20):
        reader.feed(b"x" * 100_000)
    assert len(reader._partial) <= 1 << 20


def test_random_bytes_never_crash_the_reader() -> None:
    rng = random.Random(6)
    alphabet = b"{}[]\"':,=-. 0123456789eE\r\n\b\x1b|/naNinfloss acc/Epoch it/s\xe2\x94\x81"
    for _ in range(300):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 400)))
        for step, _, metrics in points_of(data, rng.randrange(1, 50)):
            assert isinstance(step, int)
            assert all(isinstance(v, float) for v in metrics.values())


def _unsure_and_points(stem: str) -> tuple[int, list[Point]]:
    unsure, points = 0, []
    for suffix in ("stdout", "stderr"):
        reader = OutputReader()
        points += reader.feed((scoring.HERE / f"{stem}.{suffix}").read_bytes()) + reader.close()
        unsure += reader.assembler.unsure_steps
    return unsure, points


def _per_step_drawings(stem: str) -> set[tuple[int | None, int]]:
    """(epoch, counter) of each Rich drawing inside its bar whose ``train*`` values changed
    since the drawing before: a step's own values, or the step before's (a lagging draw)."""
    from warehouse.watch.parsers.rich import RichBars

    frames = FrameReader()
    data = (scoring.HERE / f"{stem}.stdout").read_bytes()
    bars, readings = RichBars(), []
    for frame in frames.feed(data) + frames.close():
        got = bars.parse(frame)
        readings += bars.ready() + (got or [])
    readings += bars.close()
    drawn, before = set(), {}
    for r in readings:
        shown = {k: v for k, v in r.texts.items() if k.startswith("train")}
        changed = any(before.get(k) != v for k, v in shown.items())
        before.update(shown)
        if changed and r.counter and r.total and 0 < r.counter < r.total:
            drawn.add((r.epoch, r.counter))
    return drawn


def test_steps_a_lagging_bar_leaves_out_are_counted_never_dropped_silently() -> None:
    """Lightning's Rich bar in a terminal may draw a step's counter with the step before's
    values, so a step drawn once is left out. Rule: every step drawn inside the bar with new
    values is either recorded or counted in ``unsure_steps`` (which ``watch`` reports); and no
    other capture (pipes, other families) counts any."""
    rich_terminal = [s for s in scoring.captures() if s.startswith("lightning") and "rich" in s]
    rich_terminal = [s for s in rich_terminal if "__tty" in s]
    assert len(rich_terminal) >= 8
    counted = 0
    for stem in scoring.captures():
        unsure, points = _unsure_and_points(stem)
        if stem not in rich_terminal:
            assert unsure == 0, stem
            continue
        counted += unsure
        recorded = {
            step
            for step, _, metrics in points
            if any(k.startswith("train") and not k.endswith("epoch") for k in metrics)
        }
        drawn = _per_step_drawings(stem)
        assert unsure + len(recorded) >= len(drawn), (stem, unsure, len(recorded), len(drawn))
    assert counted > 0
