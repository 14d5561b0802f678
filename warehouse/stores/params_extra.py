"""The rules of params that both stores must apply alike, written once here for the
Elasticsearch translation and the local store; nothing here imports a client.

- ``params_extra``: where a run with more than ``MAX_TYPED_PARAMS`` params keeps the rest, a
  keyed ``flattened`` field on Elasticsearch: text values, no wildcard but a prefix, no
  one-sided range.
- Booleans: a boolean param is stored as the text ``true``/``false`` wherever its key also
  holds text (Elasticsearch maps boolean params as keywords; the local store turns a column
  of mixed values into text), while a column of booleans alone is boolean on the local store,
  where ``TRUE`` and ``True`` match it too. So on text, a value spelling a boolean in another
  letter case (``params.data.augment:TRUE``) also matches the stored word
  (:func:`spellings`): ``TRUE`` finds the same runs on both stores.
"""

from __future__ import annotations

import re

from warehouse.errors import QuerySyntaxError
from warehouse.filters import lucene
from warehouse.stores.elastic_templates import MAX_TYPED_PARAMS

EXTRA = "params_extra"


def extra_bounds(node: lucene.Range) -> tuple[str, str]:
    """A range's bounds on ``params_extra`` (text), both given: keyed ``flattened`` fields
    take no one-sided range."""
    low = "" if node.low is None else node.low
    high = lucene.TEXT_MAX if node.high is None else node.high
    return low, high


def wildcard_prefix(pattern: str) -> str | None:
    """``abc*`` → ``abc`` (unescaped); None when the pattern is not a plain prefix."""
    if not pattern.endswith("*") or pattern.endswith("\\*"):
        return None
    body = pattern[:-1]
    if re.search(r"(?<!\\)(?:\\\\)*[*?]", body):
        return None
    return re.sub(r"\\(.)", r"\1", body)


def extra_wildcard_error(field: str, pattern: str) -> QuerySyntaxError:
    """The error for a wildcard on a key some runs keep in ``params_extra``."""
    key = field.split(".", 1)[1]
    return QuerySyntaxError(
        f"params.{key}:{pattern}: runs with more than {MAX_TYPED_PARAMS:,} params keep "
        f"params.{key} in params_extra, where Elasticsearch takes no wildcard but a trailing * "
        f"(a prefix); write params.{key}:{wildcard_stem(pattern) or 'abc'}* or an exact value",
        field=f"params.{key}",
    )


def wildcard_stem(pattern: str) -> str:
    """The literal start of a wildcard pattern (up to its first wildcard)."""
    found = re.search(r"(?<!\\)(?:\\\\)*[*?]", pattern)
    return pattern if found is None else pattern[: found.start() + len(found.group()) - 1]


def spellings(value: str) -> tuple[str, ...]:
    """The texts a params term matches: itself, and the stored word of a boolean (``true``,
    ``false``) when ``value`` spells one in another letter case (``TRUE``, ``False``)."""
    word = value.lower()
    if word in ("true", "false") and word != value:
        return (value, word)
    return (value,)
