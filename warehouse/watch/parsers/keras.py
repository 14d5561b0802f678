"""Keras progress and epoch lines: Keras 3, and Keras 2 (tf-keras, standalone Keras 2).

``Epoch 3/10`` headers, then progress frames and the epoch line, metrics as ``- name: value``
segments (names may hold spaces: ``top 2 acc``, ``val_top 2 acc``)::

    12/12 ━━━━━━━━━━━━━━━━━━━━ 0s 5ms/step - accuracy: 0.98 - loss: 0.12 - top 2 acc: 1.0000
    12/12 [==============================] - 1s 15ms/step - loss: 0.8843 - acc: 0.6719
    12/12 - 1s - loss: 0.8843 - acc: 0.6719 - val_loss: 0.2295 - 870ms/epoch - 72ms/step
     - 12s - loss: 0.4097 - acc: 0.8078                     (Keras 2.0, verbose=2)
    Epoch 3/10 - loss: 0.3228 - acc: 0.9727                 (the same, printed by hand)

The counter (batches in this epoch) is the position; ``ETA: 7s`` is not a metric. A line
with no counter is the epoch's: its step is the epoch.
"""

from __future__ import annotations

import re

from warehouse.watch.parsers.frames import Frame
from warehouse.watch.parsers.reading import NOT_METRICS, LineParser, Reading, number

_EPOCH = re.compile(r"\s*Epoch (\d+)/(\d+)\s*\Z")
_EPOCH_LINE = re.compile(r"\s*Epoch (\d+)/(\d+)(?= - )")  # a header with the epoch's metrics
_START = re.compile(
    r"\s*(?:(\d+)/(\d+|Unknown)\b(?=\s+(?:[━─╸=\[-]|\d))|- )"
)  # a bar, a time or " - "
_SEGMENT = re.compile(r"([A-Za-z_][\w./@ -]*?):\s+(\S+)\s*\Z")


class Keras(LineParser):
    """Keras 2 and 3 lines."""

    family = "keras"

    def parse(self, frame: Frame) -> list[Reading] | None:
        text = frame.text
        line = _EPOCH_LINE.match(text)
        if line is not None:  # "Epoch 3/10 - loss: 0.32": the header, then the epoch's line
            epoch_line = self._read(text[line.end() :])
            if epoch_line is None:
                return None
            return [Reading(self.family, epoch=int(line.group(1)), header=True), epoch_line]
        reading = self._read(text)
        return None if reading is None else [reading]

    def _read(self, text: str) -> Reading | None:
        if text.lstrip().startswith("Epoch"):
            m = _EPOCH.match(text)
            if m:
                return Reading(self.family, epoch=int(m.group(1)), header=True)
            return None
        start = _START.match(text)
        if start is None or " - " not in text:
            return None
        metrics: dict[str, float] = {}
        texts: dict[str, str] = {}
        for segment in text.split(" - ")[1:]:
            m = _SEGMENT.match(segment.strip())
            if m is None:
                continue
            name, raw = m.group(1).strip(), m.group(2)
            value = number(raw)
            if value is None or name in NOT_METRICS:
                continue
            metrics[name] = value
            texts[name] = raw
        if not metrics:
            return None
        counter = total = None
        if start.group(1) is not None:
            counter = int(start.group(1))
            total = None if start.group(2) == "Unknown" else int(start.group(2))
        bar = f"keras/{total}"
        return Reading(self.family, metrics, bar=bar, counter=counter, total=total, texts=texts)


__all__ = ["Keras"]
