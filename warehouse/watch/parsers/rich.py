"""Rich progress bars as PyTorch Lightning's ``RichProgressBar`` draws them.

A bar row, then the metrics column wrapped onto continuation lines, where a name may sit on
one line and its value on the next (or Rich may cut a long name with ``…``)::

    Epoch 1/2  ━━━━━━━━━━━━━━━━━━━━╸━━━━━━ 12/16 0:00:00 • 0:00:01 255.51it/s v_num: 0.000
                                                                 train_loss_step: 0.428
                                                                 learning_ra…
                                                                 0.010 val_loss: 0.190

In a pipe only the last drawing is printed; in a terminal each drawing follows cursor-up and
erase-line codes. A row ends where the next row (a line starting in the first column) or other
output begins, and is read then, before that output. The metrics column is read as a sequence of
``name:`` and value tokens; a value is taken only when its name is complete, and is dropped when
what follows it could be the rest of it (a number cut by the wrap); a name right after a
fragment may be that fragment's tail, so its value is dropped too.
"""

from __future__ import annotations

import re

from warehouse.watch.parsers.frames import Frame
from warehouse.watch.parsers.reading import NAME, NOT_METRICS, Reading, number
from warehouse.watch.parsers.tqdm import EPOCH_IN_LABEL, bar_key

_ROW = re.compile(
    r"(?P<label>\S.*?)\s+[━╸╺╾╼─]+\s+(?P<n>\d+)/(?P<total>\d+|\?)\s(?P<stats>.*?)"
    r"(?P<rate>[\d.?]+(?:it/s|s/it))\s*"
)
_NAME = re.compile(NAME + r":\Z")
_NUMERIC_START = re.compile(r"[-+\d.]")


def read_metrics(text: str) -> tuple[dict[str, float], dict[str, str]]:
    """The complete ``name: value`` pairs of a metrics column (see the module docstring)."""
    metrics: dict[str, float] = {}
    texts: dict[str, str] = {}
    name: str | None = None
    tainted = False  # the pending name follows a fragment: it may be that fragment's tail
    last: str | None = None  # the pair just read, while the next token may still extend it
    for token in text.split():
        if _NAME.match(token):
            name, tainted, last = token[:-1], tainted, None
            continue
        value = number(token)
        if value is not None and name is not None:
            if not tainted and name not in NOT_METRICS:
                metrics[name], texts[name], last = value, token, name
            name, tainted = None, False
            continue
        # a fragment: a cut name or value, an orphan value, or other text
        if last is not None and _NUMERIC_START.match(token):
            metrics.pop(last, None)  # "0.0" + "05": the value read was cut by the wrap
            texts.pop(last, None)
        tainted = "…" not in token and value is None and not _NUMERIC_START.match(token)
        name, last = None, None
    return metrics, texts


class RichBars:
    """Rich progress rows with their metrics column; a row is read when it ends."""

    family = "rich"

    def __init__(self) -> None:
        self._row: re.Match[str] | None = None
        self._column = 0
        self._lines: list[str] = []
        self._open = False  # lines that follow may continue the row
        self._ended: list[Reading] = []  # the row that the frame just offered ended

    def parse(self, frame: Frame) -> list[Reading] | None:
        text = frame.text
        if self._continues(text):
            self._lines.append(text[self._column :])
            return []
        if self._open:  # other output: the row is over, read before that output
            self._ended = self.close()
        if "/" not in text or ("it/s" not in text and "s/it" not in text):
            return None
        m = _ROW.match(text)
        if m is None:
            return None
        done = self.close()
        self._row, self._column, self._open = m, m.end(), True
        self._lines = [text[m.end() :]]
        return done

    def _continues(self, text: str) -> bool:
        """An indented line of the open row, reaching its metrics column."""
        column = self._column
        return (
            self._open
            and text[:1] == " "
            and len(text) > column
            and (text[column - 1] == " " or not text[:column].strip())
        )

    def ready(self) -> list[Reading]:
        ended, self._ended = self._ended, []
        return ended

    def close(self) -> list[Reading]:
        row, self._row = self._row, None
        self._open = False
        if row is None:
            return []
        metrics, texts = read_metrics("\n".join(self._lines))
        self._lines = []
        label = row.group("label").strip()
        epoch = EPOCH_IN_LABEL.search(label)
        total = row.group("total")
        return [
            Reading(
                self.family,
                metrics,
                epoch=int(epoch.group(1)) if epoch else None,
                bar=bar_key(label, total),
                counter=int(row.group("n")),
                total=int(total) if total.isdigit() else None,
                texts=texts,
            )
        ]


__all__ = ["RichBars", "read_metrics"]
