"""The results table PyTorch Lightning prints after ``trainer.test`` and ``trainer.validate``.

With Rich installed it is a Rich table; without, plain centred columns between rules::

    ┏━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
    ┃        Test metric        ┃       DataLoader 0        ┃
    ┡━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
    │         test_acc          │           0.75            │
    └───────────────────────────┴───────────────────────────┘

           Test metric             DataLoader 0
    ────────────────────────────────────────────────
            test_acc                   0.75

Each row is a final metric of the run (the table has no step; Lightning prints the values in
full). With several dataloaders the table drops Lightning's ``/dataloader_idx_N`` suffix and
gives each its column: the name gets the suffix back. A row whose name or value goes on on
the next line (a cell wider than its column, in a narrow terminal) is skipped, and so is a
plain-table row whose empty cells make its columns ambiguous.
"""

from __future__ import annotations

import re

from warehouse.watch.parsers.frames import Frame
from warehouse.watch.parsers.reading import NAME, Reading, number

_HEADER = re.compile(r"[\s┃│|]*(?:Test|Validate|Validation|Predict) metric\b(?P<columns>.*)")
_COLUMN = re.compile(r"DataLoader \d+")
_NAME_ONLY = re.compile(NAME + r"\Z")
_BOX = "│┃|"


class ResultsTable:
    """Lightning's test/validate results table: its rows become final metrics."""

    family = "lightning_table"

    def __init__(self) -> None:
        self._columns = 0  # DataLoader columns of the open table (0: no table open)
        self._rows: list[list[str]] = []

    def parse(self, frame: Frame) -> list[Reading] | None:
        text = frame.text.strip()
        header = _HEADER.fullmatch(text)
        if header is not None:
            done = self.close()
            self._columns = len(_COLUMN.findall(header.group("columns"))) or 1
            return done
        if not self._columns:
            return None
        if not any(c.isalnum() for c in text):  # a rule: before the rows, or the end
            return self.close() if self._rows else []
        boxed = text[:1] in _BOX
        cells = [c.strip() for c in text.strip(_BOX).split(text[0])] if boxed else text.split()
        if boxed and len(cells) != self._columns + 1:
            return self.close() or None
        if not boxed and len(cells) != self._columns + 1:
            if len(cells) == 1 and self._rows:  # a long name going on: the row before is cut
                self._rows[-1] = []
                return []
            self._rows.append([])  # empty cells or a list value: the columns are unclear
            return []
        if boxed and (not cells[0] or not any(cells[1:])):  # a wrapped cell's next line
            if self._rows:
                self._rows[-1] = []  # the row before was cut: skipped, never guessed
            return []
        self._rows.append(cells)
        return []

    def close(self) -> list[Reading]:
        rows, columns = self._rows, self._columns
        self._rows, self._columns = [], 0
        metrics: dict[str, float] = {}
        texts: dict[str, str] = {}
        for row in rows:
            if not row or not _NAME_ONLY.match(row[0]):
                continue
            for index, cell in enumerate(row[1:]):
                value = number(cell) if cell else None
                if value is None:
                    continue
                name = row[0] if columns == 1 else f"{row[0]}/dataloader_idx_{index}"
                metrics[name], texts[name] = value, cell
        if not metrics:
            return []
        return [Reading(self.family, metrics, final=True, texts=texts)]


__all__ = ["ResultsTable"]
