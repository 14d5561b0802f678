"""Dates in Lucene filters, as Elasticsearch reads them: ISO-8601, epoch milliseconds and
date math (``now-7d``, ``now-1M/M``, ``2026-11-20||+1M/d``).

:func:`date_span` gives the first and last millisecond a typed date means (the ends a
``gte``/``lt`` and a ``gt``/``lte`` bound use); :func:`date_math` evaluates ``now...``;
:func:`iso_ms` writes milliseconds back as ISO-8601. :mod:`warehouse.filters.lucene`
re-exports these and turns them into a filter's bounds (:func:`warehouse.filters.lucene.ms_bounds`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from warehouse.errors import QuerySyntaxError

_DATE_MATH = re.compile(r"now((?:[+-]\d+[yMwdhHms])*)(?:/([yMwdhHms]))?")
_MATH = re.compile(r"((?:[+-]\d+[yMwdhHms])*)(?:/([yMwdhHms]))?")
_STEP = re.compile(r"([+-])(\d+)([yMwdhHms])")
_SECONDS = {"w": 604_800, "d": 86_400, "h": 3_600, "H": 3_600, "m": 60, "s": 1}
_ISO = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[T ](\d{2})(?::(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?)?)?)?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?"
)
_MS = timedelta(milliseconds=1)


def date_math(field: str, value: str, now: datetime | None = None) -> datetime:
    """Elasticsearch date math as Kibana users type it: ``now``, ``now-7d``, ``now-1M/M``.

    Units y M w d h/H m s; ``/unit`` rounds down to the start of that unit (UTC): the moment a
    ``gte``/``lt`` bound means. :func:`date_span` gives both ends, as Elasticsearch rounds them.
    """
    found = _DATE_MATH.fullmatch(value)
    if found is None:
        raise _bad_math(field, value)
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return _apply_math(moment, found.group(1), found.group(2), up=False)


def _bad_math(field: str, value: str) -> QuerySyntaxError:
    return QuerySyntaxError(
        f"field {field}: cannot read the date math {value!r}; write e.g. now-7d, now-1h, "
        "now-1M/M (units y M w d h m s), or 2026-11-20||+1M/d",
        field=field,
    )


def _apply_math(moment: datetime, steps: str, unit: str | None, *, up: bool) -> datetime:
    for sign, amount, step_unit in _STEP.findall(steps):
        n = int(amount) * (1 if sign == "+" else -1)
        if step_unit in ("y", "M"):
            months = moment.year * 12 + moment.month - 1 + (n * 12 if step_unit == "y" else n)
            year, month = divmod(months, 12)
            moment = _with_month(moment, year, month + 1)
        else:
            moment += timedelta(seconds=n * _SECONDS[step_unit])
    if unit:
        moment = _round_down(moment, unit)
        if up:  # the last millisecond of the unit
            moment = _next_unit(moment, unit) - _MS
    return moment


def date_span(field: str, value: str, now: datetime | None = None) -> tuple[int, int]:
    """The first and last millisecond (since the epoch, UTC) a typed date means, exactly as
    Elasticsearch parses a bound: the first for ``gte``/``lt``, the last for ``gt``/``lte``.

    * Date math (``now-1d/d``, ``2026-11-20||+1M/M``): ``/unit`` rounds to the unit's first or
      last millisecond.
    * A date with parts missing: the first millisecond fills them with their minimum; the last
      with Elasticsearch's documented defaults (month 01, day 01, hour 23, minute 59, second
      59, fraction .999...): ``2026-11-20`` spans the whole day, ``2026-11-20T10:00:00`` the
      whole second, and ``2026-11`` (like Elasticsearch) only 1 November.
    * Digits only, longer than a year: milliseconds since the epoch.
    Date fields hold milliseconds (Elasticsearch's ``date``); finer parts are cut off.
    """
    text = value.strip()
    if text.startswith("now"):
        found = _DATE_MATH.fullmatch(text)
        if found is None:
            raise _bad_math(field, value)
        moment = (now or datetime.now(UTC)).astimezone(UTC)
        low = _apply_math(moment, found.group(1), found.group(2), up=False)
        high = _apply_math(moment, found.group(1), found.group(2), up=True)
        return _ms(low), _ms(high)
    anchor, sep, math_text = text.partition("||")
    if sep:
        found = _MATH.fullmatch(math_text)
        if found is None:
            raise _bad_math(field, value)
        start = _parse_date(field, anchor, up=False)
        low = _apply_math(start, found.group(1), found.group(2), up=False)
        high = _apply_math(start, found.group(1), found.group(2), up=True)
        return _ms(low), _ms(high)
    if text.isdigit() and len(text) > 4:
        return int(text), int(text)
    return _ms(_parse_date(field, text, up=False)), _ms(_parse_date(field, text, up=True))


def _parse_date(field: str, text: str, *, up: bool) -> datetime:
    found = _ISO.fullmatch(text)
    if found is None:
        raise QuerySyntaxError(
            f"field {field} is a date; {text!r} is neither ISO-8601 nor date math (write "
            f'e.g. {field}:>=2024-05-01, {field}:>="2024-05-01T12:00:00" or '
            f"{field}:>now-7d)",
            field=field,
        )
    year, month, day, hour, minute, second, fraction, zone = found.groups()
    if up:  # Elasticsearch's round-up parser: the documented defaults for missing parts
        parts = [month or "01", day or "01", hour or "23", minute or "59", second or "59"]
        nanos = int((fraction or "999999999").ljust(9, "0"))
    else:
        parts = [month or "01", day or "01", hour or "00", minute or "00", second or "00"]
        nanos = int((fraction or "0").ljust(9, "0"))
    try:
        month_, day_, hour_, minute_, second_ = (int(p) for p in parts)
        moment = datetime(
            int(year), month_, day_, hour_, minute_, second_, nanos // 1000, tzinfo=UTC
        )
    except ValueError as exc:
        raise QuerySyntaxError(f"field {field}: {text!r} is not a valid date ({exc})") from None
    if zone and zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
        moment -= sign * offset
    return moment


def _ms(moment: datetime) -> int:
    """Milliseconds since the epoch, finer parts cut off (toward the past)."""
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def iso_ms(ms: int) -> str:
    """Milliseconds since the epoch as ISO-8601 with milliseconds, in UTC."""
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _with_month(moment: datetime, year: int, month: int) -> datetime:
    import calendar

    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


def _round_down(moment: datetime, unit: str) -> datetime:
    if unit == "y":
        return moment.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "M":
        return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "w":
        start = moment - timedelta(days=moment.weekday())
        return start.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "d":
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit in ("h", "H"):
        return moment.replace(minute=0, second=0, microsecond=0)
    if unit == "m":
        return moment.replace(second=0, microsecond=0)
    return moment.replace(microsecond=0)


def _next_unit(start: datetime, unit: str) -> datetime:
    if unit == "y":
        return start.replace(year=start.year + 1)
    if unit == "M":
        return _with_month(start, start.year + start.month // 12, start.month % 12 + 1)
    step = {"w": 604_800, "d": 86_400, "h": 3_600, "H": 3_600, "m": 60, "s": 1}[unit]
    return start + timedelta(seconds=step)
