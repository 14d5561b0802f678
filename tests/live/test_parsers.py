"""Metric lines from real Keras 3 and tqdm runs (fixtures/), FloydHub JSON, odd input."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from warehouse.live.parsers import LineSplitter, MetricEvent, clean_line, parse_line
from warehouse.live.watch import StepAssembler

FIXTURES = Path(__file__).parent / "fixtures"


def events_of(data: bytes, chunk: int | None = None) -> list[MetricEvent]:
    splitter = LineSplitter(candidates_only=True)
    lines: list[str] = []
    step = chunk or len(data) or 1
    for start in range(0, len(data), step):
        lines += splitter.feed(data[start : start + step])
    lines += splitter.close()
    return [e for e in map(parse_line, lines) if e is not None]


def steps_of(data: bytes) -> list[tuple[int, int | None, dict[str, float]]]:
    asm = StepAssembler()
    out = []
    for event in events_of(data):
        out += asm.feed(event)
    return out + asm.flush()


def close_to_printed(printed: float, true: float) -> bool:
    """Keras prints 4 decimals (or 4 significant digits in e-notation below 1e-3)."""
    return math.isclose(printed, true, abs_tol=5.1e-5) or math.isclose(printed, true, rel_tol=1e-3)


@pytest.mark.parametrize("name", ["keras3_verbose1", "keras3_verbose2"])
def test_keras3_epoch_lines_give_the_values_keras_recorded_in_its_history(name: str) -> None:
    history = json.loads((FIXTURES / f"{name}.expected.json").read_text())["history"]
    data = (FIXTURES / f"{name}.stdout").read_bytes()
    epoch_ends = [e for e in events_of(data) if "val_loss" in e.metrics]
    assert len(epoch_ends) == 3
    for epoch, event in enumerate(epoch_ends):
        assert set(event.metrics) == set(history)
        for metric, values in history.items():
            assert close_to_printed(event.metrics[metric], values[epoch]), (metric, epoch)


def test_keras3_progress_bar_becomes_a_global_step_series_over_epochs() -> None:
    data = (FIXTURES / "keras3_verbose1.stdout").read_bytes()
    steps = steps_of(data)
    ends = [s for s in steps if "val_loss" in s[2]]
    assert [(s[0], s[1]) for s in ends] == [(23, 1), (46, 2), (69, 3)]  # 23 batches per epoch
    assert all(1 <= step <= 69 for step, _, _ in steps)
    assert {epoch for _, epoch, _ in steps} == {1, 2, 3}


def test_keras3_verbose1_carries_ansi_colours_backspaces_and_carriage_returns() -> None:
    raw = (FIXTURES / "keras3_verbose1.stdout").read_bytes()
    assert b"\x1b[" in raw
    assert b"\b" in raw
    assert b"\r" in raw
    assert all("\x1b" not in k for e in events_of(raw) for k in e.metrics)


def test_tqdm_postfix_values_match_what_the_loop_set() -> None:
    logged = json.loads((FIXTURES / "tqdm_postfix.expected.json").read_text())["postfix"]
    steps = steps_of((FIXTURES / "tqdm_postfix.stderr").read_bytes())
    by_step = {step: metrics for step, _, metrics in steps}
    assert sorted(by_step) == list(range(81))  # two bars of 40, counted globally
    for step in range(80):
        for name in ("loss", "lr", "acc"):
            # tqdm shows 3 significant digits
            assert by_step[step][name] == pytest.approx(logged[step][name], rel=6e-3, abs=6e-4)
    assert by_step[80]["loss"] == pytest.approx(logged[79]["loss"], rel=6e-3)


def test_tqdm_bar_without_postfix_gives_no_event() -> None:
    assert parse_line("eval: 15it [00:00, 47411.12it/s]") is None
    assert parse_line("epoch 0:   0%|          | 0/40 [00:00<?, ?it/s]") is None


def test_tqdm_unit_scaled_counter_keeps_metrics_without_a_position() -> None:
    event = parse_line("train: 24%|██▍ | 1.20k/5.00k [00:03<00:10, 380it/s, loss=0.25]")
    assert event is not None
    assert event.metrics == {"loss": 0.25}
    assert event.counter is None


def test_floydhub_json_lines_from_a_real_run_give_steps_and_epoch_metrics() -> None:
    truth = json.loads((FIXTURES / "floydhub_json.expected.json").read_text())["epochs"]
    steps = steps_of((FIXTURES / "floydhub_json.stdout").read_bytes())
    assert [s[0] for s in steps] == list(range(1, 17))
    for epoch, row in enumerate(truth, 1):
        step, got_epoch, metrics = steps[epoch * 4 - 1]
        assert (step, got_epoch) == (epoch * 4, epoch)
        assert metrics["accuracy"] == row["accuracy"]
        assert metrics["val_accuracy"] == row["val_accuracy"]
        assert metrics["loss"] == row["last_loss"]


@pytest.mark.parametrize("name", ["keras2_verbose1", "keras2_verbose2"])
def test_keras2_documented_format_gives_the_printed_epoch_values(name: str) -> None:
    expected = json.loads((FIXTURES / "keras2.expected.json").read_text())["epochs"]
    events = [
        e for e in events_of((FIXTURES / f"{name}.stdout").read_bytes()) if "val_acc" in e.metrics
    ]
    assert len(events) == 2
    for event, row in zip(events, expected, strict=True):
        for metric, value in row.items():
            got = event.metrics[metric]
            assert got == value or (math.isnan(got) and name.endswith("2") and metric == "val_loss")


def test_keras2_progress_lines_skip_the_eta_field() -> None:
    event = parse_line("  256/60000 [.....] - ETA: 1:35 - loss: 2.2501 - acc: 0.1562")
    assert event is not None
    assert event.metrics == {"loss": 2.2501, "acc": 0.1562}
    assert (event.counter, event.total) == (256, 60000)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param(
            '{"metric": "loss", "value": 0.3, "step": 10}', ({"loss": 0.3}, 10, None), id="step"
        ),
        pytest.param(
            '{"metric": "acc", "value": 0.9, "epoch": 2}', ({"acc": 0.9}, None, 2), id="epoch"
        ),
        pytest.param(
            '{"metric": "acc", "value": "0.9", "step": "7"}', ({"acc": 0.9}, 7, None), id="strings"
        ),
        pytest.param(
            '{"metric": "loss", "value": 1, "step": 3.0}', ({"loss": 1.0}, 3, None), id="int-float"
        ),
        pytest.param(
            '{"metric": "loss", "value": 0.5}', ({"loss": 0.5}, None, None), id="no-position"
        ),
        pytest.param(
            '{"step": 4, "loss": 0.2, "acc": 0.8, "note": "x"}',
            ({"loss": 0.2, "acc": 0.8}, 4, None),
            id="flat",
        ),
        pytest.param(
            '  {"metric": "loss", "value": 2, "step": 1}  ', ({"loss": 2.0}, 1, None), id="blanks"
        ),
    ],
)
def test_json_metric_line_variants(
    line: str, expected: tuple[dict[str, float], int | None, int | None]
) -> None:
    event = parse_line(line)
    assert event is not None
    assert (event.metrics, event.step, event.epoch) == expected


@pytest.mark.parametrize(
    "line",
    [
        pytest.param('{"metric": "loss", "value": 0.3, "step": 10', id="truncated"),
        pytest.param('{"metric": "loss", "value": null, "step": 1}', id="null-value"),
        pytest.param('{"metric": "loss", "step": 1}', id="no-value"),
        pytest.param('{"metric": "ok", "value": true}', id="bool-value"),
        pytest.param('{"metric": "", "value": 1}', id="empty-name"),
        pytest.param('{"metric": 3, "value": 1}', id="number-name"),
        pytest.param('{"level": "info", "msg": "loaded 3 files"}', id="json-log-line"),
        pytest.param('{"step": 3, "phase": "warmup"}', id="flat-no-numbers"),
        pytest.param("[1, 2, 3]", id="not-an-object"),
        pytest.param("{" * 100_000, id="deep-nesting"),
        pytest.param("{}", id="empty"),
    ],
)
def test_malformed_or_non_metric_json_gives_nothing(line: str) -> None:
    assert parse_line(line) is None


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity"])
def test_json_non_finite_values_come_through_as_floats(text: str) -> None:
    event = parse_line(f'{{"metric": "loss", "value": {text}, "step": 1}}')
    assert event is not None
    assert not math.isfinite(event.metrics["loss"])


def test_keras_nan_loss_comes_through_as_nan() -> None:
    event = parse_line("12/23 ━━━━━━━━━━ 0s 3ms/step - accuracy: 0.1000 - loss: nan")
    assert event is not None
    assert event.metrics["accuracy"] == 0.1
    assert math.isnan(event.metrics["loss"])


@pytest.mark.parametrize(
    "line",
    [
        "2024-05-01 12:00:00,123 - root - INFO - starting training",
        "INFO: using device cuda:0",
        "see https://example.org/?a=1&b=2",
        "Epoch 3 starting",
        "x = y",
        "- note: not a number",
        "",
    ],
)
def test_ordinary_log_lines_give_nothing(line: str) -> None:
    assert parse_line(line) is None


def test_partial_lines_across_chunks_parse_like_whole_output() -> None:
    data = (FIXTURES / "floydhub_json.stdout").read_bytes() + (
        FIXTURES / "keras3_verbose1.stdout"
    ).read_bytes()
    whole = events_of(data)
    for chunk in (1, 7, 64, 4093):
        assert events_of(data, chunk) == whole


def test_carriage_return_updates_are_separate_lines_and_crlf_is_one_end() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"a=1\rb=2\r\nc=3\n") == ["a=1", "b=2", "c=3"]


def test_a_multibyte_character_split_across_chunks_survives() -> None:
    data = "step 1 ━━━ loss=0.5 [x, loss=0.5]\n".encode()
    cut = data.index("━".encode()) + 1
    splitter = LineSplitter()
    assert splitter.feed(data[:cut]) == []
    assert splitter.feed(data[cut:]) == ["step 1 ━━━ loss=0.5 [x, loss=0.5]"]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"\xff\xfe loss=1 \x80\n") == ["\ufffd\ufffd loss=1 \ufffd"]


def test_an_unterminated_line_is_returned_at_close() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"metric": "loss", "value": 1, "step": 1}') == []
    [line] = splitter.close()
    assert parse_line(line) == MetricEvent({"loss": 1.0}, "json", step=1)


def test_a_huge_line_without_end_is_cut_instead_of_growing_forever() -> None:
    splitter = LineSplitter()
    for _ in range(20):
        splitter.feed(b"x" * 100_000)
    assert len(splitter._partial) <= 1 << 20


def test_clean_line_drops_escape_sequences_and_backspaces() -> None:
    assert (
        clean_line("\x1b[1m2/23\x1b[0m \x1b[32m━\x1b[0m\b\b - loss: 1\x1b]0;title\x07")
        == "2/23 ━ - loss: 1"
    )


def test_random_bytes_never_crash_the_parser() -> None:
    rng = random.Random(6)
    alphabet = b'{}[]":,=-. 0123456789eE\r\n\b\x1bnaNinfloss acc/Epoch|it/s'
    for _ in range(300):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 400)))
        for event in events_of(data, rng.randrange(1, 50)):
            assert isinstance(event, MetricEvent)
