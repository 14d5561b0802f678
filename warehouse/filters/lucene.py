"""Lucene filters (as typed in Kibana's search bar): parsing, a neutral AST, and type checks.

Every store accepts the same filter text. :func:`parse` turns it into a small tree of frozen
dataclasses that any engine can translate; :func:`fields` lists the fields it names;
:func:`validate` checks it against a store's columns and their kinds; :func:`to_mask`
evaluates it over a pyarrow table (the local store's engine). The Elasticsearch store
translates the same tree to its query DSL.

What the syntax means here:

* ``field:value`` — exact match (keyword semantics, case-sensitive); ``field:"two words"``
  the same with spaces; ``field:ab*c?`` wildcards on text fields (``*`` any run of characters,
  ``?`` one character, ``\\`` escapes the next character).
* ``field:>=0.9``, ``field:<5``, ``field:[a TO b]``, ``field:{a TO b}``, ``field:[0.9 TO *]``
  — ranges; numbers on numeric fields, ISO-8601 dates or date math (``now-7d``,
  ``now-1M/M``, ``2026-11-20||+1M/d``) on date fields, alphabetical on text. A date means
  what Elasticsearch makes of it (:func:`date_span`, :func:`ms_bounds`): ``gte``/``lt`` use
  its first millisecond, ``gt``/``lte`` its last, so ``ended_at:2026-11-20`` is the whole day.
  Reading dates lives in :mod:`warehouse.filters.lucene_dates` (re-exported here).
* Analysed text (:data:`ANALYZED`, Elasticsearch ``text``: ``error.message``) is searched word
  by word (:func:`analyze`): a term matches any word, a phrase the words in a row, a wildcard
  one word; ranges on it are refused.
* ``_exists_:field`` or ``field:*`` — the field has a value.
* ``AND``, ``OR``, ``NOT`` (or ``&&``, ``||``, ``!``), ``+must``, ``-must_not``, parentheses,
  ``field:(a OR b)``. Lower-case ``and``/``or``/``not`` are refused: in Lucene they would be
  search words, silently turning the filter into an ``OR``.
  Terms side by side without an operator combine as Lucene does (``OR``, unless ``+``/``-``
  prefixes are used: then ``+`` terms are required and ``-`` terms excluded).
* A bare term without a field (``resnet``) searches the default fields: ``experiment``,
  ``run_id`` and ``tags`` for runs (:data:`DEFAULT_FIELDS`); stores pass their own.
* A list field (``tags``) matches when any element matches. A run without the field never
  matches a term or range on it, so ``NOT field:x`` includes runs that lack the field (as
  in Elasticsearch).

Field kinds (the ``columns`` mappings): :data:`NUMBER`, :data:`BOOLEAN`, :data:`TEXT`,
:data:`DATE`, :data:`TEXT_LIST`, :data:`ANALYZED`, and :data:`EMPTY` for a field that exists but
holds no value.
Boosts (``^2``) are ignored; fuzzy (``~``), proximity and regex queries are refused.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from warehouse.errors import QuerySyntaxError, UnknownField
from warehouse.filters.lucene_dates import date_math as date_math
from warehouse.filters.lucene_dates import date_span as date_span
from warehouse.filters.lucene_dates import iso_ms as iso_ms

NUMBER = "number"
BOOLEAN = "boolean"
TEXT = "text"
DATE = "date"
TEXT_LIST = "text[]"
EMPTY = "empty"  # a field that exists but holds no value anywhere
ANALYZED = "analysed text"  # Elasticsearch ``text``: searched word by word (:func:`analyze`)
ANALYZED_RUN_FIELDS = ("error.message", "git.message", "note")
"""Run fields the Elasticsearch mapping types ``text`` (the standard analyser); every store
searches them word by word. The parity tests check this list against the live mapping."""
TEXT_MAX = "\U0010ffff"
"""The upper bound that closes an open text range (no text sorts after it in practice)."""
DEFAULT_FIELDS = ("experiment", "run_id", "tags")
"""Fields a bare term (no ``field:``) searches in run filters."""

_PARSER_LOCK = threading.Lock()
_EXAMPLE = "e.g. experiment:svm AND metrics.val.acc:>=0.9 AND NOT tags:debug"


@dataclass(frozen=True)
class And:
    """Every item matches; ``And(())`` matches everything."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    """At least one item matches."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    """The item does not match (documents without the field included)."""

    item: Node


@dataclass(frozen=True)
class Term:
    """``field:value``; ``field`` None = the default fields. With ``wildcard`` the value is
    a pattern: ``*`` and ``?`` are wildcards and ``\\`` escapes the next character;
    otherwise it is the literal value, unescaped."""

    field: str | None
    value: str
    wildcard: bool = False


@dataclass(frozen=True)
class Phrase:
    """``field:"a phrase"``: the exact value (quotes removed, escapes resolved)."""

    field: str | None
    value: str


@dataclass(frozen=True)
class Range:
    """``field:[low TO high]``; a None bound is open (``*``); values as typed (strings)."""

    field: str
    low: str | None
    high: str | None
    include_low: bool = True
    include_high: bool = True


@dataclass(frozen=True)
class Exists:
    """``_exists_:field`` or ``field:*``: the field has a (non-empty) value."""

    field: str


Node = And | Or | Not | Term | Phrase | Range | Exists
Leaf = Term | Phrase | Range | Exists
MATCH_ALL: Node = And(())


def parse(text: str | Node | None) -> Node:
    """The filter as a tree; blank text matches everything (a tree is taken as it is).
    Raises QuerySyntaxError."""
    if isinstance(text, And | Or | Not | Term | Phrase | Range | Exists):
        return text
    if text is None or not text.strip():
        return MATCH_ALL
    return _parse_cached(text.strip())


@functools.lru_cache(maxsize=256)
def _parse_cached(text: str) -> Node:
    from luqum.exceptions import ParseError
    from luqum.parser import parser

    try:
        with _PARSER_LOCK:  # ply's parser keeps its stacks on the shared parser object
            tree = parser.parse(_symbol_operators(text))
    except ParseError as exc:
        detail = str(exc)
        found = re.search(r"position (\d+)", detail)
        position = int(found.group(1)) if found else len(text)
        reason = detail.split(":", 1)[-1].strip().rstrip("!")
        reason = re.sub(r"\s+", " ", re.sub(r"\s*at (position \d+|the end)", "", reason))
        raise QuerySyntaxError(
            f"cannot parse filter {text!r} at position {position} ({reason}); check quotes, "
            f"parentheses and operators, {_EXAMPLE}",
            query=text,
            position=position,
        ) from None
    return _convert(tree, None, text)


_SYMBOLS = {"&&": " AND ", "||": " OR "}


def _symbol_operators(text: str) -> str:
    """Lucene's ``&&``, ``||`` and prefix ``!`` as AND, OR and NOT (luqum knows only the words);
    quoted phrases and escaped characters are left alone."""
    if not any(symbol in text for symbol in ("&&", "||", "!")):
        return text
    out: list[str] = []
    i, quoted = 0, False
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            out.append(text[i : i + 2])
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif not quoted and text[i : i + 2] in _SYMBOLS:
            out.append(_SYMBOLS[text[i : i + 2]])
            i += 2
            continue
        elif not quoted and ch == "!" and (i == 0 or text[i - 1] in " \t\n("):
            out.append("NOT ")
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _convert(node: Any, field: str | None, text: str) -> Node:
    from luqum import tree as t

    def sub(child: Any, fld: str | None = field) -> Node:
        return _convert(child, fld, text)

    if isinstance(node, t.SearchField):
        if field is not None:
            raise _bad(text, node, f"field {node.name!r} inside field {field!r}")
        if node.name == "_exists_":
            if not isinstance(node.expr, t.Word):
                raise _bad(text, node, "_exists_ takes one field name")
            return Exists(_unescape(node.expr.value))
        return sub(node.expr, node.name)
    if isinstance(node, t.Word):
        raw = node.value
        if field is None and raw.lower() in ("and", "or", "not"):
            raise _bad(
                text,
                node,
                f"{raw!r} is a search word in Lucene syntax, not an operator; write "
                f"{raw.upper()} in capitals (or quote it to search for the word)",
            )
        if raw == "*":
            return Exists(field) if field else MATCH_ALL
        if re.search(r"(?<!\\)(?:\\\\)*[*?]", raw):
            return Term(field, raw, wildcard=True)
        return Term(field, _unescape(raw))
    if isinstance(node, t.Phrase):
        return Phrase(field, _unescape(node.value[1:-1]))
    if isinstance(node, t.Range | t.From | t.To):
        if field is None:
            raise _bad(text, node, "a range needs a field, e.g. metrics.val.acc:[0.9 TO 1]")
        if isinstance(node, t.Range):
            low, high = _bound(node.low), _bound(node.high)
            return Range(field, low, high, node.include_low, node.include_high)
        if isinstance(node, t.From):
            return Range(field, _bound(node.a), None, node.include, False)
        return Range(field, None, _bound(node.a), False, node.include)
    if isinstance(node, t.AndOperation):
        return _flat(And, [sub(c) for c in node.children])
    if isinstance(node, t.OrOperation):
        return _flat(Or, [sub(c) for c in node.children])
    if isinstance(node, t.UnknownOperation):
        return _clauses(node.children, sub)
    if isinstance(node, t.Not | t.Prohibit):
        return Not(sub(node.a))
    if isinstance(node, t.Plus | t.Group | t.FieldGroup):
        return sub(node.expr if hasattr(node, "expr") else node.a)
    if isinstance(node, t.Boost):
        return sub(node.expr)
    kind = type(node).__name__.lower()
    raise _bad(text, node, f"{kind} queries are not supported; use wildcards or ranges")


def _clauses(children: Any, sub: Any) -> Node:
    """Terms without operators, as Lucene's boolean query: +required, -excluded, else OR."""
    from luqum import tree as t

    must = [sub(c.a) for c in children if isinstance(c, t.Plus)]
    must_not = [Not(sub(c.a)) for c in children if isinstance(c, t.Prohibit)]
    should = [sub(c) for c in children if not isinstance(c, t.Plus | t.Prohibit)]
    if not must and not must_not:
        return _flat(Or, should)
    parts: list[Node] = [*must, *must_not]
    if should and not must:
        parts.append(_flat(Or, should))
    return _flat(And, parts)


def _flat(cls: type[And] | type[Or], items: list[Node]) -> Node:
    out: list[Node] = []
    for item in items:
        out.extend(item.items if isinstance(item, cls) else (item,))
    return out[0] if len(out) == 1 else cls(tuple(out))


def _bound(node: Any) -> str | None:
    value: str = node.value
    if value == "*":
        return None
    if value.startswith('"') and value.endswith('"') and len(value) >= 2:
        value = value[1:-1]
    return _unescape(value)


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _bad(text: str, node: Any, reason: str) -> QuerySyntaxError:
    position = getattr(node, "pos", None) or 0
    return QuerySyntaxError(
        f"cannot use filter {text!r} at position {position}: {reason}; {_EXAMPLE}",
        query=text,
        position=position,
    )


def fields(node: Node) -> set[str]:
    """The field names the filter uses (bare terms add none: they use the default fields)."""
    if isinstance(node, And | Or):
        return set().union(*(fields(i) for i in node.items)) if node.items else set()
    if isinstance(node, Not):
        return fields(node.item)
    return {node.field} if node.field is not None else set()


DERIVED_PREFIXES = ("metrics_ci.",)
"""Fields the warehouse computes from others (the intervals of the metrics): a mistyped
``metrics.val.acc`` is never one of them."""


def suggestable(name: str, known: Collection[str]) -> list[str]:
    """The fields worth suggesting for a mistyped ``name``: ``known`` without the derived
    fields, unless ``name`` itself starts like one."""
    derived = tuple(p for p in DERIVED_PREFIXES if not name.startswith(p))
    return [k for k in known if not k.startswith(derived)]


def unknown_field(name: str, known: Collection[str], what: str = "field") -> UnknownField:
    """The error for a field no record has, naming the closest known fields (never the
    derived ``metrics_ci.*`` ones, unless that is what the name starts with)."""
    close = difflib.get_close_matches(name, suggestable(name, known), n=5, cutoff=0.5)
    hint = f"closest known fields: {', '.join(close)}" if close else "no similar field exists"
    if "sample" in what or "sample_id" in known:
        listing = "a run's sample columns: 'warehouse query samples --run RUN_ID -n 1 -f json'"
    else:
        listing = "the run fields: 'warehouse query runs -n 1 --format json'"
    return UnknownField(
        f"unknown {what} {name!r} ({hint}); list {listing}", field=name, suggestions=close
    )


def check_metric(metric: str, columns: Mapping[str, str]) -> str:
    """The kind of the metric a view ranks by: QuerySyntaxError when no record has the field
    (naming the closest numeric ones) or when it holds something else than numbers."""
    kind = columns.get(metric)
    if kind is None:
        numeric = [k for k, v in columns.items() if v in (NUMBER, EMPTY)]
        raise unknown_field(metric, numeric, "metric")
    if kind not in (NUMBER, EMPTY):
        raise QuerySyntaxError(
            f"metric {metric} holds {kind} values, not numbers; rank by a numeric field such as "
            "metrics.val.acc",
            field=metric,
        )
    return kind


def sort_kind(field: str, columns: Mapping[str, str], *, explicit: bool, what: str) -> str | None:
    """The kind of a sort field (None: no record has it). A field that holds lists cannot
    sort; an unknown field is an error only when the caller named it (``explicit``)."""
    kind = columns.get(field)
    if kind == TEXT_LIST:
        raise QuerySyntaxError(f"cannot sort by {field}: it holds lists; sort by another field")
    if kind == ANALYZED:
        raise QuerySyntaxError(
            f"cannot sort by {field}: it is analysed text (searched word by word); sort by "
            "another field"
        )
    if kind is None and explicit:
        raise unknown_field(field, [c for c in columns if not c.startswith("_")], what)
    return kind


def validate(
    node: Node, columns: Mapping[str, str], default_fields: Collection[str] = DEFAULT_FIELDS
) -> None:
    """Check every field exists in ``columns`` (name -> kind) and every value fits its kind."""
    if isinstance(node, And | Or):
        for item in node.items:
            validate(item, columns, default_fields)
    elif isinstance(node, Not):
        validate(node.item, columns, default_fields)
    elif node.field is None:
        _defaults(columns, default_fields)
    elif node.field not in columns:
        raise unknown_field(node.field, [c for c in columns if not c.startswith("_")])
    elif isinstance(node, Range):
        kind = columns[node.field]
        if kind == ANALYZED:
            raise QuerySyntaxError(
                f"field {node.field} is analysed text (searched word by word); ranges do not "
                f'work on it — search words or phrases instead, e.g. {node.field}:"out of memory"'
                f" or {node.field}:memor*",
                field=node.field,
            )
        for bound in (node.low, node.high):
            if bound is not None:
                _range_value(node.field, kind, bound)
    elif isinstance(node, Term | Phrase):
        kind = columns[node.field]
        if (
            isinstance(node, Term)
            and node.wildcard
            and kind not in (TEXT, TEXT_LIST, EMPTY, ANALYZED)
        ):
            raise QuerySyntaxError(
                f"field {node.field} is {_noun(kind)}; wildcards (* ?) work on text fields only"
                f" — use a range instead, e.g. {node.field}:[0.9 TO *]",
                field=node.field,
            )
        if not (isinstance(node, Term) and node.wildcard):
            _value(node.field, kind, node.value)


def _defaults(columns: Mapping[str, str], default_fields: Collection[str]) -> list[str]:
    present = [f for f in default_fields if columns.get(f) in (TEXT, TEXT_LIST, EMPTY)]
    if not present:
        raise QuerySyntaxError(
            "a term without a field needs default fields that this data lacks; write "
            f"field:value (fields: {', '.join(sorted(c for c in columns if c[:1] != '_'))})"
        )
    return present


def with_field(node: Node, field: str) -> Node:
    """A bare term or phrase (no field) aimed at ``field``; other nodes unchanged."""
    if isinstance(node, Term):
        return Term(field, node.value, node.wildcard)
    if isinstance(node, Phrase):
        return Phrase(field, node.value)
    return node


def default_fields_present(
    columns: Mapping[str, str], default_fields: Collection[str]
) -> list[str]:
    """The default fields a bare term searches that this data has (QuerySyntaxError if none)."""
    return _defaults(columns, default_fields)


def value_of(field: str, kind: str, value: str, *, ranged: bool = False) -> Any:
    """A typed filter value as the Python value a field of ``kind`` compares with (a date as
    an aware datetime, date math evaluated); ``ranged`` for a range bound."""
    return (_range_value if ranged else _value)(field, kind, value)


def _noun(kind: str) -> str:
    return {
        NUMBER: "numeric",
        BOOLEAN: "boolean",
        DATE: "a date",
        TEXT_LIST: "a list",
        ANALYZED: "analysed text",
    }.get(kind, "text")


def _value(field: str, kind: str, value: str) -> Any:
    """``value`` converted to the Python value a column of ``kind`` compares with."""
    if kind == NUMBER:
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if math.isnan(number):
            raise QuerySyntaxError(
                f"field {field} is numeric; {value!r} is not a number (write e.g. "
                f"{field}:0.9 or {field}:>=0.9)",
                field=field,
            )
        return number
    if kind == BOOLEAN:
        if value.lower() not in ("true", "false"):
            raise QuerySyntaxError(
                f"field {field} is boolean; {value!r} is neither true nor false", field=field
            )
        return value.lower() == "true"
    if kind == DATE:
        first, _ = date_span(field, value)
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=first)
    return value


def ms_bounds(
    node: Term | Phrase | Range, now: datetime | None = None
) -> tuple[int | None, int | None]:
    """The closed millisecond interval a date term or range matches (None: open), with
    Elasticsearch's rounding: ``gte``/``lt`` use a bound's first millisecond, ``gt``/``lte``
    its last; a term (``ended_at:2026-11-20``) is the closed span of its value."""
    assert node.field is not None
    if isinstance(node, Range):
        low = high = None
        if node.low is not None:
            first, last = date_span(node.field, node.low, now)
            low = first if node.include_low else last + 1
        if node.high is not None:
            first, last = date_span(node.field, node.high, now)
            high = last if node.include_high else first - 1
        return low, high
    return date_span(node.field, node.value, now)


_QUOTES = "'\u2019"
_TOKEN = re.compile(
    rf"\w+(?:(?:(?<=[^\W\d_])[.{_QUOTES}:](?=[^\W\d_])|(?<=\d)[.,;{_QUOTES}](?=\d))\w+)*"
)


def analyze(text: str) -> list[str]:
    """The words Elasticsearch's standard analyser makes of ``text``, lower-cased: runs of
    letters, digits and ``_``; ``.``, ``'`` and ``:`` inside words (``don't``, ``u.s.a``) and
    ``.``, ``,`` inside numbers (``2.00``, ``1,000``) keep them whole (Unicode word breaks,
    UAX #29, for the common cases)."""
    return [token.lower() for token in _TOKEN.findall(text)]


def _range_value(field: str, kind: str, value: str) -> Any:
    if kind == BOOLEAN:
        raise QuerySyntaxError(f"field {field} is boolean; ranges need numbers, dates or text")
    if kind in (TEXT, TEXT_LIST) and _is_number(value):
        raise QuerySyntaxError(
            f"field {field} is text; a range over the number {value} needs a numeric field "
            "(text ranges compare alphabetically, e.g. run_id:[a TO f])",
            field=field,
        )
    return _value(field, kind, value)


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def any_of(field: str, values: Iterable[str]) -> str:
    """``field:("a" OR "b")``: a filter matching any of ``values`` exactly (each quoted)."""
    quoted = ('"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return f"{field}:({' OR '.join(quoted)})"


__all__ = [
    "ANALYZED",
    "ANALYZED_RUN_FIELDS",
    "BOOLEAN",
    "DATE",
    "DEFAULT_FIELDS",
    "EMPTY",
    "MATCH_ALL",
    "NUMBER",
    "TEXT",
    "TEXT_LIST",
    "TEXT_MAX",
    "And",
    "Exists",
    "Leaf",
    "Node",
    "Not",
    "Or",
    "Phrase",
    "Range",
    "Term",
    "analyze",
    "any_of",
    "check_metric",
    "date_math",
    "date_span",
    "default_fields_present",
    "fields",
    "iso_ms",
    "ms_bounds",
    "parse",
    "sort_kind",
    "suggestable",
    "unknown_field",
    "validate",
    "value_of",
    "with_field",
]
