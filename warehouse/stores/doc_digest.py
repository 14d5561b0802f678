"""The content digest of a run document, kept in the document itself (``content_sha256``).

Stamped when a run is written (:func:`stamp`, by the recording path in ``replication/``), so
every copy carries the digest of what was written: the outbox entry, the local run file and
Elasticsearch's ``_source``. A copy whose digest no longer matches its content was changed
afterwards (a hand edit, a flipped bit, a partial restore): ``warehouse sync --verify`` says
so by run id and side, and never takes that copy over the other.

The digest is the sha256 of the document without the field, as canonical JSON (sorted keys,
no blanks, UTF-8, numbers as Python writes them): the same on every store that gives the
document back as it was given.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

FIELD = "content_sha256"


def digest(doc: dict[str, Any]) -> str:
    """The sha256 (hex) of ``doc`` less :data:`FIELD`."""
    body = {k: v for k, v in doc.items() if k != FIELD}
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


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
