"""The Hugging Face ``transformers`` Trainer's log lines: Python dicts, one per log call::

    {'loss': '2.287', 'grad_norm': '0.4539', 'learning_rate': '0.0027', 'epoch': '0.2222'}
    {'eval_loss': '2.1', 'eval_accuracy': '0.73', 'eval_runtime': '0.0083', 'epoch': '1'}

Recent versions quote every float (4 significant digits); older ones print bare floats. The
Trainer always adds ``epoch`` (fractional: the position in training), so a dict line without
it is not the Trainer's. The lines carry no step: the k-th log line of the run is step k, and
the fractional epoch is kept as the metric ``epoch``. ``eval_*`` are evaluation metrics.
"""

from __future__ import annotations

import re

from warehouse.watch.parsers.frames import Frame
from warehouse.watch.parsers.reading import NUMBER, LineParser, Reading, number

_ITEM = re.compile(r"'([^'\\]+)': (?:'(" + NUMBER + r")'|(" + NUMBER + r"))(?:, |\}\Z)")


class TransformersLog(LineParser):
    """Trainer log dicts (``'epoch'`` among the keys)."""

    family = "transformers"

    def __init__(self) -> None:
        self.lines = 0

    def parse(self, frame: Frame) -> list[Reading] | None:
        reading = self._read(frame)
        return None if reading is None else [reading]

    def _read(self, frame: Frame) -> Reading | None:
        text = frame.text.strip()
        if not text.startswith("{'") or not text.endswith("}") or "'epoch': " not in text:
            return None
        metrics: dict[str, float] = {}
        texts: dict[str, str] = {}
        pos = 1
        while pos < len(text):
            m = _ITEM.match(text, pos)
            if m is None:
                return None  # not every item a number: not a Trainer log line
            raw = m.group(2) or m.group(3)
            value = number(raw)
            if value is None:
                return None
            metrics[m.group(1)] = value
            texts[m.group(1)] = raw
            pos = m.end()
        if len(metrics) < 2:
            return None
        self.lines += 1
        return Reading(self.family, metrics, step=self.lines, texts=texts)


__all__ = ["TransformersLog"]
