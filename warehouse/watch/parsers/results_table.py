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
gives each its column (``DataLoader N``; a narrow terminal gets one table per dataloader,
printed one after the other): the name gets the suffix back. So a one-column ``DataLoader 0``
table is held until the next frame says whether a ``DataLoader 1`` table follows. A row whose
name or value goes on on the next line (a cell wider than its column, in a narrow terminal) is
skipped, and so is a plain-table row whose empty cells make its columns ambiguous.
"""

from __future__ import annotations

import re

from warehouse.watch.parsers.frames import Frame
from warehouse.watch.parsers.reading import NAME, Reading, number

_HEADER = re.compile(r"[\s┃│|]*(?:Test|Validate|Validation|Predict) metric\b(?P<columns>.*)")
_COLUMN = re.compile(r"DataLoader (\d+)")
_NAME_ONLY = re.compile(NAME + r"\Z")
_BOX = "│┃|"


class ResultsTable:
    """Lightning's test/validate results table: its rows become final metrics."""

    family = "lightning_table"

    def __init__(self) -> None:
        self._columns = 0  # DataLoader columns of the open table (0: no table open)
        self._loaders: list[int] = []  # their numbers
        self._rows: list[list[str]] = []
        self._held: list[Reading] = []  # a DataLoader 0 table: are there more dataloaders?
        self._ready: list[Reading] = []

    def parse(self, frame: Frame) -> list[Reading] | None:
        text = frame.text.strip()
        header = _HEADER.fullmatch(text)
        if header is not None:
            done = self._end_table()
            loaders = [int(n) for n in _COLUMN.findall(header.group("columns"))] or [0]
            if loaders[0] > 0:  # the next dataloaders' table: the one held was DataLoader 0's
                done += [_suffixed(r, 0) for r in self._held]
            else:
                done += self._held
            self._held = []
            self._columns, self._loaders = len(loaders), loaders
            return done
        if not self._columns:
            if any(c.isalnum() for c in text):  # not the next table (nor its top rule)
                self._ready = self._release()  # so DataLoader 0 was the only one
            return None
        if not any(c.isalnum() for c in text):  # a rule: before the rows, or the end
            return self._end_table() if self._rows else []
        boxed = text[:1] in _BOX
        cells = [c.strip() for c in text.strip(_BOX).split(text[0])] if boxed else text.split()
        if boxed and len(cells) != self._columns + 1:
            return self._end_table() or None
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

    def ready(self) -> list[Reading]:
        ready, self._ready = self._ready, []
        return ready

    def close(self) -> list[Reading]:
        return self._end_table() + self._release()

    def _release(self) -> list[Reading]:
        held, self._held = self._held, []
        return held

    def _end_table(self) -> list[Reading]:
        rows, loaders = self._rows, self._loaders
        self._rows, self._columns, self._loaders = [], 0, []
        metrics: dict[str, float] = {}
        texts: dict[str, str] = {}
        for row in rows:
            if not row or not _NAME_ONLY.match(row[0]):
                continue
            for loader, cell in zip(loaders, row[1:], strict=False):
                value = number(cell) if cell else None
                if value is None:
                    continue
                name = row[0] if loaders == [0] else f"{row[0]}/dataloader_idx_{loader}"
                metrics[name], texts[name] = value, cell
        if not metrics:
            return []
        reading = Reading(self.family, metrics, final=True, texts=texts)
        if loaders == [0]:  # DataLoader 0 alone: held until the next frame says if it is alone
            self._held = [reading]
            return []
        return [reading]


def _suffixed(reading: Reading, loader: int) -> Reading:
    """A held one-column table's reading, named as one dataloader among several."""
    rename = {name: f"{name}/dataloader_idx_{loader}" for name in reading.metrics}
    reading.metrics = {rename[k]: v for k, v in reading.metrics.items()}
    reading.texts = {rename[k]: v for k, v in reading.texts.items()}
    return reading


__all__ = ["ResultsTable"]
