"""What a family parser reads off one frame (or one block of frames): a :class:`Reading`."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Protocol

from warehouse.watch.parsers.frames import Frame

# A number as libraries print it: 0.25, -1e-05, 12, .5, nan, inf (tqdm pads 2.330, Keras nan).
NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|NaN|inf|Inf|-?Infinity)"
_NUMBER_ONLY = re.compile(NUMBER + r"\Z")
NAME = r"[A-Za-z_][\w./@-]*"

# Shown on progress bars but not metrics: Lightning's logger version, Keras' time left.
NOT_METRICS = frozenset({"v_num", "ETA", "eta"})


@dataclass(slots=True)
class Reading:
    """Metrics read off the output, with the position the library printed for them.

    ``step``: a global step the text gives (JSON lines). ``epoch``: an epoch the text gives
    (JSON ``"epoch"``, a Keras ``Epoch 3/10`` header, a bar's ``Epoch 2`` label), as printed.
    Progress bars give ``bar`` (which bar: its label with digits masked, or its total when
    it has no label: :func:`~warehouse.watch.parsers.tqdm.bar_key`),
    ``counter``/``total`` (its position), and ``texts`` (each value as printed, to tell a
    redraw of old values from a new value). ``final``: a final metric of the run, not a step.
    ``header``: a Keras ``Epoch k/n`` line (no metrics, a new epoch begins). ``series``: a
    line with no position that repeats (its template: :mod:`.general`), ``count`` its
    showings so far, ``held`` while it has not yet repeated with other numbers.
    """

    family: str
    metrics: dict[str, float] = field(default_factory=dict)
    step: int | None = None
    epoch: int | None = None
    bar: str | None = None
    counter: int | None = None
    total: int | None = None
    texts: dict[str, str] = field(default_factory=dict)
    final: bool = False
    header: bool = False
    series: str | None = None
    count: int | None = None
    held: bool = False


class FrameParser(Protocol):
    """One family. ``parse``: None when the frame is not this family's (the next parser gets
    it), else the readings it completes (often one; none while a block is still open).
    ``ready``: readings that the frame just offered completed although it was not this
    family's (a block it ended: they come before that frame's own). ``close``: what a block
    still open at the end of the stream held."""

    family: str

    def parse(self, frame: Frame) -> list[Reading] | None: ...

    def ready(self) -> list[Reading]: ...

    def close(self) -> list[Reading]: ...


class LineParser:
    """A family read frame by frame, holding nothing between frames."""

    def ready(self) -> list[Reading]:
        return []

    def close(self) -> list[Reading]:
        return []


def number(text: str) -> float | None:
    """The value of a printed number, or None when ``text`` is not one number."""
    text = text.strip()
    if not _NUMBER_ONLY.match(text):
        return None
    try:
        return float(text)
    except ValueError:  # pragma: no cover - the pattern admits only floats
        return None


def whole(value: object) -> int | None:
    """An integer position (``3``, ``3.0``, ``"3"``), or None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value == int(value) else None
    if isinstance(value, str):
        parsed = number(value)
        return whole(parsed) if parsed is not None else None
    return None


__all__ = [
    "NAME",
    "NOT_METRICS",
    "NUMBER",
    "FrameParser",
    "LineParser",
    "Reading",
    "number",
    "whole",
]
