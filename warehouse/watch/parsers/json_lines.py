"""JSON metric lines (FloydHub style), one object per line.

- one metric per line: ``{"metric": "loss", "value": 0.3, "step": 10}``, or ``"epoch": 2``
  instead of ``"step"``; with neither it is a final metric of the run
  (``{"metric": "final_accuracy", "value": 0.81}``);
- one object per step: ``{"step": 10, "loss": 0.3, "acc": 0.9}`` (or ``"epoch"``); an object
  with no position is an ordinary JSON log line, not metrics. Nested objects are read with
  their path: ``{"step": 3, "train": {"loss": 0.2}}`` gives ``train/loss`` (the W&B and
  TensorBoard way of naming a group).

Values (and positions) may be numbers or numeric strings (``{"step": "3", "loss": "0.25"}``);
other strings are not metrics. NaN/Infinity come through as floats.
"""

from __future__ import annotations

import json
from typing import Any

from warehouse.watch.parsers.frames import Frame
from warehouse.watch.parsers.reading import LineParser, Reading, number, whole

_loads = json.JSONDecoder().decode


def _value(raw: Any) -> float | None:
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, int | float):
        return float(raw)
    return number(raw) if isinstance(raw, str) else None


_NESTING = 4  # deeper objects are data, not a metric's group


def _collect(obj: dict[str, Any], prefix: str, into: dict[str, float], depth: int) -> None:
    """The numeric leaves of ``obj`` (positions left out at the top), named by their path."""
    for key, raw in obj.items():
        if not prefix and key in ("step", "epoch"):
            continue
        name = f"{prefix}{key}"
        if type(raw) is dict:
            if depth < _NESTING:
                _collect(raw, f"{name}/", into, depth + 1)
            continue
        value = _value(raw)
        if value is not None:
            into[name] = value


class JsonLines(LineParser):
    """A frame holding one JSON object of metrics."""

    family = "json"

    def parse(self, frame: Frame) -> list[Reading] | None:
        reading = self._read(frame)
        return None if reading is None else [reading]

    def _read(self, frame: Frame) -> Reading | None:
        text = frame.text.strip()
        if not text.startswith("{") or not text.endswith("}") or '"' not in text:
            return None
        try:
            obj = _loads(text)
        except (ValueError, RecursionError):
            return None
        if type(obj) is not dict:
            return None
        step, epoch = whole(obj.get("step")), whole(obj.get("epoch"))
        name = obj.get("metric")
        if name is not None and "value" in obj:
            value = _value(obj["value"])
            if not isinstance(name, str) or not name.strip() or value is None:
                return None
            final = step is None and epoch is None
            return Reading(self.family, {name.strip(): value}, step, epoch, final=final)
        if step is None and epoch is None:
            return None
        metrics: dict[str, float] = {}
        _collect(obj, "", metrics, depth=0)
        return Reading(self.family, metrics, step, epoch) if metrics else None


__all__ = ["JsonLines"]
