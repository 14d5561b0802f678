"""Step documents as JSON lines: the bytes the local store appends to a run's steps file."""

from __future__ import annotations

import json
from operator import itemgetter
from typing import Any

_BOUNDARY = "warehouse:step-line-end:5f0c2a9e"
"""Put between documents in the one orjson array: ``,"<it>",`` in the output marks a line end
(a quote inside a text is written escaped, so only this exact string value can match, and a
document holding it is found by the count)."""
_BOUNDARY_JSON = f',"{_BOUNDARY}",'.encode()
_RUN_AND_EXPERIMENT = itemgetter("run_id", "experiment")


def encode_lines(docs: list[dict[str, Any]], run_id: str, experiment: str) -> bytes:
    """Step documents as JSON lines, the batch at once: what a store appends to a run's steps
    file. Each line holds ``{**doc, "run_id": run_id, "experiment": experiment}``: the same
    content as ``json.dumps(..., ensure_ascii=False, default=str)`` line by line, many times
    faster: one orjson call over the whole batch (documents with a boundary string between
    them, turned into newlines); a batch holding a value orjson refuses (a key that is not a
    string) goes through one reused ``json`` encoder.

    Values JSON has no type for are written as ``str(value)``, as ``default=str`` does."""
    if not docs:
        return b""
    rows = docs
    try:
        same = set(map(_RUN_AND_EXPERIMENT, docs)) == {(run_id, experiment)}
    except KeyError:
        same = False
    if not same:
        rows = [{**d, "run_id": run_id, "experiment": experiment} for d in docs]
    import orjson  # a core dependency, imported on the first batch (not at CLI start)

    n = len(rows)
    spaced: list[Any] = [_BOUNDARY] * (2 * n - 1)
    spaced[::2] = rows
    try:
        body = orjson.dumps(spaced)
    except (TypeError, orjson.JSONEncodeError):  # a value orjson refuses: json's way
        pass
    else:
        lines = body.split(_BOUNDARY_JSON)
        if len(lines) == n:  # else a document holds the boundary string
            lines[0] = lines[0][1:]  # less the array's "[" and "]"
            lines[-1] = lines[-1][:-1] + b"\n"
            return b"\n".join(lines)
        dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
        return b"".join([dumps(d, option=newline) for d in rows])
    encode = json.JSONEncoder(ensure_ascii=False, default=str).encode
    return ("\n".join(map(encode, rows)) + "\n").encode()
