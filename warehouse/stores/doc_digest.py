"""The content digest of a run document, kept in the document itself (``content_sha256``).

Stamped when a run is written (:func:`stamp`, by the recording path in ``replication/``), so
every copy carries the digest of what was written: the outbox entry, the local run file and
Elasticsearch's ``_source``. A copy whose digest no longer matches its content was changed
afterwards (a hand edit, a flipped bit, a partial restore): ``warehouse sync --verify`` says
so by run id and side, and never takes that copy over the other.

The digest is the sha256 of the document without the field, as canonical JSON (sorted keys,
no blanks, UTF-8, every float rounded to 12 significant digits, then written as Python writes
it): the same on every store that gives the document back as it was given. The rounding is
there because not every JSON parser on the way reads a float's 17 digits back to the same
double (the Elasticsearch test server reads ``0.025000000000000022`` as ``...026``): an error
in the last bit is not a change of content, an edit of a metric is.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

FIELD = "content_sha256"


def digest(doc: dict[str, Any]) -> str:
    """The sha256 (hex) of ``doc`` less :data:`FIELD`."""
    body = {k: _canonical(v) for k, v in doc.items() if k != FIELD}
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def _canonical(value: Any) -> Any:
    """``value`` with every float rounded to 12 significant digits (see the module)."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def stamp(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with its digest in :data:`FIELD` (a new dict)."""
    return {**doc, FIELD: digest(doc)}


def intact(doc: dict[str, Any]) -> bool | None:
    """Whether ``doc`` matches the digest it carries (None: it carries none)."""
    recorded = doc.get(FIELD)
    if not isinstance(recorded, str):
        return None
    return recorded == digest(doc)


__all__ = ["FIELD", "digest", "intact", "stamp"]
