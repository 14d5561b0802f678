"""Filters that are probably typos: when a filter matched nothing, the filter meant.

A Lucene filter rarely fails to parse; it fails to match. ``metrics.val.acc>0.9`` (no colon)
is one bare word, searched for in the experiment names, run ids and tags, and found nowhere;
``experiment=digits-svm`` the same. :func:`hints` reads the filter's words and says, for each
word that looks like one of these slips, what was probably meant, ending with the whole
corrected filter::

    metrics.val.acc>0.9 has no colon: it searched for that text as a word -- did you mean
    -q 'metrics.val.acc:>0.9'?

Only :func:`hints` asks the store anything (the values of ``experiment`` and ``tags``), and
only when the filter matched nothing. Every front end says them: the CLI on stderr, the UI under
its filter box (:func:`warehouse.query.api.why_empty` finds them).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from warehouse.stores.base import Store

_WORD = re.compile(r'"(?:[^"\\]|\\.)*"|[^\s()]+')
"""A quoted phrase or a run of characters without spaces and parentheses."""

_COMPARISON = re.compile(
    r"^(?P<field>[A-Za-z_][\w.\-/]*?)(?P<op>>=|<=|=>|=<|==|>|<|=)(?P<value>[^=<>].*)$"
)
_COLON_OP = {"=": "", "==": "", ">": ">", "<": "<", ">=": ">=", "<=": "<=", "=>": ">=", "=<": "<="}
_OPERATORS = frozenset({"AND", "OR", "NOT", "TO", "&&", "||", "!"})
_FIELD_TERM = re.compile(r"^(?P<field>experiment|tags):(?P<value>[^\s\"*?\[{<>]+)$")
_HEX = re.compile(r"^[0-9a-f]{4,32}$")
VALUE_FIELDS = ("experiment", "tags")
"""The fields whose recorded values a mistyped word is compared with."""


@dataclass(frozen=True)
class Hints:
    """The likely slips of a filter that matched nothing: one line each, and the whole
    filter with every slip fixed (None when none could be named)."""

    lines: tuple[str, ...] = ()
    corrected: str | None = None

    def said(self) -> list[str]:
        """The lines, the last one with the corrected filter as the CLI takes it."""
        meant = [f"did you mean -q '{self.corrected}'?"] if self.corrected is not None else []
        return [*self.lines, *meant]


def hints(filter: str, store: Store) -> Hints:
    """The likely slips in ``filter`` (which matched no run); none when nothing looks wrong."""
    cache: dict[str, list[str]] = {}

    def values(field: str) -> list[str]:
        if field not in cache:
            cache[field] = _values(store, field)
        return cache[field]

    return suggest(filter, values)


def suggest(filter: str, values: Callable[[str], Collection[str]]) -> Hints:
    """:func:`hints` over ``values(field)``, the recorded values of a field."""
    lines: list[str] = []
    fixed = filter
    for word in _WORD.findall(filter):
        if word.startswith('"') or word in _OPERATORS:
            continue
        bare = word.lstrip("+-!")
        comparison = _COMPARISON.match(bare)
        if comparison:
            field, op, value = comparison.group("field", "op", "value")
            meant = f"{field}:{_COLON_OP[op]}{value}"
            lines.append(f"{bare} has no colon: it searched for that text as a word")
            fixed = fixed.replace(bare, meant, 1)
            continue
        term = _FIELD_TERM.match(bare)
        if term:
            field, value = term.group("field", "value")
            close = _close(value, values(field))
            if close and value not in values(field):
                lines.append(f"no run has {field} {value!r}; the closest: {', '.join(close)}")
                fixed = fixed.replace(bare, f"{field}:{_quoted(close[0])}", 1)
            continue
        if ":" in bare or bare.startswith(("[", "{", "_exists_")) or not bare:
            continue
        meant_word = _bare_word(bare, values)
        if meant_word is not None:
            line, replacement = meant_word
            lines.append(line)
            if replacement:
                fixed = fixed.replace(bare, replacement, 1)
    return Hints(tuple(lines), fixed if fixed != filter else None)


def _bare_word(word: str, values: Callable[[str], Collection[str]]) -> tuple[str, str] | None:
    """What a bare word (no ``field:``) that matched nothing probably meant, and its
    replacement in the filter ("" when none can be named)."""
    searched = "a bare word must equal an experiment, a run id or a tag"
    if any(word in values(field) for field in VALUE_FIELDS):
        return None  # it is a recorded value: the other terms are what matched nothing
    for field in VALUE_FIELDS:
        inside = sorted(v for v in values(field) if word in v)
        if inside:
            shown = ", ".join(inside[:3]) + (" ..." if len(inside) > 3 else "")
            line = f"{word!r}: {searched} exactly; {field} values containing it: {shown}"
            return line, f"{field}:*{word}*"
    for field in VALUE_FIELDS:
        close = _close(word, values(field))
        if close:
            line = f"{word!r}: {searched} exactly; the closest {field}: {', '.join(close)}"
            return line, f"{field}:{_quoted(close[0])}"
    if _HEX.match(word):
        return f"{word!r}: no run id is {word}; a prefix needs a wildcard", f"run_id:{word}*"
    line = f"{word!r} matched no {', '.join(VALUE_FIELDS)} or run id; name a field: field:value"
    return line, ""


def _close(word: str, candidates: Collection[str]) -> list[str]:
    return difflib.get_close_matches(word, list(candidates), n=3, cutoff=0.6)


def _quoted(value: str) -> str:
    return value if re.fullmatch(r"[\w.\-/]+", value) else '"' + value.replace('"', '\\"') + '"'


def _values(store: Store, field: str) -> list[str]:
    """The recorded values of ``field`` (none when the store cannot say)."""
    from warehouse.errors import WarehouseError
    from warehouse.stores.base import CountQuery

    try:
        return sorted(store.count_by(CountQuery(field)))
    except WarehouseError:
        return []


__all__ = ["VALUE_FIELDS", "Hints", "hints", "suggest"]
