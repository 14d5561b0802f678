"""Values as every store holds them: JSON-safe, times in UTC ISO 8601."""

from __future__ import annotations

import enum
import json
import math
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from warehouse.values import IsoStamps, iso_utc, json_safe, parse_time


class Colour(enum.Enum):
    RED = "red"


def test_json_safe_turns_every_odd_value_into_plain_json() -> None:
    value = {
        1: [math.nan, math.inf, -math.inf, 0.5],
        "when": datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2))),
        "day": date(2026, 1, 2),
        "colour": Colour.RED,
        "path": Path("/x/y"),
        "np": np.float32(0.25),
        "set": {3},
        "other": object,
    }
    safe = json_safe(value)
    assert json.loads(json.dumps(safe, allow_nan=False)) == safe
    assert safe["1"] == [None, None, None, 0.5]
    assert safe["when"] == "2026-01-02T01:04:05Z"
    assert safe["day"] == "2026-01-02"
    assert (safe["colour"], safe["path"], safe["np"], safe["set"]) == ("red", "/x/y", 0.25, [3])


def test_times_round_trip_in_utc() -> None:
    moment = datetime(2026, 11, 23, 10, 0, 0, 123456, tzinfo=UTC)
    assert iso_utc(moment) == "2026-11-23T10:00:00.123456Z"
    assert iso_utc(moment.replace(tzinfo=None)) == "2026-11-23T10:00:00.123456Z"  # naive = UTC
    assert parse_time(iso_utc(moment)) == moment
    assert parse_time("2026-11-23") == datetime(2026, 11, 23, tzinfo=UTC)
    assert parse_time("not a time") is None
    assert parse_time(None) is None


def test_iso_stamps_agree_with_iso_utc() -> None:
    stamp = IsoStamps()
    for t in (1_700_000_000.5, 1_700_000_000.75, 1_700_000_001.000001):
        expected = iso_utc(datetime.fromtimestamp(t, UTC))
        assert stamp(t)[:23] == expected[:23]  # equal to the millisecond (float seconds)
