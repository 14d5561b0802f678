"""The terminal: results to stdout as a table, JSON or CSV; messages and progress to stderr.

- ``table``: a rich table for people — numbers right-aligned with one precision per column,
  run ids shortened, timestamps without microseconds.
- ``json``: one JSON array, written row by row; keys in the order the view gives them,
  non-finite floats as ``null``, datetimes as ISO 8601 strings.
- ``csv``: a header then one line per row, streamed: the rows are never held in memory, so
  a million sample rows cost no more than ten.

rich is imported inside the functions that draw, never at import (``warehouse --help``).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import math
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime
from enum import Enum, StrEnum
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console


class Format(StrEnum):
    """How results are printed on stdout."""

    table = "table"
    json = "json"
    csv = "csv"


RUN_ID_WIDTH = 12
"""Characters of a run id a table shows; every command taking a run id accepts that prefix."""

_ID_COLUMNS = re.compile(r"(^|_)run_id$")
_ISO_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]00:00)?$")


@functools.cache
def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def error(message: str) -> None:
    """One red line on stderr."""
    from rich.markup import escape

    stderr_console().print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


def info(message: str) -> None:
    stderr_console().print(message, soft_wrap=True)


def warning(message: str) -> None:
    """One yellow ``warning:`` line on stderr: done, but not as the user may think."""
    from rich.markup import escape

    stderr_console().print(f"[bold yellow]warning:[/] {escape(message)}", soft_wrap=True)


def render(
    rows: Iterable[Mapping[str, Any]],
    fmt: Format | str,
    *,
    columns: Sequence[str] | None = None,
    title: str | None = None,
    out: TextIO | None = None,
    empty_header: Sequence[str] | None = None,
    **table: Any,
) -> int:
    """Print ``rows`` on ``out`` (stdout) in ``fmt``; returns how many rows were printed.

    ``columns`` picks and orders the keys for tables and CSV (default: the first row's keys);
    JSON always prints each row whole. ``empty_header``: the CSV header when no row comes, so
    a script reading the file finds its columns even then. ``table``: what else a table
    takes (:func:`write_table`: ``keep``, ``primary``, ``notes``, ``more``).
    """
    stream = out if out is not None else sys.stdout
    fmt = Format(fmt)
    try:
        if fmt is Format.json:
            return write_json(rows, stream)
        if fmt is Format.csv:
            return write_csv(rows, stream, columns=columns, empty_header=empty_header)
        return write_table(rows, stream, columns=columns, title=title, **table)
    except BrokenPipeError as exc:  # not an OSError any more: click would exit 1 ("no match")
        raise OutputClosed from exc


class OutputClosed(Exception):
    """The reader of our stdout went away (``warehouse query runs | head -1``)."""


# --- JSON -------------------------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """``value`` with only JSON types left: NaN/inf → None, datetimes → ISO strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Enum):
        return jsonable(value.value)
    if isinstance(value, PurePath):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if hasattr(value, "item"):  # numpy / pyarrow scalars
        return jsonable(value.item())
    return str(value)


def write_json(rows: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    """A JSON array, one row per line, written as the rows come."""
    count = 0
    out.write("[")
    for row in rows:
        out.write(",\n" if count else "\n")
        out.write(json.dumps(jsonable(row), ensure_ascii=False, allow_nan=False))
        count += 1
    out.write("\n]\n" if count else "]\n")
    out.flush()
    return count


# --- CSV --------------------------------------------------------------------------------


def csv_cell(value: Any) -> str:
    """One CSV field: empty for missing/non-finite, true/false, JSON for nested values."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(jsonable(value), ensure_ascii=False, allow_nan=False)
    return str(jsonable(value))


def write_csv(
    rows: Iterable[Mapping[str, Any]],
    out: TextIO,
    *,
    columns: Sequence[str] | None = None,
    empty_header: Sequence[str] | None = None,
) -> int:
    """Header + one line per row, streamed (constant memory). Columns: given, or the first
    row's; without rows and columns, ``empty_header`` (if given) is the header."""
    writer = csv.writer(out, lineterminator="\n")
    iterator: Iterator[Mapping[str, Any]] = iter(rows)
    count = 0
    if columns is None:
        first = next(iterator, None)
        if first is None:
            if empty_header:
                writer.writerow(empty_header)
            out.flush()
            return 0
        columns = list(first.keys())
        writer.writerow(columns)
        writer.writerow([csv_cell(first.get(c)) for c in columns])
        count = 1
    else:
        writer.writerow(columns)
    for row in iterator:
        writer.writerow([csv_cell(row.get(c)) for c in columns])
        count += 1
    out.flush()
    return count


# --- table ------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def number_format(values: Sequence[Any]) -> str:
    """One format spec for a numeric column, so its decimal points line up.

    Integers keep all digits (thousands separated), as do floats that are all whole numbers.
    Other floats get 4 decimals below 10, 2 below 10,000 and none above — more (up to 6) when
    the column's smallest non-zero value needs them to show 3 significant digits. A column
    whose values are all below 0.0001 (a learning-rate schedule's tail) is in scientific
    notation with 3 decimals, zero shown as 0.
    """
    numbers = [float(v) for v in values if _is_number(v) and math.isfinite(v)]
    if not numbers:
        return ""
    if all(isinstance(v, int) for v in values if _is_number(v)):
        return ",d"
    largest = max(abs(v) for v in numbers)
    if largest >= 1 and all(v.is_integer() for v in numbers):
        return ",.0f"
    nonzero = [abs(v) for v in numbers if v != 0]
    smallest = min(nonzero) if nonzero else 0.0
    if nonzero and largest < 1e-4:
        return ".3e"
    needed = 2 - math.floor(math.log10(smallest)) if 0 < smallest < 1 else 0
    base = 4 if largest < 10 else 2 if largest < 10_000 else 0
    return f",.{min(6, max(base, needed))}f"


_NEGATIVE_ZERO = re.compile(r"^-(0[.,]?0*(e[+-]00)?)$")


def table_cell(value: Any, column: str, spec: str) -> str:
    """A value as a table shows it (see :func:`number_format` for numbers)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if _is_number(value):
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        if spec == ",d" and isinstance(value, int) and column in ("rank", "seq", "step", "epoch"):
            return str(value)
        if spec == ".3e" and value == 0:
            return "0"
        shown = format(value, spec or (".6g" if isinstance(value, float) else "d"))
        return _NEGATIVE_ZERO.sub(r"\1", shown)  # -0.00002 at 4 decimals is 0.0000, not -0.0000
    if isinstance(value, str):
        if _ID_COLUMNS.search(column) and len(value) > RUN_ID_WIDTH:
            return value[:RUN_ID_WIDTH]
        match = _ISO_TIME.match(value)
        if match:
            return f"{match.group(1)} {match.group(2)}"
        return value
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(jsonable(value), ensure_ascii=False)
    return str(value)


FOLD_WIDTH = 24
"""A text column wider than this may wrap onto more lines when the terminal is narrow."""

GAP = 2
"""Characters between two columns: one of padding and the box's blank divider."""

IDENTITY_COLUMNS = frozenset(
    {"rank", "experiment", "sample_id", "field", "metric", "period", "split", "change", "name"}
)
PRIMARY_COLUMNS = frozenset({"score", "best_score"})
_TIME_COLUMN = re.compile(r"(_at|_s|^timestamp|^date)$")
_BREAK = re.compile(r"(?<=[_/])|(?<=[.\-])(?!\d)")  # never inside a number: 0.5, 1e-3


def column_priority(column: str, primary: str | None = None) -> int:
    """How much a table wants ``column``, 0 first: identity (run ids, experiment), then the
    primary metric, the other metrics, the status, and last the times and durations."""
    if column in IDENTITY_COLUMNS or _ID_COLUMNS.search(column):
        return 0
    if column == primary or column in PRIMARY_COLUMNS:
        return 1
    if column == "status":
        return 3
    if _TIME_COLUMN.search(column):
        return 4
    return 2


@dataclasses.dataclass
class Caption:
    """What a table says under itself: the columns it moved out or left out, and notes."""

    same: dict[str, str] = dataclasses.field(default_factory=dict)
    blank: list[str] = dataclasses.field(default_factory=list)
    left_out: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def lines(self, width: int | None, more: str) -> list[str]:
        found = []
        if self.same:
            found.append(
                "same in every row: " + ", ".join(f"{k}={v}" for k, v in self.same.items())
            )
        if self.blank:
            found.append("no value in any row: " + ", ".join(self.blank))
        if self.left_out:
            found.append(f"left out to fit {width} columns: {', '.join(self.left_out)} — {more}")
        return found + self.notes


def write_table(
    rows: Iterable[Mapping[str, Any]],
    out: TextIO,
    *,
    columns: Sequence[str] | None = None,
    title: str | None = None,
    keep: Sequence[str] = (),
    primary: str | None = None,
    notes: Sequence[str] = (),
    more: str = "--format json or csv shows every column",
    repeat: Sequence[str] = (),
) -> int:
    """A rich table on ``out``: numbers right-aligned at one precision per column.

    The rule: **a table fits the width it is given and always shows the run id and the
    primary score**, and never cuts a value short. A column holding the same value in every
    row (of two or more) moves into the caption under the table. When the width is limited (a
    terminal, or ``COLUMNS`` set), long texts (URIs, names) and headers break after
    ``_ . - /``; the run id (the first ``*run_id`` column) and the primary score (``primary``,
    else a ``score``/``best_score`` column) are shown first, then ``keep`` (the columns the
    view wants next, in order), then the rest by :func:`column_priority`; what still does not
    fit is left out, least wanted first, and named in the caption with ``more``: how to see
    it. With ``repeat`` (``compare``: the field names), nothing is left out: the other
    columns go into as many tables as they need, each repeating those columns.
    """

    materialised = list(rows)
    if not materialised:
        return 0
    from rich.cells import cell_len
    from rich.text import Text

    cols = list(columns) if columns is not None else list(materialised[0].keys())
    numeric: dict[str, bool] = {}
    cells: dict[str, list[str]] = {}
    for col in cols:
        values = [row.get(col) for row in materialised]
        numeric[col] = any(_is_number(v) for v in values) and all(
            v is None or _is_number(v) for v in values
        )
        spec = number_format(values) if numeric[col] else ""
        cells[col] = [table_cell(v, col, spec) for v in values]
    caption = Caption(notes=list(notes))
    if len(materialised) > 1:
        for col in cols[1:]:  # the first column stays: a table needs one
            if col in repeat:
                continue
            if len(set(cells[col])) == 1:
                if cells[col][0] == table_cell(None, col, ""):
                    caption.blank.append(col)
                else:
                    caption.same[col] = cells[col][0]
        cols = [c for c in cols if c not in caption.same and c not in caption.blank]
    width = table_width(out)
    console = stdout_console(out, width)
    natural = {c: max(cell_len(v) for v in cells[c]) for c in cols}
    least = {
        c: max(
            natural[c] if numeric[c] else min(natural[c], FOLD_WIDTH),
            max(cell_len(part) for part in _BREAK.split(c)),
        )
        for c in cols
    }
    full = {c: max(natural[c], cell_len(c)) for c in cols}
    must = [*essential_columns(cols, primary), *(c for c in repeat if c in cols)]
    ranked = sorted(
        cols,
        key=lambda c: (
            (-2, cols.index(c))
            if c in must
            else (-1, keep.index(c))
            if c in keep
            else (column_priority(c, primary), cols.index(c))
        ),
    )
    if width is None:
        groups = [full]
    elif repeat:
        groups = [
            _widened(chosen, least, full, width) for chosen in _panels(ranked, must, least, width)
        ]
    else:
        chosen = _fitting(ranked, least, width, len(must))
        groups = [_widened(chosen, least, full, width)]
        caption.left_out = [c for c in cols if c not in groups[0]]
    for number, widths in enumerate(groups):
        shown = [c for c in cols if c in widths]
        console.print(
            _rich_table(shown, widths, cells, numeric, natural, title if not number else None)
        )
    for line in caption.lines(width, more):
        console.print(Text(line, style="dim"), soft_wrap=width is None)
    return len(materialised)


def essential_columns(columns: Sequence[str], primary: str | None = None) -> list[str]:
    """The columns no table leaves out: its run id (the first ``*run_id`` column) and its
    primary score (``primary``, else the first ``score``/``best_score`` column)."""
    found = [c for c in columns if _ID_COLUMNS.search(c)][:1]
    if primary in columns:
        found.append(str(primary))
    else:
        found += [c for c in columns if c in PRIMARY_COLUMNS][:1]
    return found


def _rich_table(
    shown: Sequence[str],
    widths: Mapping[str, int],
    cells: Mapping[str, list[str]],
    numeric: Mapping[str, bool],
    natural: Mapping[str, int],
    title: str | None,
) -> Any:
    """One rich table of the ``shown`` columns at their ``widths``."""
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=title,
        title_justify="left",
        header_style="bold",
        box=_box(),
        show_edge=False,
        pad_edge=False,
        padding=(0, GAP - 1, 0, 0),
    )
    folded = {c for c in shown if not numeric[c] and natural[c] > widths[c]}
    for col in shown:
        table.add_column(
            Text(_broken(col, widths[col])),
            justify="right" if numeric[col] else "left",
            no_wrap=col not in folded,
            overflow="fold",
            width=widths[col],
        )
    for i in range(len(cells[shown[0]])):
        table.add_row(
            *(Text(_broken(cells[c][i], widths[c]) if c in folded else cells[c][i]) for c in shown)
        )
    return table


def table_width(out: TextIO) -> int | None:
    """The characters a table may use on ``out``: the terminal's width, else ``COLUMNS`` when
    set (``COLUMNS=100 warehouse query runs | less``), else no limit."""
    import os

    if hasattr(out, "isatty") and out.isatty():
        return stdout_console(out).width
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def _fitting(
    ranked: Sequence[str], least: Mapping[str, int], width: int, must: int = 1
) -> list[str]:
    """The columns, most wanted first, whose smallest readable widths fit in ``width``; the
    first ``must`` (at least one) whatever their width. After them, the first column that does
    not fit ends the list, so what goes is always the least wanted."""
    shown: list[str] = []
    used = 0
    for col in ranked:
        need = least[col] + (GAP if shown else 0)
        if len(shown) >= max(must, 1) and used + need > width:
            break
        shown.append(col)
        used += need
    return shown


def _panels(
    ranked: Sequence[str], must: Sequence[str], least: Mapping[str, int], width: int
) -> list[list[str]]:
    """Every column, in tables of at most ``width``: each holds the ``must`` columns and as
    many of the others (in ``ranked`` order) as fit, at least one."""
    rest = [c for c in ranked if c not in must]
    base = sum(least[c] for c in must) + GAP * max(len(must) - 1, 0)
    panels: list[list[str]] = []
    while rest or not panels:
        chosen, used = list(must), base
        while rest and (len(chosen) == len(must) or used + GAP + least[rest[0]] <= width):
            col = rest.pop(0)
            used += least[col] + (GAP if chosen else 0)
            chosen.append(col)
        panels.append(chosen)
    return panels


def _widened(
    chosen: Sequence[str], least: Mapping[str, int], full: Mapping[str, int], width: int
) -> dict[str, int]:
    """Widths for ``chosen``: each its least, then the room left given to the most wanted
    columns until each is at its full width (whole headers, unwrapped texts)."""
    widths = {c: least[c] for c in chosen}
    room = width - sum(widths.values()) - GAP * (len(chosen) - 1)
    for col in chosen:
        grow = min(max(room, 0), full[col] - widths[col])
        widths[col] += grow
        room -= grow
    return widths


def _broken(text: str, width: int) -> str:
    """``text`` broken after ``_ . - /`` into lines of at most ``width`` characters where it
    can be (a longer piece is folded by rich); no character is added or lost."""
    lines: list[str] = []
    for part in _BREAK.split(text):
        if lines and len(lines[-1]) + len(part) <= width:
            lines[-1] += part
        else:
            lines.append(part)
    return "\n".join(lines)


def stdout_console(out: TextIO, width: int | None = None) -> Console:
    """A rich console drawing on ``out``: the terminal's width and colours on a terminal, else
    plain text that never wraps (or wraps at ``width``). A closed pipe raises
    :class:`OutputClosed` (rich would exit 1, which scripts read as "no match")."""
    from rich.console import Console

    terminal = out.isatty() if hasattr(out, "isatty") else False
    console = Console(
        file=out,
        highlight=False,
        soft_wrap=False,
        force_terminal=terminal,
        width=None if terminal else (width or 100_000),
        color_system="auto" if terminal else None,
    )

    def closed() -> None:
        raise OutputClosed

    console.on_broken_pipe = closed  # type: ignore[method-assign]
    return console


def _box() -> Any:
    from rich import box

    return box.SIMPLE_HEAD


def write_mapping(sections: Mapping[str, Mapping[str, Any]], out: TextIO) -> None:
    """Key/value sections (``show``): one small two-column table per section, its values
    wrapped to fit the width (:func:`table_width`)."""
    from rich.table import Table
    from rich.text import Text

    width = table_width(out)
    console = stdout_console(out, width)
    for name, values in sections.items():
        if not values:
            continue
        table = Table(
            title=name,
            title_justify="left",
            title_style="bold",
            show_header=False,
            box=None,
            pad_edge=False,
            min_width=len(name),
        )
        table.add_column("field", style="bold", no_wrap=True)
        table.add_column("value", overflow="fold")  # a long value wraps at the width
        spec = number_format([v for v in values.values() if isinstance(v, float)])
        for key, value in values.items():
            text = table_cell(value, "", spec if isinstance(value, float) else "")
            table.add_row(Text(str(key)), Text(text))
        console.print(table)


def write_text(text: str, out: TextIO, *, title: str | None = None) -> None:
    """A block of plain text (the config as YAML), under an optional bold title."""
    if title:
        out.write(f"{title}\n")
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()
