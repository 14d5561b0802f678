"""The general reader: any line that names its position, or repeats with changing numbers.

It reads what the families before it did not claim, by rule rather than by library:

**Anchors** (case-insensitive) say where a line is:

- ``[N]`` (XGBoost's ``[0]``, LightGBM's ``[10]``) and ``step N``, ``iter N``,
  ``iteration N``, ``global_step N`` (also ``step: N``, ``step=N``): the step, as printed;
- ``epoch N`` (``Epoch N``, ``epoch N:``, ``Epoch: N``, ``epoch=N``): the epoch, as printed;
- a counter ``N/M`` after one of those words, at the line's start or in brackets (``[N/M]``,
  ``[ N/M (5%)]``): a position in a round of M (an epoch's batches or samples), continued over
  rounds: when the counter restarts, the rounds before add their M, so the step is
  ``rounds * M + N``; ``batch N`` without its M: as printed until it restarts, then unknown
  (not read);
- ``[E][i/M]`` or ``E [i/M]`` (the PyTorch ImageNet example's ``Epoch: [0][ 10/100]``,
  mmcv's ``Epoch [1][10/50]``, timm's ``Train: 0 [ 10/50 ( 20%)]``): epoch E, and the step
  ``(E - E0) * M + i``, E0 the first E shown;
- ``epoch N/M`` gives the epoch N (its M is the number of epochs).

**Pairs** are read from the rest of the line: a name, a separator (``:``, ``=``, spaces or a
tab) and a number, decimal, scientific (``2.3e+00``) or percent (``98.5%``, read as 98.5).
A name is a run of words back to the last delimiter (the line's start, a value, ``,``, ``;``,
``|``, a tab, two spaces, `` - `` or a bracket); its words may hold apostrophes, slashes, dots,
dashes, ``@`` and brackets (``valid_0's l2``, ``Acc@1``, ``train/loss``, ``validation_0-rmse``),
quotes around it are dropped (``{'acc': 0.8}``). The meter form ``Loss 2.3e+00 (2.4e+00)``
gives the current value; the running average in brackets is left out. A value is taken only
when what follows it ends it: the line's end, a delimiter, its average, or the next pair. So a
number with a unit (``3.2 s``, ``12ms``, ``0M``), a time (``0:00:10``) or a fraction
(``9800/10000``) is not read.

**Tables**: a header of two or more names apart by two spaces or more, then rows of numbers,
one per column (scikit-learn's gradient boosting, fastai): each row is a reading named by the
header, at the step of its ``iter``/``iteration``/``step``/``epoch`` column.

**Series**: a line with pairs but no anchor is read once it repeats with other numbers (the
same text with its numbers masked): each showing is one point (the first is held until then).
A line seen once, or only ever with the same numbers (a config print, ``done in 3.2 s``), is
not read. Where such a line sits in the run is the stream's clock: the last step another line
gave; or the epoch last named; or, with neither, its k-th showing is step k.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass

from warehouse.watch.parsers.frames import Frame
from warehouse.watch.parsers.reading import NOT_METRICS, LineParser, Reading, number

_NUM = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|NaN|inf|Inf|Infinity)"
_STEP_WORDS = "global_step|iteration|iter|step"
# a counter N/M or [E][i/M] after an anchor word or in brackets
_ROUND = re.compile(
    r"(?:\[\s*(\d+)\s*\]|(?<![\w.:/-])(\d+))\s*\[\s*(\d+)\s*/\s*(\d+)\s*"
    r"(?:\]|\(\s*\d+(?:\.\d+)?%\s*\)\s*\])"
)
_BRACKETED = re.compile(r"\[\s*(\d+)\s*/\s*(\d+)\s*(?:\]|\(\s*\d+(?:\.\d+)?%\s*\)\s*\])")
_WORD = re.compile(
    r"(?<![\w./@'-])(?P<word>epoch|" + _STEP_WORDS + r"|batch)(?![\w'@-])"
    r"(?:\s*[:=#]\s*|\s+)(?:\[\s*)?(?P<n>\d+)(?:\s*/\s*(?P<m>\d+))?(?:\s*\])?(?![\w.]|/\d)",
    re.IGNORECASE,
)
_LEADING = re.compile(r"\s*(\d+)\s*/\s*(\d+)(?=[\s,:;|\]-]|\Z)")  # "12/100 loss: ..."
_INDEX = re.compile(r"(?<![\w\]])\[\s*(\d+)\s*\](?!\s*\[)")
# a name: words (single spaces between), each starting with a letter (or a quote)
_NAME_WORD = r"['\"]?[A-Za-z_][\w'./@\[\]-]*"
_PAIR = re.compile(
    r"(?P<name>" + _NAME_WORD + r"(?: " + _NAME_WORD + r"){0,3})"
    r"(?P<sep>\s*[:=]\s*|[ \t]+)"
    r"(?P<value>" + _NUM + r")(?P<pct>%?)"
    r"(?P<avg>\s*\(\s*(?:" + _NUM + r")%?\s*\))?"
)
# what may end a value: the line's end, a delimiter, or (checked apart) the next pair
_VALUE_END = re.compile(r"\s*(?:\Z|[,;|\t\]})]|\s-\s|\s{2,})")
_DELIMS = ",;|\t[]{}()"
_STOP_WORDS = frozenset(
    {"in", "of", "at", "to", "for", "from", "by", "with", "after", "took", "on", "and", "or"}
)
_DIGITS = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?%?|\d+")
_HEADER_SPLIT = re.compile(r"\s{2,}")
_HEADER_NAME = re.compile(r"[A-Za-z_#][\w'./@ \[\]-]*\Z")
_CELL = re.compile(r"(" + _NUM + r")(%?)\Z")
_POSITION_COLUMNS = {"iter": "step", "iteration": "step", "step": "step", "epoch": "epoch"}
_MAX_TEMPLATES = 512
_LABEL_WORD = re.compile(r"[A-Za-z]+")
_SPLIT_WORDS = {
    **dict.fromkeys(
        ("val", "valid", "validation", "validate", "eval", "evaluation", "dev"), "val_"
    ),
    **dict.fromkeys(("test", "testing"), "test_"),
}
_ENDS_WITH_VALUE = re.compile(r"(?<![\w.])(?:" + _NUM + r")%?\)?\Z")
MAX_TEXT = 4096  # a longer line is data, not a log line


@dataclass
class _Round:
    """A counter that restarts every round (an epoch's batches)."""

    offset: int = 0
    last: int | None = None
    total: int | None = None
    lost: bool = False  # it restarted with no total printed: the rounds' length is unknown
    first: int | None = None  # the first round's own number, where printed ([E][i/M])

    def position(self, n: int, total: int | None, label: int | None = None) -> int | None:
        if label is not None and total is not None:  # rounds numbered: from the first shown
            if self.first is None:
                self.first = label
            return (label - self.first) * total + n
        if self.last is not None and n < self.last:  # a new round
            if self.total is None:
                self.lost = True
            self.offset += self.total or 0
        self.last, self.total = n, total
        return None if self.lost else self.offset + n


@dataclass
class _Series:
    texts: dict[str, str] | None = None  # the first showing's numbers
    live: bool = False  # it repeated with other numbers: a series
    count: int = 0


def template(text: str) -> str:
    """A line with its numbers masked (the same line at another step has the same template)."""
    return _DIGITS.sub("#", " ".join(text.split()))


def read_pairs(text: str) -> tuple[dict[str, float], dict[str, str]]:
    """The ``name: value`` pairs of a line's text (anchors already taken out)."""
    metrics: dict[str, float] = {}
    texts: dict[str, str] = {}
    pos = 0
    while True:
        m = _PAIR.search(text, pos)
        if m is None:
            break
        pos = m.end()
        name = _name(text, m)
        if name is None:
            pos = m.start() + 1  # a shorter name may start later
            continue
        if not _ended(text, m.end()):
            continue
        raw = m.group("value")
        value = number(raw)
        if value is None or name in NOT_METRICS:
            continue
        metrics[name], texts[name] = value, raw + m.group("pct")
    return metrics, texts


def _name(text: str, m: re.Match[str]) -> str | None:
    """The pair's name: its words back to the last delimiter (None when that is not a name)."""
    start = m.start("name")
    before = text[:start]
    if before and not (before[-1] in _DELIMS or before[-1].isspace() or before[-1] in ":="):
        return None  # inside a word
    words = m.group("name").split(" ")
    # a single space before: the name may start earlier (prose, or a number: not a name)
    if before.endswith(" ") and not before.endswith("  "):
        prev = before.rstrip()
        if prev and (prev[-1].isalnum() or prev[-1] in "_'\"@./"):
            head = prev.rsplit(" ", 1)[-1]
            if not _is_value_end(prev) and not head.endswith((":", "=")):
                return None  # a longer name than four words, or words after a number
    words = [w for w in words if w]
    if words[0].lower() in _STOP_WORDS or any(w.lower() in _STOP_WORDS for w in words):
        return None
    name = " ".join(words).strip("'\"")
    if not name or not (name[0].isalpha() or name[0] == "_"):
        return None
    left = before.rstrip()
    delimited = (
        not left
        or before.endswith(("\t", "  "))
        or left[-1] in _DELIMS + ":"
        or left.endswith(" -")
    )
    if not m.group("sep").strip() and len(words) > 1 and not delimited:
        return None  # "name value" with spaces: a many-word name must be delimited on its left
    return name


def _is_value_end(prev: str) -> bool:
    """The text before ends with a value (the name starts after it)."""
    return _ENDS_WITH_VALUE.search(prev) is not None


def _ended(text: str, end: int, depth: int = 0) -> bool:
    """What follows a value ends it: a delimiter, or the next pair (itself ended)."""
    if _VALUE_END.match(text, end):
        return True
    if not text.startswith(" ", end) or depth > 32:
        return False
    start = end + 1
    nxt = _PAIR.match(text, start)
    return nxt is not None and _name(text, nxt) is not None and _ended(text, nxt.end(), depth + 1)


def _is_heading(cell: str) -> bool:
    """A table's column heading: a name, none of its words a number (``Train Loss``)."""
    return bool(_HEADER_NAME.match(cell)) and all(number(w) is None for w in cell.split())


def _split(text: str, rest: str) -> str:
    """``val_`` or ``test_`` when the word just before the line's first anchor names an
    evaluation (``Test: [ 1/8]``, ``Validation epoch 2:``), else ``""``."""
    cut = rest.find(" | ")
    if cut < 0:
        return ""
    words = _LABEL_WORD.findall(text[:cut])
    return _SPLIT_WORDS.get(words[-1].lower(), "") if words else ""


def _in_split(split: str, name: str) -> str:
    return name if name.lower().startswith(("val", "test", "eval")) else split + name


class GeneralLines(LineParser):
    """Lines naming their position, tables of numbers, and repeating lines (module docstring)."""

    family = "general"

    def __init__(self) -> None:
        self._rounds: dict[str, _Round] = {}
        self._series: OrderedDict[str, _Series] = OrderedDict()
        self._header: list[str] | None = None

    def parse(self, frame: Frame) -> list[Reading] | None:
        text = frame.text
        if len(text) > MAX_TEXT:
            return None
        header = _HEADER_SPLIT.split(text.strip())
        if len(header) >= 2 and all(_is_heading(h) for h in header):
            self._header = header  # perhaps a table's: its rows follow
            return None
        row = self._row(text)
        if row is not None:
            return row
        self._header = None
        if not any(c.isdigit() for c in text):
            return None
        step, epoch, rest = self._anchors(text)
        if rest is None:
            return []  # a counter whose rounds' length is unknown: its step is unknown
        metrics, texts = read_pairs(rest)
        split = _split(text, rest)
        if split:
            metrics = {_in_split(split, k): v for k, v in metrics.items()}
            texts = {_in_split(split, k): v for k, v in texts.items()}
        if step is None and epoch is None:
            if not metrics:
                return None
            return self._repeat(text, metrics, texts)
        if not metrics:
            return [Reading(self.family, epoch=epoch)] if epoch is not None else None
        return [Reading(self.family, metrics, step=step, epoch=epoch, texts=texts)]

    def _anchors(self, text: str) -> tuple[int | None, int | None, str | None]:
        """The line's step and epoch, and its text with the anchors taken out (None: the line
        has a counter whose position is unknown)."""
        step = epoch = None
        spans: list[tuple[int, int]] = []
        key = ""  # which counter: the line's text up to its counter, numbers masked
        m = _ROUND.search(text)
        if m is not None:
            epoch = int(m.group(1) or m.group(2))
            step = self._round(template(text[: m.start()]), int(m.group(3)), int(m.group(4)), epoch)
            spans.append(m.span())
        for w in _WORD.finditer(text):
            if any(s <= w.start() < e for s, e in spans):
                continue
            word, n, total = w.group("word").lower(), int(w.group("n")), w.group("m")
            if word == "epoch":
                if epoch is None:
                    epoch = n
            elif step is None:
                if word == "batch" or total is not None:
                    key = f"{template(text[: w.start()])}/{word}"
                    step = self._round(key, n, int(total) if total else None)
                    if step is None:
                        return None, epoch, None
                else:
                    step = n
            spans.append(w.span())
        if step is None and (lead := _LEADING.match(text)) is not None:
            step = self._round("/", int(lead.group(1)), int(lead.group(2)))
            spans.append(lead.span())
        if step is None:
            b = _BRACKETED.search(text)
            if b is not None:
                step = self._round(template(text[: b.start()]), int(b.group(1)), int(b.group(2)))
                spans.append(b.span())
        i = _INDEX.search(text) if step is None else None
        if i is not None and not text[: i.start()].strip(" \t"):  # "[10]\t..." begins the line
            step = int(i.group(1))
            spans.append(i.span())
        if not spans:
            return None, None, text
        out, pos = [], 0
        for s, e in sorted(spans):
            out.append(text[pos:s])
            out.append(" | ")
            pos = max(pos, e)
        out.append(text[pos:])
        return step, epoch, "".join(out)

    def _round(self, key: str, n: int, total: int | None, label: int | None = None) -> int | None:
        found = self._rounds.get(key)
        if found is None:
            if len(self._rounds) >= _MAX_TEMPLATES:  # bounded, whatever the output
                del self._rounds[next(iter(self._rounds))]
            found = self._rounds[key] = _Round()
        return found.position(n, total, label)

    def _row(self, text: str) -> list[Reading] | None:
        header = self._header
        if header is None:
            return None
        cells = text.split()
        if len(cells) != len(header) or not all(c[:1].isdigit() or c[:1] in "-+." for c in cells):
            return None
        metrics: dict[str, float] = {}
        texts: dict[str, str] = {}
        step = epoch = None
        for name, cell in zip(header, cells, strict=True):
            m = _CELL.match(cell)
            if m is None:
                continue  # a time (00:01), a number with a unit (0.23s): not a value
            value = number(m.group(1))
            if value is None:
                continue
            position = _POSITION_COLUMNS.get(name.lower())
            if position == "step" and value == int(value):
                step = int(value)
            elif position == "epoch" and value == int(value):
                epoch = int(value)
            else:
                metrics[name], texts[name] = value, cell
        if not metrics:
            return []
        if step is None and epoch is None:
            return self._repeat("\0".join(header), metrics, texts, always=True)
        return [Reading(self.family, metrics, step=step, epoch=epoch, texts=texts)]

    def _repeat(
        self, text: str, metrics: dict[str, float], texts: dict[str, str], always: bool = False
    ) -> list[Reading]:
        """A line with no anchor: read once it is a series (see the module docstring)."""
        key = template(text)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series()
            if len(self._series) > _MAX_TEMPLATES:
                self._series.popitem(last=False)
        else:
            self._series.move_to_end(key)
        series.count += 1
        if series.texts is None:
            series.texts = texts
        elif texts != series.texts:
            series.live = True
        held = not (series.live or always)
        return [
            Reading(self.family, metrics, texts=texts, series=key, count=series.count, held=held)
        ]


__all__ = ["GeneralLines", "read_pairs", "template"]
