"""A program's raw output bytes, normalised once into frames of text.

A *frame* is what one draw of the program left on a line: text ended by ``\\n`` (a finished
line) or by ``\\r`` (a progress bar about to redraw itself). ``\\r\\n`` is one line end, runs
of ``\\r`` are one, ``\\b`` moves the cursor back so later text overwrites (Keras erases its
bar with backspaces), ANSI escape sequences (colours, cursor moves, erase-line) are removed,
and invalid UTF-8 is replaced. The frames do not depend on how the bytes were cut into
chunks: a chunk ending inside a line (or between ``\\r`` and ``\\n``) waits for the rest.

A frame also says whether a cursor-up code preceded it (``redraw``): a multi-line display
(Rich, nested tqdm bars) is drawing over lines it drew before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# CSI (colours, cursor moves, erase) and OSC (titles, hyperlinks) sequences, and 2-byte escapes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CURSOR_UP = re.compile(r"\x1b\[\d*A")
_ENDS = re.compile(rb"\r\n|\n|\r+")
MAX_LINE = 1 << 20  # a "line" longer than 1 MiB without an end is cut there


@dataclass(frozen=True, slots=True)
class Frame:
    """One drawn line: its text (clean, right blanks kept off), how it ended, if it redrew."""

    text: str
    ended: str = "\n"  # "\n" a finished line, "\r" a redraw follows, "" end of the stream
    redraw: bool = False


class FrameReader:
    """Raw bytes in (any chunking), frames out, in order."""

    def __init__(self) -> None:
        self._partial = b""
        self._up = False  # a cursor-up was seen since the last frame

    def feed(self, data: bytes) -> list[Frame]:
        """The frames completed by ``data``."""
        if self._partial:
            data = self._partial + data
        core = data.rstrip(b"\r")  # a last "\r" may be the first half of a "\r\n"
        end = max(core.rfind(b"\n"), core.rfind(b"\r"))
        if end < 0:
            if len(data) > MAX_LINE:
                self._partial = b""
                return self._frames(data, final=True)
            self._partial = data
            return []
        self._partial = data[end + 1 :]
        return self._frames(data[: end + 1], final=False)

    def close(self) -> list[Frame]:
        """The frames still held: the last, unterminated line (if any)."""
        data, self._partial = self._partial, b""
        return self._frames(data, final=True) if data else []

    def _frames(self, block: bytes, final: bool) -> list[Frame]:
        out: list[Frame] = []
        pos = 0
        for m in _ENDS.finditer(block):
            ended = "\n" if m.group() in (b"\n", b"\r\n") else "\r"
            self._add(out, block[pos : m.start()], ended)
            pos = m.end()
        if pos < len(block):
            self._add(out, block[pos:], "" if final else "\n")
        return out

    def _add(self, out: list[Frame], raw: bytes, ended: str) -> None:
        text = raw.decode("utf-8", "replace")
        if "\x1b" in text:
            if _CURSOR_UP.search(text):
                self._up = True
            text = _ANSI.sub("", text)
        if "\b" in text:
            text = _backspaced(text)
        text = text.rstrip()
        if not text.strip():
            return
        out.append(Frame(text, ended, self._up))
        self._up = False


def _backspaced(text: str) -> str:
    """What a terminal shows after ``\\b`` moves: later characters overwrite earlier ones."""
    cells: list[str] = []
    cursor = 0
    for ch in text:
        if ch == "\b":
            cursor = max(0, cursor - 1)
        elif cursor < len(cells):
            cells[cursor] = ch
            cursor += 1
        else:
            cells.append(ch)
            cursor += 1
    return "".join(cells)


__all__ = ["MAX_LINE", "Frame", "FrameReader"]
