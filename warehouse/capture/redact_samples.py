"""Secrets in per-sample columns: the same scrub as every other string, cheap enough for
millions of rows.

:func:`scrub_batch` redacts a record batch's column names and every column that holds text
(strings, dictionary-encoded strings, binary, and text nested in lists, structs or maps); no
column that can hold text is passed over. A struct field or a map entry under a secret key
name (``headers.Authorization``, ``{"password": ...}``) is hidden whole, as in a config; a field
named only ``token(s)`` holds text in sample rows (a vocabulary entry) and is judged by value.

A full scan (:meth:`RedactPolicy.text`) costs tens of microseconds a row, so rows are first
**scanned by shape** in Arrow (RE2, in C++), with two regular expressions:

- one that matches wherever any rule but the token rule could. It is built from the rules
  themselves — detect-secrets' plugin regexes, the project's value patterns, the user's
  patterns, the secret key names before ``:``/``=``, URL credentials, private key markers and
  the literal secrets to scrub — each with its lookarounds, anchors and word boundaries dropped
  (dropping a condition only widens what matches), so every row those rules would change is
  among the rows it marks. Those rows get the full scan.
- a run of 20 base64 characters, where the token rule could apply: the other rows it marks
  get the token rule alone (:func:`~warehouse.capture.secret_values.redact_tokens`).

Rows neither marks cannot change and are not read again. A rule RE2 cannot read (a user's
backreference) sends every row of the batch to the full scan.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from warehouse.capture import secret_library
from warehouse.capture.redact import RedactPolicy
from warehouse.capture.secret_keys import (
    MIN_SCRUB_LENGTH,
    REDACTED,
    compact_patterns,
    is_secret_assignment_name,
)
from warehouse.capture.secret_values import BUILTIN_PATTERNS, TOKEN_MIN, redact_tokens

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

_RE2_MAX_REPEAT = 1000
# a repeat's upper count over this is left open ("{0,512}" becomes "{0,}", a superset): RE2
# compiles a count by copying its body, and the copies of the command-line rules' "[^\n]{0,512}"
# made the joined pattern's automaton too large for its cache (150 times slower on plain prose)
_RE2_MAX_RANGE = 16
# a field named only "token(s)": in per-sample rows, a piece of text (a vocabulary entry), whose
# value is judged by the value rules alone
_TOKEN_FIELD = re.compile(r"(?i)tokens?")
TOKEN_SHAPE = f"[A-Za-z0-9+/_\\-]{{{TOKEN_MIN},}}"
"""Where the token rule could apply: a run of base64 characters long enough to be judged."""


@dataclasses.dataclass(frozen=True)
class Scan:
    """How to scrub a text column: the full scan, the RE2 pattern of rows that need it (None:
    every row), and the token rule alone for the rows only :data:`TOKEN_SHAPE` marks."""

    text: Callable[[str], str]
    shape: str | None
    tokens: Callable[[str], str] = redact_tokens
    secret_field: Callable[[str], bool] = lambda name: False


def scrub_batch(
    batch: pa.RecordBatch,
    policy: RedactPolicy,
    secrets: Iterable[str] = (),
    *,
    skip: Iterable[str] = (),
) -> tuple[pa.RecordBatch, dict[str, int]]:
    """``batch`` with the secrets in its column names and text replaced, and what changed:
    per column (by its new name) the number of values changed, and ``"<column> (name)": 1``
    for a column whose name held a secret. Columns named in ``skip`` (inputs that are not
    stored: the ``output`` paths) are left as they are."""
    import pyarrow as pa

    secrets = tuple(secrets)
    literal = tuple(sorted(s for s in secrets if len(s) >= MIN_SCRUB_LENGTH))

    def text(value: str) -> str:
        return policy.text(value, secrets)

    compact = compact_patterns(policy.keys)

    def secret_field(name: str) -> bool:
        return _TOKEN_FIELD.fullmatch(name) is None and is_secret_assignment_name(name, compact)

    scan = Scan(text, shape_pattern(policy, literal), secret_field=secret_field)
    skipped = frozenset(skip)
    names: list[str] = []
    columns: list[pa.Array] = []
    changed: dict[str, int] = {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        new_name = name if name in skipped else text(name)
        count = 0
        if new_name != name:
            changed[f"{new_name} (name)"] = 1
        if name not in skipped and secret_field(name) and _is_text(column.type):
            column, count = _hidden(column)  # a password column: its values, whatever they are
        elif name not in skipped:
            column, count = scrub_array(column, scan)
        if count:
            changed[new_name] = count
        names.append(new_name)
        columns.append(column)
    if not changed:
        return batch, {}
    return pa.RecordBatch.from_arrays(columns, names=names), changed


def _is_text(kind: pa.DataType) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _hidden(array: pa.Array) -> tuple[pa.Array, int]:
    """A text column under a secret name (``password``, ``api_key``): every value hidden, as a
    config value under such a key is; nulls stay null. The number of values changed."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    changed = int(pc.sum(pc.not_equal(array, REDACTED)).as_py() or 0)
    if not changed:
        return array, 0
    mark = pa.scalar(REDACTED, array.type)
    return pc.if_else(array.is_valid(), mark, pa.scalar(None, array.type)), changed


def scrub_array(array: pa.Array, scan: Scan) -> tuple[pa.Array, int]:
    """``array`` with the secrets in each string it holds, at any depth, replaced; the number
    of values changed."""
    import pyarrow as pa

    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _scrub_strings(array, scan)
    if pa.types.is_dictionary(kind):
        dictionary, count = scrub_array(array.dictionary, scan)
        if not count:  # else: the number of distinct values changed
            return array, 0
        return pa.DictionaryArray.from_arrays(array.indices, dictionary), count
    if _holds_text(kind):  # binary, string views, lists, structs, maps: through Python
        changed = [0]
        clean = [_scrub_value(v, scan, changed) for v in array.to_pylist()]
        return (pa.array(clean, type=kind), changed[0]) if changed[0] else (array, 0)
    return array, 0


def _holds_text(kind: pa.DataType) -> bool:
    import pyarrow as pa

    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind):
        return True
    if pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind):
        return True
    if getattr(pa.types, "is_string_view", bool)(kind):
        return True
    if getattr(pa.types, "is_binary_view", bool)(kind):
        return True
    if pa.types.is_dictionary(kind):
        return _holds_text(kind.value_type)
    return any(_holds_text(kind.field(i).type) for i in range(kind.num_fields))


def _scrub_value(value: Any, scan: Scan, count: list[int]) -> Any:
    text = scan.text
    if isinstance(value, str):
        clean = text(value)
        count[0] += clean != value
        return clean
    if isinstance(value, bytes):
        decoded = value.decode("utf-8", "surrogateescape")
        clean = text(decoded)
        if clean == decoded:
            return value
        count[0] += 1
        return clean.encode("utf-8", "surrogateescape")
    if isinstance(value, dict):
        return {k: _field(k, v, scan, count) for k, v in value.items()}
    if isinstance(value, list):
        if value and isinstance(value[0], tuple):  # a map: (key, value) pairs
            return [(_scrub_value(k, scan, count), _field(k, v, scan, count)) for k, v in value]
        return [_scrub_value(v, scan, count) for v in value]
    return value


def _field(name: Any, value: Any, scan: Scan, count: list[int]) -> Any:
    """A struct field's or a map entry's ``value``: hidden whole under a secret name (a text
    only: the column's type is kept), else scrubbed."""
    if (
        isinstance(value, str | bytes)
        and value
        and isinstance(name, str)
        and scan.secret_field(name)
    ):
        count[0] += 1
        return REDACTED if isinstance(value, str) else REDACTED.encode()
    return _scrub_value(value, scan, count)


def _scrub_strings(array: pa.Array, scan: Scan) -> tuple[pa.Array, int]:
    """A string array's rows marked by the scan's shapes, scrubbed (the rest is not read)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if scan.shape is None:
        full = pc.is_valid(array)
        tokens = pc.and_(full, pa.scalar(False))
    else:
        full = pc.fill_null(pc.match_substring_regex(array, scan.shape), False)
        shaped = pc.fill_null(pc.match_substring_regex(array, TOKEN_SHAPE), False)
        tokens = pc.and_not(shaped, full)
    fixed: dict[int, str] = {}
    for mask, scrub in ((full, scan.text), (tokens, scan.tokens)):
        rows = pc.indices_nonzero(mask)
        if not len(rows):
            continue
        values = array.take(rows).to_pylist()
        for row, value in zip(rows.to_pylist(), values, strict=True):
            if (clean := scrub(value)) != value:
                fixed[row] = clean
    if not fixed:
        return array, 0
    at = sorted(fixed)
    mask = pc.is_in(pa.array(range(len(array)), type=pa.int64()), pa.array(at, type=pa.int64()))
    replacement = pa.array([fixed[i] for i in at], type=array.type)
    return pc.replace_with_mask(array, mask, replacement), len(fixed)


@functools.lru_cache(maxsize=16)
def shape_pattern(policy: RedactPolicy, secrets: tuple[str, ...] = ()) -> str | None:
    """One RE2 pattern that matches wherever :meth:`RedactPolicy.text` could change a text by
    another rule than the token rule (see the module docstring); None when RE2 cannot read
    one of the rules."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = [
        _re2(p.pattern, p.flags)
        for plugin in secret_library.plugins(policy.plugins)
        for p in plugin.patterns
    ]
    parts += [_re2(pattern.pattern, pattern.flags) for _, pattern in BUILTIN_PATTERNS]
    parts += [_re2(pattern) for pattern in policy.values]
    keys = compact_patterns(policy.keys)
    if keys:  # a secret name (by the key patterns, whole words, roles) before ":" "=", a flag's
        words = "|".join("[_.\\-]*".join(re.escape(c) for c in key) for key in keys)
        words += "|pass|pwd|bearer|jwt|keys?|sig|signature|pat|dsn|session"
        parts.append(f"(?i:{words})[^\\s:=]*[\"']?[ \\t]*[:=]")
        parts.append(f"-(?i:[^\\s:=]*(?:{words}))[^\\s:=]*[ \\t]")
    # URL credentials (a password may hold "?" or "#"), private keys (a marker YAML folded too)
    parts += ["://[^/\\s]*@", "PRIVATE[ \\t]*\\n?[+\\- \\t]*KEY|PuTTY"]
    parts += [
        re.escape(s) for s in sorted({*policy.secrets, *secrets}) if len(s) >= MIN_SCRUB_LENGTH
    ]
    if any(part is None for part in parts):
        return None
    pattern = "|".join(f"(?:{part})" for part in parts)
    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except pa.ArrowInvalid as exc:
        log.info("secret shapes not readable by RE2 (%s): every sample row is scanned in full", exc)
        return None
    return pattern


def _re2(pattern: str, flags: int = 0) -> str | None:
    """``pattern`` (Python syntax) as RE2 syntax matching at least wherever it matches:
    lookarounds, anchors and word boundaries dropped, possessive and atomic repeats made
    plain, groups made non-capturing, upper counts over :data:`_RE2_MAX_RANGE` left open;
    None when it uses what RE2 has no superset for (backreferences, conditionals)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    verbose = bool(flags & re.VERBOSE)
    while i < n:
        char = pattern[i]
        if char == "\\":
            pair = pattern[i : i + 2]
            if pair[1:] in ("b", "B", "A", "Z", "z"):
                i += 2
                continue
            if pair[1:].isdigit() and pair[1:] != "0":
                return None  # a backreference
            out.append(pair)
            i += 2
        elif char == "[":
            end = _class_end(pattern, i)
            out.append(pattern[i:end])
            i = end
        elif char == "(":
            if pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), i):
                i = _group_end(pattern, i)
                continue
            if pattern.startswith(("(?P=", "(?("), i):
                return None
            if pattern.startswith("(?P<", i):
                i = pattern.index(">", i) + 1
            elif pattern.startswith("(?>", i):
                i += 3
            elif pattern.startswith("(?", i):
                end = i + 2
                while end < n and pattern[end] not in ":)":
                    end += 1
                if pattern[end] == ")":  # inline flags: (?i)
                    out.append(pattern[i : end + 1])
                    i = end + 1
                    continue
                out.append(pattern[i : end + 1])
                i = end + 1
                continue
            else:
                i += 1
            out.append("(?:")
        elif char in "^$":
            i += 1
        elif char in "*+?}" and i + 1 < n and pattern[i + 1] == "+":
            out.append(char)
            i += 2
        elif char == "{":
            end = pattern.find("}", i)
            counts = pattern[i + 1 : end] if end > 0 else ""
            if end < 0 or not re.fullmatch(r"\d*,?\d*", counts):
                out.append("\\{")
                i += 1
                continue
            low, comma, high = counts.partition(",")
            low = low or "0"
            if int(low) > _RE2_MAX_REPEAT or (high and int(high) > _RE2_MAX_RANGE):
                out.append(f"{{{min(int(low), _RE2_MAX_REPEAT)},}}")
            else:
                out.append(f"{{{low}{comma}{high}}}")
            i = end + 1
            if i < n and pattern[i] == "+":  # possessive
                i += 1
        elif verbose and char.isspace():
            i += 1
        elif verbose and char == "#":
            while i < n and pattern[i] != "\n":
                i += 1
        else:
            out.append(char)
            i += 1
    text = "".join(out)
    modes = ("i" if flags & re.IGNORECASE else "") + ("s" if flags & re.DOTALL else "")
    return f"(?{modes}:{text})" if modes else text


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class starting at ``start``."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def _group_end(pattern: str, start: int) -> int:
    """The index after the group opening at ``start`` (nested groups and classes skipped)."""
    depth = 0
    i = start
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _class_end(pattern, i)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


__all__ = ["TOKEN_SHAPE", "Scan", "scrub_array", "scrub_batch", "shape_pattern"]
