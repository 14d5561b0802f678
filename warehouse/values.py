"""Values as JSON and every store hold them: finite numbers, UTC ISO-8601 times, plain types.

JSON has no NaN or infinity and no datetime; Elasticsearch rejects the first and the local
store would write them as invalid JSON. :func:`json_safe` is the one conversion used before a
record leaves the process (outbox entries, documents), :func:`iso_utc` the one time format
(``2026-01-02T03:04:05.123456Z``, as pydantic writes the records) and :func:`parse_time` its
reader.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
import time
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data: non-finite floats → None, datetimes → ISO 8601 UTC, enums →
    their value, paths → text, numpy scalars → Python numbers, anything else → ``str``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | int | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    if isinstance(value, dt.datetime):
        return iso_utc(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return json_safe(value.value)
    if isinstance(value, PurePath):
        return str(value)
    item = getattr(value, "item", None)  # numpy / torch scalars
    if callable(item):
        return json_safe(item())
    return str(value)


def iso_utc(moment: dt.datetime) -> str:
    """A time as the records write it: UTC, ISO 8601, ``Z`` suffix (naive = already UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def parse_time(value: Any) -> dt.datetime | None:
    """An ISO-8601 text (or a datetime) as an aware UTC datetime; None if it is not one."""
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, str) and value:
        try:
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


class IsoStamps:
    """:func:`iso_utc` of epoch seconds, fast: the date part is cached per second (for the
    step logger, which stamps thousands of documents a second)."""

    def __init__(self) -> None:
        self.second = -1
        self.prefix = ""

    def __call__(self, t: float) -> str:
        sec = int(t)
        if sec != self.second:
            self.second = sec
            self.prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        return f"{self.prefix}.{int((t - sec) * 1e6):06d}Z"


__all__ = ["IsoStamps", "iso_utc", "json_safe", "parse_time"]
