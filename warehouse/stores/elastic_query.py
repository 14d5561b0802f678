"""Our Lucene filters as Elasticsearch query DSL, checked against the index mapping first.

The filter text is parsed once by :mod:`warehouse.lucene` (the same tree the local store
evaluates) and validated against the fields the index has mapped, with the same kinds and the
same error messages as the local store; then each node becomes a DSL clause:

    Term/Phrase -> term (wildcard -> wildcard)     Range  -> range
    Exists      -> exists                          And/Or/Not -> bool filter/should/must_not

A bare term searches the default fields (``experiment``, ``run_id``, ``tags`` for runs;
``sample_id`` for samples). ``params.<key>`` also looks in ``params_extra`` (the keyword-only
params of runs with huge configs, see ``elastic_templates``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

import elastic_transport
from elasticsearch import ApiError, Elasticsearch

from warehouse import lucene
from warehouse.errors import QuerySyntaxError

PAGE = 1000
MAX_WINDOW = 10_000  # index.max_result_window: deeper reads go through a point in time

_NUMERIC = frozenset(
    {
        "double",
        "float",
        "half_float",
        "scaled_float",
        "long",
        "integer",
        "short",
        "byte",
        "unsigned_long",
    }
)
_DATES = frozenset({"date", "date_nanos"})
_LISTS = frozenset({"tags", "invalid_metrics", "overrides"})  # as the local store types them
EXTRA = "params_extra"


def kinds(mapping_answer: Mapping[str, Any]) -> dict[str, str]:
    """``{dotted.field: lucene kind}`` from a ``GET <index>/_mapping`` answer (all indices)."""
    out: dict[str, str] = {}
    for index_mapping in mapping_answer.values():
        _walk(index_mapping.get("mappings", {}).get("properties", {}), "", out)
    return out


def _walk(properties: Mapping[str, Any], prefix: str, out: dict[str, str]) -> None:
    for name, spec in properties.items():
        path = f"{prefix}{name}"
        if "properties" in spec:
            _walk(spec["properties"], f"{path}.", out)
            continue
        kind = str(spec.get("type", "object"))
        if kind == "object" or spec.get("enabled") is False:
            continue
        if kind in _NUMERIC:
            out[path] = lucene.NUMBER
        elif kind == "boolean":
            out[path] = lucene.BOOLEAN
        elif kind in _DATES:
            out[path] = lucene.DATE
        else:
            out[path] = lucene.TEXT_LIST if path in _LISTS else lucene.TEXT


def to_query(
    text: str | None, columns: Mapping[str, str], default_fields: Collection[str]
) -> dict[str, Any]:
    """The DSL for a filter (``match_all`` for none); raises QuerySyntaxError like local."""
    node = lucene.parse(text)
    if node == lucene.MATCH_ALL:
        return {"match_all": {}}
    full = with_extra_params(columns, lucene.fields(node))
    lucene.validate(node, full, default_fields)
    only_extra = frozenset(full) - frozenset(columns)
    return _dsl(node, full, default_fields, _Extra(EXTRA in columns, only_extra))


class _Extra:
    """Whether the index has ``params_extra``, and the params keys found only there."""

    def __init__(self, present: bool, only: frozenset[str]) -> None:
        self.present, self.only = present, only


def with_extra_params(columns: Mapping[str, str], names: Collection[str]) -> dict[str, str]:
    """``columns`` plus any ``params.<key>`` the index keeps only in ``params_extra``."""
    out = dict(columns)
    if EXTRA in columns:
        for name in names:
            if name.startswith("params.") and name not in out:
                out[name] = lucene.TEXT
    return out


def _dsl(
    node: lucene.Node, columns: Mapping[str, str], defaults: Collection[str], extra: _Extra
) -> dict[str, Any]:
    if isinstance(node, lucene.And):
        if not node.items:
            return {"match_all": {}}
        return {"bool": {"filter": [_dsl(i, columns, defaults, extra) for i in node.items]}}
    if isinstance(node, lucene.Or):
        return {
            "bool": {
                "should": [_dsl(i, columns, defaults, extra) for i in node.items],
                "minimum_should_match": 1,
            }
        }
    if isinstance(node, lucene.Not):
        return {"bool": {"must_not": [_dsl(node.item, columns, defaults, extra)]}}
    if node.field is None:
        present = [f for f in defaults if columns.get(f) in (lucene.TEXT, lucene.TEXT_LIST)]
        return _dsl(
            lucene.Or(tuple(lucene.with_field(node, f) for f in present)), columns, defaults, extra
        )
    field = node.field
    kind = columns[field]
    if field in extra.only:  # a key only runs with huge configs have: keyword-only
        return _leaf(node, EXTRA + field[len("params") :], lucene.TEXT)
    clause = _leaf(node, field, kind)
    if extra.present and field.startswith("params.") and not isinstance(node, lucene.Range):
        other = _leaf(node, EXTRA + field[len("params") :], lucene.TEXT)
        return {"bool": {"should": [clause, other], "minimum_should_match": 1}}
    return clause


def _leaf(node: lucene.Node, field: str, kind: str) -> dict[str, Any]:
    if isinstance(node, lucene.Exists):
        return {"exists": {"field": field}}
    if isinstance(node, lucene.Range):
        bounds: dict[str, Any] = {}
        if node.low is not None:
            bounds["gte" if node.include_low else "gt"] = _value(field, kind, node.low)
        if node.high is not None:
            bounds["lte" if node.include_high else "lt"] = _value(field, kind, node.high)
        if not bounds:
            return {"exists": {"field": field}}
        return {"range": {field: bounds}}
    if isinstance(node, lucene.Term) and node.wildcard:
        return {"wildcard": {field: {"value": node.value}}}
    if isinstance(node, lucene.Term | lucene.Phrase):
        value = _value(field, kind, node.value)
        if kind == lucene.NUMBER:  # equality as a closed range: exact, and 3 == 3.0 everywhere
            return {"range": {field: {"gte": value, "lte": value}}}
        return {"term": {field: value}}
    raise QuerySyntaxError(f"cannot translate {node!r} for Elasticsearch")  # pragma: no cover


def _value(field: str, kind: str, value: str) -> Any:
    if kind == lucene.NUMBER:
        return float(value)
    if kind == lucene.BOOLEAN:
        return value.lower() == "true"
    return value


def check_sort(field: str, order: str, columns: Mapping[str, str], what: str) -> str | None:
    """The kind of a sort field (None: unknown), refusing bad orders and list fields."""
    if order not in ("asc", "desc"):
        raise QuerySyntaxError(f"sort order {order!r} of {field} is neither 'asc' nor 'desc'")
    kind = columns.get(field)
    if kind == lucene.TEXT_LIST:
        raise QuerySyntaxError(f"cannot sort by {field}: it holds lists; sort by another field")
    if kind is None and what:
        raise lucene.unknown_field(field, columns, what)
    return kind


def hits(
    client: Elasticsearch,
    index: str,
    body: dict[str, Any],
    limit: int | None,
    offset: int,
    guard: Callable[[], AbstractContextManager[None]],
) -> Iterator[dict[str, Any]]:
    """Hits of a sorted search: one request when small, else point in time + search_after.

    ``guard()`` wraps every request (the store's error mapping).
    """
    if limit is not None and offset + limit <= MAX_WINDOW:
        with guard():
            found = client.search(index=index, from_=offset, size=limit, **body).body
        yield from found["hits"]["hits"]
        return
    with guard():
        pit = client.open_point_in_time(index=index, keep_alive="2m").body["id"]
    skip, sent = offset, 0
    after: list[Any] | None = None
    try:
        while limit is None or sent < limit:
            request = {**body, "size": PAGE, "pit": {"id": pit, "keep_alive": "2m"}}
            if after is not None:
                request["search_after"] = after
            with guard():
                page = client.search(**request).body
            pit = page.get("pit_id", pit)
            batch = page["hits"]["hits"]
            if not batch:
                return
            after = batch[-1]["sort"]
            for hit in batch:
                if skip:
                    skip -= 1
                    continue
                yield hit
                sent += 1
                if limit is not None and sent >= limit:
                    return
    finally:
        with contextlib.suppress(ApiError, elastic_transport.TransportError):
            client.close_point_in_time(id=pit)


def check_limit(limit: int | None) -> int | None:
    if limit is not None and limit < 0:
        raise QuerySyntaxError(f"limit {limit} is negative; use 0 or more, or no limit")
    return limit


def path(doc: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted ``key`` of ``doc``, where keys may themselves hold dots."""
    if key in doc:
        return doc[key]
    for i, char in enumerate(key):
        if char == "." and isinstance(doc.get(key[:i]), Mapping):
            found = path(doc[key[:i]], key[i + 1 :])
            if found is not None:
                return found
    return None


def instant(value: Any) -> str:
    """An ISO time as a sortable UTC string ('' for none)."""
    if not value:
        return ""
    try:
        moment = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return str(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).isoformat()


__all__ = [
    "EXTRA",
    "check_limit",
    "check_sort",
    "hits",
    "instant",
    "kinds",
    "path",
    "to_query",
    "with_extra_params",
]
