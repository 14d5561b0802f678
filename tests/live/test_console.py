"""The console line: formatting (pure) and the rate limit."""

from __future__ import annotations

import io

import pytest

from warehouse.live.console import (
    ConsoleLine,
    eta_seconds,
    format_duration,
    format_line,
    format_step_time,
    format_summary,
    format_value,
)


def test_the_line_reads_like_the_issue_example() -> None:
    line = format_line(
        1200,
        5000,
        {"loss": 0.4312, "lr": 3e-4},
        0.085,
        {"gpu_util_pct": 97.2, "gpu_temperature_c": 71.0},
        323,
    )
    assert (
        line
        == "step 1200/5000 (24%) loss 0.4312 lr 3.0e-04 | 85 ms/step | GPU 97% 71°C | ETA 5m 23s"
    )


def test_without_total_gpu_or_timing_the_line_only_has_what_is_known() -> None:
    assert format_line(7, None, {"loss": 1.5}, None, {"cpu_pct": 10.0}, None) == "step 7 loss 1.5"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(3 * 3600 + 12 * 60 + 5, "3h 12m", id="hours"),
        pytest.param(4 * 60 + 32, "4m 32s", id="minutes"),
        pytest.param(12.3, "12s", id="seconds"),
        pytest.param(0.42, "420ms", id="milliseconds"),
        pytest.param(2 * 86400 + 3 * 3600, "2d 3h", id="days"),
        pytest.param(59.6, "1m 00s", id="rounds-up-to-a-minute"),
        pytest.param(float("nan"), "?", id="unknown"),
    ],
)
def test_durations_adapt_their_unit(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.085, "85 ms/step"),
        (0.0042, "4.2 ms/step"),
        (1.23, "1.2 s/step"),
        (0.00042, "420 µs/step"),
    ],
)
def test_step_times(seconds: float, text: str) -> None:
    assert format_step_time(seconds) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.43121, "0.4312"),
        (3e-4, "3.0e-04"),
        (1234.5, "1234"),
        (123456.0, "123456"),
        (0.0, "0"),
        (float("nan"), "nan"),
        (True, "1"),
        (-2.5, "-2.5"),
    ],
)
def test_metric_values_are_short(value: float, text: str) -> None:
    assert format_value(value) == text


def test_eta_is_remaining_steps_times_step_time() -> None:
    assert eta_seconds(100, 1100, 0.5) == 500.0
    assert eta_seconds(100, None, 0.5) is None
    assert eta_seconds(1100, 1100, 0.5) == 0.0


def test_summary_line_has_steps_wall_time_mean_and_last_metrics() -> None:
    assert format_summary(5000, 425.0, 0.085, {"loss": 0.1234}) == (
        "done: 5000 steps in 7m 05s | 85 ms/step mean | loss 0.1234"
    )


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_in_place_redraws_at_most_twice_a_second() -> None:
    out = _Tty()
    line = ConsoleLine(100, stream=out)
    assert line.update(0.0, 1, {"loss": 1.0}, 0.1, None)
    assert not line.update(0.2, 2, {"loss": 0.9}, 0.1, None)  # rate-limited
    assert line.update(0.6, 3, {"loss": 0.8}, 0.1, None)
    line.summary(3, 1.0, 0.1, {"loss": 0.8})
    text = out.getvalue()
    assert text.count("\r") == 3
    assert text.count("\n") == 1
    assert "step 2/" not in text
    assert text.endswith("done: 3 steps in 1s | 100 ms/step mean | loss 0.8\x1b[K\n")


def test_a_log_file_gets_whole_lines_every_ten_seconds() -> None:
    out = io.StringIO()
    line = ConsoleLine(None, stream=out)
    for t in range(0, 31):
        line.update(float(t), t, {"loss": 1.0}, 1.0, None)
    assert out.getvalue().count("\n") == 4  # t = 0, 10, 20, 30
    assert "\r" not in out.getvalue()


def test_a_closed_stream_does_not_raise() -> None:
    out = io.StringIO()
    line = ConsoleLine(None, stream=out)
    out.close()
    assert line.update(0.0, 1, {}, None, None)
    line.summary(1, 0.0, None, {})
