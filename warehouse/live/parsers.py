"""Metric lines in a training program's output: what ``warehouse watch`` understands.

Three families, as printed by real programs (fixtures recorded from real runs live in
``tests/live/fixtures``):

- FloydHub JSON lines, one metric per line: ``{"metric": "loss", "value": 0.3, "step": 10}``
  (or ``"epoch": 2`` instead of ``"step"``); also one flat object per step,
  ``{"step": 10, "loss": 0.3, "acc": 0.9}``.
- Keras progress and epoch lines: Keras 2 (``60000/60000 [====] - 1s - loss: 0.4097 - acc:
  0.8078 - val_loss: ...``) and Keras 3 (``23/23 ━━━━ 1s 12ms/step - accuracy: 0.8 - loss:
  0.45 - val_accuracy: ...``, with its ANSI colours, ``\\b`` and ``\\r`` redraws), and the
  ``Epoch 3/10`` headers.
- tqdm bars with a postfix: ``epoch 0:  50%|█████     | 20/40 [00:01<00:01, 20.0it/s,
  loss=0.123, lr=0.001]``.

:class:`LineSplitter` turns raw pipe bytes into lines (``\\n`` and ``\\r`` both end a line;
partial lines wait for their end; invalid UTF-8 is replaced). :func:`parse_line` turns one
line into a :class:`MetricEvent` or ``None``. Nothing here raises on odd input: malformed JSON,
non-metric lines and NaN values are all answers, never crashes. NaN/inf are returned as
floats; what to do with them is the caller's policy.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

# CSI (colours, cursor moves) and OSC (titles, hyperlinks) escape sequences.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|NaN|NAN|inf|Inf|INF)"
_KERAS_PAIR = re.compile(r"(?:^|\s)-\s+([A-Za-z_][\w./@-]*):\s+(" + _NUMBER + r")(?=\s|$)")
_KERAS_COUNTER = re.compile(r"^\s*(\d+)/(\d+|Unknown)\b")
_KERAS_EPOCH = re.compile(r"^\s*Epoch\s+(\d+)/(\d+)\s*$")
_TQDM_TAIL = re.compile(r"\[(?P<inside>[^\[\]]*)\]\s*$")
_TQDM_COUNTER = re.compile(r"(?<![\d.])(?P<n>\d+)(?:/(?P<total>\d+))?(?:[A-Za-z]+)?\s*$")
_TQDM_PAIR = re.compile(r"([A-Za-z_][\w./@-]*)=\s*(" + _NUMBER + r")\s*(?=,|$)")
_NOT_METRICS = frozenset({"ETA", "eta"})
_loads = json.JSONDecoder().decode
_MAX_PARTIAL = 1 << 20  # a "line" longer than 1 MiB without an end is cut
# What a line holding metrics must contain, as patterns with a literal head so that the regex
# engine skips through a chunk at memchr speed: JSON, "- name: number" (Keras), "=number"
# (tqdm postfix), "Epoch k/n". Plain log lines ("step 5: loading ...") match none.
_CANDIDATES = tuple(
    re.compile(p)
    for p in (
        rb"\{",
        rb"- [A-Za-z_][\w./@-]*: [-+.\dnNiI]",
        rb"=[-+.\dnNiI]",
        rb"Epoch \d",
    )
)


@dataclass(slots=True)
class MetricEvent:
    """Metrics found on one line, with whatever position the line gives.

    ``step``: an explicit global step (JSON lines). ``counter``/``total``: a progress bar's
    position (Keras batches, tqdm iterations), restarting with each bar. ``epoch``: given by
    the line (JSON ``"epoch"``, a Keras ``Epoch 3/10`` header). An epoch header has no metrics
    and ``epochs`` set to the number of epochs.
    """

    metrics: dict[str, float] = field(default_factory=dict)
    source: str = "json"  # "json" | "keras" | "tqdm"
    step: int | None = None
    epoch: int | None = None
    epochs: int | None = None
    counter: int | None = None
    total: int | None = None

    @property
    def is_epoch_header(self) -> bool:
        return self.epochs is not None and not self.metrics


class LineSplitter:
    """Raw pipe bytes in, complete lines out; ``\\r`` redraws and ``\\b`` erasures handled.

    Works on bytes so that a chunk of 100k plain log lines costs a few C-level scans: with
    ``candidates_only`` (what ``watch`` uses) only lines that :func:`might_hold_metrics` are
    decoded and returned. ``\\n`` and ``\\r`` never occur inside a UTF-8 sequence, so
    splitting bytes on them is safe; each line is decoded on its own, invalid bytes replaced.
    """

    def __init__(self, candidates_only: bool = False) -> None:
        self.candidates_only = candidates_only
        self._partial = b""

    def feed(self, data: bytes) -> list[str]:
        """The lines completed by ``data`` (without their terminators, cleaned, non-empty)."""
        if self._partial:
            data = self._partial + data
        end = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if end < 0:
            self._partial = data if len(data) <= _MAX_PARTIAL else b""
            if len(data) > _MAX_PARTIAL:  # no line end in sight: treat what we have as a line
                return self._lines(data)
            return []
        self._partial = data[end + 1 :]
        return self._lines(data[:end])

    def close(self) -> list[str]:
        """The last, unterminated line, if any."""
        data, self._partial = self._partial, b""
        return self._lines(data) if data else []

    def _lines(self, block: bytes) -> list[str]:
        if b"\r" in block:
            block = block.replace(b"\r", b"\n")
        raw = _candidate_lines(block) if self.candidates_only else block.split(b"\n")
        out = []
        for item in raw:
            line = clean_line(item.decode("utf-8", "replace"))
            if line:
                out.append(line)
        return out


def _candidate_lines(block: bytes) -> list[bytes]:
    """The lines of ``block`` (``\\n``-separated) that contain a candidate pattern, in order."""
    starts: set[int] = set()
    for pattern in _CANDIDATES:
        pos = 0
        search = pattern.search
        while True:
            m = search(block, pos)
            if m is None:
                break
            start = block.rfind(b"\n", 0, m.start()) + 1
            starts.add(start)
            end = block.find(b"\n", m.end())
            if end < 0:
                break
            pos = end + 1
    lines = []
    for start in sorted(starts):
        end = block.find(b"\n", start)
        lines.append(block[start:] if end < 0 else block[start:end])
    return lines


def clean_line(line: str) -> str:
    """A line without escape sequences, backspaces or surrounding blanks."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "\b" in line:
        line = line.replace("\b", "")
    return line.strip()


def might_hold_metrics(line: bytes) -> bool:
    """A cheap pre-filter on raw bytes: False means :func:`parse_line` would find nothing."""
    return any(p.search(line) for p in _CANDIDATES)


def parse_line(line: str) -> MetricEvent | None:
    """The metrics on one cleaned line, or None when it holds none. Never raises."""
    try:
        return _parse(line)
    except (ValueError, TypeError, RecursionError, OverflowError):  # pragma: no cover - defensive
        return None


def _parse(line: str) -> MetricEvent | None:
    text = line.strip()
    if not text:
        return None
    if text[0] == "{":
        return _parse_json(text)
    if "Epoch" in text:
        m = _KERAS_EPOCH.match(text)
        if m:
            epoch, epochs = int(m.group(1)), int(m.group(2))
            return MetricEvent(source="keras", epoch=epoch, epochs=epochs)
    if " - " in text and ": " in text:
        event = _parse_keras(text)
        if event is not None:
            return event
    if "=" in text and text.endswith("]"):
        return _parse_tqdm(text)
    return None


def _number(value: Any) -> float | None:
    """A metric value as float (NaN/inf kept), or None when it is not a number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _whole(value: Any) -> int | None:
    if value is None:
        return None
    if type(value) is int:
        return value
    number = _number(value)
    if number is None or not math.isfinite(number) or number != int(number):
        return None
    return int(number)


def _parse_json(text: str) -> MetricEvent | None:
    try:
        obj = _loads(text)
    except (ValueError, RecursionError):
        return None
    if type(obj) is not dict:
        return None
    step = _whole(obj.get("step"))
    epoch = _whole(obj.get("epoch"))
    name = obj.get("metric")
    if name is not None and "value" in obj:  # FloydHub: one metric per line
        raw = obj["value"]
        value = float(raw) if type(raw) is float or type(raw) is int else _number(raw)
        if not isinstance(name, str) or not name.strip() or value is None:
            return None
        return MetricEvent({name.strip(): value}, "json", step=step, epoch=epoch)
    if step is None and epoch is None:
        return None  # any JSON log line: metrics need a position
    metrics: dict[str, float] = {}
    for key, raw in obj.items():
        if key in ("step", "epoch") or not isinstance(key, str) or isinstance(raw, str):
            continue
        value = _number(raw)
        if value is not None:
            metrics[key] = value
    if not metrics:
        return None
    return MetricEvent(metrics, "json", step=step, epoch=epoch)


def _parse_keras(text: str) -> MetricEvent | None:
    metrics: dict[str, float] = {}
    for name, raw in _KERAS_PAIR.findall(text):
        if name in _NOT_METRICS:
            continue
        metrics[name] = float(raw)
    if not metrics:
        return None
    counter = total = None
    m = _KERAS_COUNTER.match(text)
    if m:
        counter = int(m.group(1))
        total = None if m.group(2) == "Unknown" else int(m.group(2))
    return MetricEvent(metrics, "keras", counter=counter, total=total)


def _parse_tqdm(text: str) -> MetricEvent | None:
    m = _TQDM_TAIL.search(text)
    if m is None:
        return None
    inside = m.group("inside")
    # "00:01<00:02, 20.0it/s, loss=0.1, acc=0.9": the postfix follows the elapsed/rate fields
    metrics = {name: float(raw) for name, raw in _TQDM_PAIR.findall(inside)}
    if not metrics:
        return None
    c = _TQDM_COUNTER.search(text, 0, m.start())
    if c is None:  # unit-scaled counters ("1.20k/5.00k") give no position
        return MetricEvent(metrics, "tqdm")
    total = c.group("total")
    return MetricEvent(
        metrics, "tqdm", counter=int(c.group("n")), total=int(total) if total else None
    )


__all__ = ["LineSplitter", "MetricEvent", "clean_line", "might_hold_metrics", "parse_line"]
