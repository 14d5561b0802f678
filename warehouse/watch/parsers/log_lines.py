"""Log lines that name their step and carry ``name=value`` pairs, as loops print them by hand::

    INFO:root:step 5 loss=1.7650 acc=0.5614
    epoch 0: {'accuracy': 0.796875, 'f1': 0.7796610169491526}
    2026-11-24 19:50:13,669 INFO train: step=5 loss=1.7650 acc=0.5614
    epoch=2 global_step=120 loss=0.31 lr=3e-4

A line is read when it names its step (``step``, ``global_step``, ``iteration`` or ``iter``, as
``step=5``, ``step: 5`` or ``step 5``) or its epoch (``epoch=3``, same spellings) and holds at
least one ``name=value`` pair with a number after it, or a dict of them, as Hugging Face's
accelerate examples print (``epoch 0: {'accuracy': 0.81, 'f1': 0.77}``). The step is as printed;
a line with an epoch alone (``epoch=3 val_loss=0.66``) attaches to the last step, as JSON lines
do. A line with neither is not read: a config print (``lr=0.001 batch_size=32``) is no point of
the run. Pairs only: ``loss: 0.3`` is Keras' form, read by :mod:`.keras`.
"""

from __future__ import annotations

import re

from warehouse.watch.parsers.frames import Frame
from warehouse.watch.parsers.reading import NAME, NOT_METRICS, NUMBER, LineParser, Reading, number

_KEY = r"(?<![\w./@-]){}(?:\s*[=:]\s*|\s+)(\d+)(?![\w.])"
_STEP = re.compile(_KEY.format("(?:global_step|step|iteration|iter)"))
_EPOCH = re.compile(_KEY.format("epoch"))
_PAIR = re.compile(
    r"(?<![\w./@=-])(" + NAME + r")=(" + NUMBER + r")(?=[\s,;|)\]]|\Z)"  # loss=0.12
    r"|(?<=[{,\s])(['\"])(" + NAME + r")\3: (" + NUMBER + r")(?=[,}])"  # {'accuracy': 0.81}
)
_POSITIONS = frozenset({"global_step", "step", "iteration", "iter", "epoch"})


class LogLines(LineParser):
    """``step=5 loss=0.12`` log lines (see the module docstring)."""

    family = "log"

    def parse(self, frame: Frame) -> list[Reading] | None:
        text = frame.text
        if "=" not in text and ": " not in text:
            return None
        step, epoch = _STEP.search(text), _EPOCH.search(text)
        if step is None and epoch is None:
            return None
        metrics: dict[str, float] = {}
        texts: dict[str, str] = {}
        for m in _PAIR.finditer(text):
            name, raw = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(5))
            value = number(raw)
            if value is None or name in _POSITIONS or name in NOT_METRICS:
                continue
            metrics[name], texts[name] = value, raw
        if not metrics:
            return None
        return [
            Reading(
                self.family,
                metrics,
                step=int(step.group(1)) if step else None,
                epoch=int(epoch.group(1)) if epoch else None,
                texts=texts,
            )
        ]


__all__ = ["LogLines"]
