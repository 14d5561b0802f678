"""Elasticsearch's grouped sample counts (``Store.group_samples``): one aggregation request —
``terms`` (or ``range`` for bins) with a ``value_count``, a ``sum`` or a ``filter`` on true, and
a ``filter`` on 0/false — the mirror of ``local_groups.py``. Never a read of every row.

Boolean columns are counted with ``filter`` sub-aggregations (a ``sum``/``avg`` of a boolean is
not answered alike by every Elasticsearch-API server); groups are put in the query's order
(:meth:`GroupQuery.arrange`) after the answer, so both stores return the same list.
"""

from __future__ import annotations

import math
from typing import Any

from warehouse.filters import lucene
from warehouse.stores.base import Group, GroupQuery

MAX_GROUPS = 10_000


def scope(query: GroupQuery, *extra: dict[str, Any]) -> dict[str, Any]:
    """The rows grouped: the runs' samples of the split (and ``extra`` conditions)."""
    return {
        "bool": {
            "filter": [
                {"terms": {"run_id": list(query.run_ids)}},
                {"term": {"split": query.split}},
                *extra,
            ]
        }
    }


def most_wrong_body(query: GroupQuery, column_kind: str) -> dict[str, Any]:
    """The groups with the most 0/false rows, by the ``_count`` of those rows alone (the
    default terms order, which every Elasticsearch-API server honours), with room for ties."""
    zero = False if column_kind == lucene.BOOLEAN else 0
    size = 2 * (query.limit or MAX_GROUPS // 2)
    return {
        "size": 0,
        "query": scope(query, {"term": {query.column: zero}}),
        "aggs": {"wrong": {"terms": {"field": query.by, "size": min(size, MAX_GROUPS)}}},
    }


def candidates(answer: dict[str, Any]) -> list[Any]:
    """The keys :func:`most_wrong_body` found."""
    return [b["key"] for b in answer["aggregations"]["wrong"]["buckets"]]


def range_body(query: GroupQuery) -> dict[str, Any]:
    """The smallest and largest value of ``by`` (to cut bins from)."""
    return {
        "size": 0,
        "query": scope(query),
        "aggs": {"lo": {"min": {"field": query.by}}, "hi": {"max": {"field": query.by}}},
    }


def body(
    query: GroupQuery, column_kind: str, cuts: list[float], keys: list[Any] | None = None
) -> dict[str, Any]:
    """The aggregation request of ``query`` (``cuts``: the bins' edges, when binned; ``keys``:
    only these groups)."""
    column = query.column
    if column_kind == lucene.BOOLEAN:
        counts: dict[str, Any] = {
            "n": {"value_count": {"field": column}},
            "right": {"filter": {"term": {column: True}}},
            "wrong": {"filter": {"term": {column: False}}},
        }
    else:
        counts = {
            "n": {"value_count": {"field": column}},
            "total": {"sum": {"field": column}},
            "wrong": {"filter": {"term": {column: 0}}},
        }
    groups: dict[str, Any]
    if cuts:
        ranges = [{"from": cuts[i], "to": cuts[i + 1]} for i in range(len(cuts) - 1)]
        ranges[-1]["to"] = math.nextafter(cuts[-1], math.inf)  # the last bin is closed
        groups = {"range": {"field": query.by, "ranges": ranges}, "aggs": counts}
    else:
        size = MAX_GROUPS if keys is None else max(1, len(keys))
        groups = {"terms": {"field": query.by, "size": size}, "aggs": counts}
    aggs: dict[str, Any] = {"groups": groups}
    if query.per_run:
        runs = {"terms": {"field": "run_id", "size": len(query.run_ids)}, "aggs": aggs}
        aggs = {"runs": runs}
    only = () if keys is None else ({"terms": {query.by: keys}},)
    return {"size": 0, "query": scope(query, *only), "aggs": aggs}


def groups(answer: dict[str, Any], query: GroupQuery, cuts: list[float]) -> list[Group]:
    """The answer as groups, in the query's order."""
    aggs = answer["aggregations"]
    found: list[Group] = []
    if query.per_run:
        for run in aggs["runs"]["buckets"]:
            found += _groups(run["groups"]["buckets"], cuts, str(run["key"]))
    else:
        found = _groups(aggs["groups"]["buckets"], cuts, None)
    return query.arrange(found)


def _groups(buckets: list[dict[str, Any]], cuts: list[float], run_id: str | None) -> list[Group]:
    out = []
    for i, bucket in enumerate(buckets):
        n = int(bucket["n"]["value"])
        if not n:
            continue
        total = bucket["right"]["doc_count"] if "right" in bucket else bucket["total"]["value"]
        key = (cuts[i], cuts[i + 1]) if cuts else _key(bucket)
        out.append(Group(key, n, float(total or 0.0), int(bucket["wrong"]["doc_count"]), run_id))
    return out


def _key(bucket: dict[str, Any]) -> Any:
    """As the local store keys groups: booleans as true/false, numbers as floats."""
    key = bucket["key"]
    if bucket.get("key_as_string") in ("true", "false") and key in (0, 1):
        return bucket["key_as_string"]
    if isinstance(key, int | float):
        return float(key)
    return key


__all__ = ["body", "candidates", "groups", "most_wrong_body", "range_body"]
