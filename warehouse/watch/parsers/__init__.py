"""What ``warehouse watch`` reads in a training program's output, one family per module.

:class:`OutputReader` takes one output stream's raw bytes (in chunks of any size) and gives
points ``(step, epoch, metrics)``. The bytes are normalised once into frames
(:mod:`.frames`: ``\\r`` redraws, ``\\b`` erasures, ANSI codes, ``\\r\\n``), each frame goes to
the family parsers in turn (:class:`.reading.FrameParser`), and their readings become points
(:mod:`.points`, with :mod:`.bars` for progress bars). Families:

- :mod:`.json_lines` — ``{"metric": "loss", "value": 0.3, "step": 10}`` and flat objects;
- :mod:`.keras` — Keras 2 and 3 progress and epoch lines;
- :mod:`.tqdm` — tqdm postfixes (plain, nested, clipped; Lightning's tqdm bar);
- :mod:`.rich` — Rich bars (Lightning's ``RichProgressBar``), wrapped metrics;
- :mod:`.transformers` — the Hugging Face Trainer's log dicts;
- :mod:`.results_table` — Lightning's test/validate results table (final metrics);
- :mod:`.general` — the general reader, last: any line naming its step or epoch
  (``step=5 loss=0.12``, ``[10]\tvalid_0's l2: 0.5``), tables of numbers, and lines that repeat
  with other numbers.

Values the text does not carry completely are skipped, never guessed. Nothing here raises on
odd input.
"""

from __future__ import annotations

from warehouse.watch.parsers.frames import Frame, FrameReader
from warehouse.watch.parsers.general import GeneralLines
from warehouse.watch.parsers.json_lines import JsonLines
from warehouse.watch.parsers.keras import Keras
from warehouse.watch.parsers.points import SPLITS, Assembler, Point, split_metrics
from warehouse.watch.parsers.reading import FrameParser, Reading
from warehouse.watch.parsers.results_table import ResultsTable
from warehouse.watch.parsers.rich import RichBars
from warehouse.watch.parsers.tqdm import Tqdm
from warehouse.watch.parsers.transformers import TransformersLog

FORMATS = (
    'JSON metric lines ({"metric": "loss", "value": 0.3, "step": 10}), Keras 2/3 progress '
    "and epoch lines, tqdm postfixes (loss=0.12), Lightning's tqdm and Rich bars and its "
    "test/validate results table, the transformers Trainer's log dicts, lines naming their "
    "step or epoch ([10] valid_0's l2: 0.5, step=5 loss=0.12, Epoch 3/10: acc=0.9), tables "
    "of numbers under a header, and lines that repeat with other numbers"
)


def frame_parsers() -> list[FrameParser]:
    """One parser per family, Rich first (it must see every frame to know where a row ends)."""
    return [
        RichBars(),
        ResultsTable(),
        JsonLines(),
        TransformersLog(),
        Keras(),
        Tqdm(),
        GeneralLines(),
    ]


class OutputReader:
    """One output stream: raw bytes in, points out; ``assembler.latest`` holds last values."""

    def __init__(self) -> None:
        self.frames = FrameReader()
        self.parsers = frame_parsers()
        self.assembler = Assembler()
        self.readings = 0

    def feed(self, data: bytes) -> list[Point]:
        """The points completed by ``data``."""
        return self.read(self.frames.feed(data))

    def close(self) -> list[Point]:
        """The rest, at the end of the stream."""
        out = self.read(self.frames.close())
        for parser in self.parsers:
            out += self._assemble(parser.close())
        return out + self.assembler.flush()

    def read(self, frames: list[Frame]) -> list[Point]:
        """The points completed by these frames."""
        out: list[Point] = []
        for frame in frames:
            for parser in self.parsers:
                readings = parser.parse(frame)
                out += self._assemble(parser.ready())  # a block this frame ended, first
                if readings is not None:
                    out += self._assemble(readings)
                    break
        return out

    def _assemble(self, readings: list[Reading]) -> list[Point]:
        out: list[Point] = []
        for reading in readings:
            self.readings += 1
            out += self.assembler.feed(reading)
        return out


__all__ = [
    "FORMATS",
    "SPLITS",
    "Assembler",
    "Frame",
    "FrameParser",
    "FrameReader",
    "OutputReader",
    "Point",
    "Reading",
    "frame_parsers",
    "split_metrics",
]
