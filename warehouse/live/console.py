"""The live console line on stderr while a run trains, and its closing summary.

    step 1200/5000 (24%) loss 0.4312 lr 3.0e-04 | 85 ms/step | GPU 97% 71°C | ETA 5m 23s
    done: 5000 steps in 7m 05s | 85 ms/step mean | loss 0.1234 lr 3.0e-04

The formatting functions are pure (and unit-tested); :class:`ConsoleLine` adds the rate limit
and the terminal handling: on a terminal the line is redrawn in place at most twice a second
(so a slow run gets one redraw per step); when stderr is a file or a pipe, a new line is
written at most every 10 seconds, so logs stay readable. The owner (the step logger's flush
thread) calls it; nothing here touches the training thread.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any, TextIO

TTY_INTERVAL_S = 0.5
LOG_INTERVAL_S = 10.0
MAX_METRICS = 8  # a line stays one line; the rest is in the step index


def format_duration(seconds: float) -> str:
    """A duration whose unit adapts: ``2d 3h``, ``3h 12m``, ``4m 32s``, ``12s``, ``420ms``."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    whole = int(seconds + 0.5)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def format_step_time(seconds: float) -> str:
    """Time per step: ``85 ms/step``, ``1.2 s/step``, ``420 µs/step``."""
    if not math.isfinite(seconds) or seconds < 0:
        return "? /step"
    if seconds >= 1:
        return f"{seconds:.1f} s/step" if seconds < 100 else f"{seconds:.0f} s/step"
    if seconds >= 1e-3:
        ms = seconds * 1000
        return f"{ms:.0f} ms/step" if ms >= 10 else f"{ms:.1f} ms/step"
    return f"{seconds * 1e6:.0f} µs/step"


def format_value(value: float) -> str:
    """A metric value, short: ``0.4312``, ``3.0e-04``, ``1235``, ``123456``."""
    if isinstance(value, bool):
        return str(int(value))
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    size = abs(value)
    if size < 1e-3:
        return f"{value:.1e}"
    if size < 1e4:
        return f"{value:.4g}"
    if size < 1e9:
        return f"{value:.0f}"
    return f"{value:.3e}"


def format_metrics(metrics: Mapping[str, float], limit: int = MAX_METRICS) -> str:
    """``loss 0.4312 lr 3.0e-04`` (at most ``limit`` metrics, in the order given)."""
    parts = [f"{name} {format_value(v)}" for name, v in list(metrics.items())[:limit]]
    return " ".join(parts)


def format_line(
    step: int,
    total: int | None,
    metrics: Mapping[str, float],
    step_time_s: float | None = None,
    system: Mapping[str, Any] | None = None,
    eta_s: float | None = None,
) -> str:
    """The live line: step[/total (pct)], metrics | step time | GPU util temp | ETA."""
    head = f"step {step}"
    if total:
        head += f"/{total} ({min(100, max(0, int(100 * step / total)))}%)"
    text = f"{head} {format_metrics(metrics)}".rstrip()
    sections = [text]
    if step_time_s is not None:
        sections.append(format_step_time(step_time_s))
    if system:
        gpu = []
        if "gpu_util_pct" in system:
            gpu.append(f"{system['gpu_util_pct']:.0f}%")
        if "gpu_temperature_c" in system:
            gpu.append(f"{system['gpu_temperature_c']:.0f}°C")
        if gpu:
            sections.append("GPU " + " ".join(gpu))
    if eta_s is not None:
        sections.append(f"ETA {format_duration(eta_s)}")
    return " | ".join(sections)


def format_summary(
    steps: int, wall_s: float, mean_step_s: float | None, metrics: Mapping[str, float]
) -> str:
    """The closing line: steps, wall time, mean step time, last metrics."""
    sections = [f"done: {steps} step{'s' if steps != 1 else ''} in {format_duration(wall_s)}"]
    if mean_step_s is not None:
        sections.append(f"{format_step_time(mean_step_s)} mean")
    if metrics:
        sections.append(format_metrics(metrics))
    return " | ".join(sections)


def eta_seconds(step: int, total: int | None, step_time_s: float | None) -> float | None:
    """Seconds left at ``step_time_s`` per step, or None when it cannot be told."""
    if not total or step_time_s is None or step >= total:
        return None if not total or step_time_s is None else 0.0
    return (total - step) * step_time_s


class ConsoleLine:
    """Writes the live line to a stream (stderr by default), rate-limited."""

    def __init__(
        self,
        total_steps: int | None = None,
        stream: TextIO | None = None,
        min_interval_s: float | None = None,
    ) -> None:
        self.total = total_steps
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        try:
            self.tty = bool(isatty and isatty())
        except (OSError, ValueError):
            self.tty = False
        if min_interval_s is None:
            min_interval_s = TTY_INTERVAL_S if self.tty else LOG_INTERVAL_S
        self.min_interval_s = min_interval_s
        self._last_at = -math.inf
        self._drawn = False

    def update(
        self,
        now: float,
        step: int,
        metrics: Mapping[str, float],
        step_time_s: float | None,
        system: Mapping[str, Any] | None,
        *,
        force: bool = False,
    ) -> bool:
        """Show the line if the rate limit allows (or ``force``); True if it was written."""
        if not force and now - self._last_at < self.min_interval_s:
            return False
        self._last_at = now
        eta = eta_seconds(step, self.total, step_time_s)
        line = format_line(step, self.total, metrics, step_time_s, system, eta)
        self._write(f"\r{line}\x1b[K" if self.tty else f"{line}\n")
        self._drawn = self.tty
        return True

    def summary(
        self, steps: int, wall_s: float, mean_step_s: float | None, metrics: Mapping[str, float]
    ) -> None:
        """The final line (ends the redrawn line first on a terminal)."""
        text = format_summary(steps, wall_s, mean_step_s, metrics)
        self._write(f"\r{text}\x1b[K\n" if self._drawn else f"{text}\n")
        self._drawn = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # closed or broken stderr: the run goes on without it
            pass


__all__ = [
    "ConsoleLine",
    "eta_seconds",
    "format_duration",
    "format_line",
    "format_metrics",
    "format_step_time",
    "format_summary",
    "format_value",
]
