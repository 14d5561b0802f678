"""Our Lucene filters as Elasticsearch query DSL, checked against the index mapping first.

The filter text is parsed once by :mod:`warehouse.filters.lucene` (the same tree the local store
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
import math
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

import elastic_transport
from elasticsearch import ApiError, Elasticsearch

from warehouse.errors import QuerySyntaxError
from warehouse.filters import lucene
from warehouse.filters.docpath import get_path
from warehouse.stores.base import ExperimentBest, RankQuery, RunQuery
from warehouse.stores.params_extra import (
    EXTRA,
    extra_bounds,
    extra_wildcard_error,
    spellings,
    wildcard_prefix,
    wildcard_stem,
)
from warehouse.values import parse_time

PAGE = 1000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
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
        if kind == "object" or spec.get("enabled") is False or spec.get("index") is False:
            continue  # not searchable (error.traceback): unknown to filters, as locally
        if kind in _NUMERIC:
            out[path] = lucene.NUMBER
        elif kind == "boolean":
            out[path] = lucene.BOOLEAN
        elif kind in _DATES:
            out[path] = lucene.DATE
        elif kind in ("text", "match_only_text"):
            out[path] = lucene.ANALYZED
        else:
            out[path] = lucene.TEXT_LIST if path in _LISTS else lucene.TEXT


def to_query(
    text: str | lucene.Node | None,
    columns: Mapping[str, str],
    default_fields: Collection[str],
    has_extra: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """The DSL for a filter (``match_all`` for none); raises QuerySyntaxError like local.

    ``columns`` holds ``params_extra`` only while some run keeps params there;
    ``has_extra(key)`` says whether some run keeps ``params.<key>`` there (asked only for a
    wildcard that Elasticsearch cannot run on ``params_extra``; None: assume so)."""
    node = lucene.parse(text)
    if node == lucene.MATCH_ALL:
        return {"match_all": {}}
    full = with_extra_params(columns, lucene.fields(node))
    lucene.validate(node, full, default_fields)
    only_extra = frozenset(full) - frozenset(columns)
    return _dsl(node, full, default_fields, _Extra(EXTRA in columns, only_extra, has_extra))


class _Extra:
    """Whether some run keeps params in ``params_extra``, the params keys found only there,
    and how to ask whether a key is there at all."""

    def __init__(
        self, present: bool, only: frozenset[str], has: Callable[[str], bool] | None
    ) -> None:
        self.present, self.only, self._has = present, only, has

    def has(self, key: str) -> bool:
        return True if self._has is None else self._has(key)


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
    if not (extra.present and field.startswith("params.")):
        return _leaf(node, field, kind)
    key = field[len("params.") :]
    other = extra_leaf(node, f"{EXTRA}.{key}", lambda: extra.has(key))
    if field in extra.only:  # a key only runs with huge configs have
        return other if other is not None else {"match_none": {}}
    clause = _leaf(node, field, kind)
    if other is None:
        return clause
    return {"bool": {"should": [clause, other], "minimum_should_match": 1}}


def extra_leaf(
    node: lucene.Node, field: str, has_values: Callable[[], bool]
) -> dict[str, Any] | None:
    """A leaf on ``params_extra.<key>``, a keyed ``flattened`` field: every value is the
    keyword text of the JSON value, and Elasticsearch 9 refuses wildcards and one-sided ranges
    on it. A one-sided range gets the other bound ("" or :data:`lucene.TEXT_MAX`); a wildcard
    that is a prefix (``abc*``) becomes a ``prefix`` query; any other wildcard is an error
    when some run keeps the key there (None when none does: nothing to search)."""
    if isinstance(node, lucene.Exists):
        return {"exists": {"field": field}}
    if isinstance(node, lucene.Range):
        low, high = extra_bounds(node)
        bounds = {"gte" if node.include_low or node.low is None else "gt": low}
        bounds["lte" if node.include_high or node.high is None else "lt"] = high
        return {"range": {field: bounds}}
    if isinstance(node, lucene.Term) and node.wildcard:
        prefix = wildcard_prefix(node.value)
        if prefix is not None:
            return {"prefix": {field: {"value": prefix}}}
        if not has_values():
            return None
        raise extra_wildcard_error(field, node.value)
    assert isinstance(node, lucene.Term | lucene.Phrase)
    return _terms(field, spellings(node.value))


def _leaf(node: lucene.Node, field: str, kind: str) -> dict[str, Any]:
    if isinstance(node, lucene.Exists):
        return {"exists": {"field": field}}
    if kind == lucene.DATE and isinstance(node, lucene.Range | lucene.Term | lucene.Phrase):
        if isinstance(node, lucene.Term) and node.wildcard:  # pragma: no cover - validated
            raise QuerySyntaxError(f"wildcards do not work on the date field {field}")
        # resolved here, with Elasticsearch's own rounding rules, to explicit milliseconds:
        # the local store compares the very same interval
        low, high = lucene.ms_bounds(node)
        dates: dict[str, Any] = {}
        if low is not None:
            dates["gte"] = lucene.iso_ms(low)
        if high is not None:
            dates["lte"] = lucene.iso_ms(high)
        return {"range": {field: dates}} if dates else {"exists": {"field": field}}
    if isinstance(node, lucene.Range):
        bounds: dict[str, Any] = {}
        if node.low is not None:
            bounds["gte" if node.include_low else "gt"] = _value(field, kind, node.low)
        if node.high is not None:
            bounds["lte" if node.include_high else "lt"] = _value(field, kind, node.high)
        if not bounds:
            return {"exists": {"field": field}}
        return {"range": {field: bounds}}
    if kind == lucene.ANALYZED:  # searched word by word, as Kibana's query_string does
        if isinstance(node, lucene.Term) and node.wildcard:
            return {"wildcard": {field: {"value": node.value.lower()}}}
        if isinstance(node, lucene.Phrase):
            return {"match_phrase": {field: node.value}}
        assert isinstance(node, lucene.Term)
        return {"match": {field: {"query": node.value, "operator": "or"}}}
    if isinstance(node, lucene.Term) and node.wildcard:
        return {"wildcard": {field: {"value": node.value}}}
    if isinstance(node, lucene.Term | lucene.Phrase):
        value = _value(field, kind, node.value)
        if kind == lucene.NUMBER:  # equality as a closed range: exact, and 3 == 3.0 everywhere
            return {"range": {field: {"gte": value, "lte": value}}}
        if kind == lucene.TEXT and field.startswith("params."):
            return _terms(field, spellings(node.value))  # a boolean's word in any case
        return {"term": {field: value}}
    raise QuerySyntaxError(f"cannot translate {node!r} for Elasticsearch")  # pragma: no cover


def _terms(field: str, values: tuple[str, ...]) -> dict[str, Any]:
    if len(values) == 1:
        return {"term": {field: values[0]}}
    return {"terms": {field: list(values)}}


def _value(field: str, kind: str, value: str) -> Any:
    if kind == lucene.NUMBER:
        return float(value)
    if kind == lucene.BOOLEAN:
        return value.lower() == "true"
    return value


def runs_body(
    query: RunQuery,
    columns: Mapping[str, str],
    has_extra: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """The search body of a run query: filter, sort (with the tie-break), ``_source``."""
    sort = []
    for name, order in query.order_by:
        field = params_field(name, columns)
        kinds = {**columns, field: lucene.TEXT} if field != name else columns
        explicit = name in query.explicit_sort
        if lucene.sort_kind(field, kinds, explicit=explicit, what="sort field") is None:
            continue
        sort.append({field: {"order": order, "missing": "_last", "unmapped_type": "keyword"}})
    body: dict[str, Any] = {
        "query": to_query(query.filter, columns, lucene.DEFAULT_FIELDS, has_extra),
        "sort": sort,
    }
    if query.fields is not None:
        includes = list(query.fields)
        includes += [
            EXTRA + f[len("params") :] for f in includes if f == "params" or f.startswith("params.")
        ]
        body["_source"] = {"includes": includes}
    return body


def params_field(name: str, columns: Mapping[str, str]) -> str:
    """Where a ``params.<key>`` lives: in ``params_extra`` for runs with huge configs."""
    if name.startswith("params.") and name not in columns and EXTRA in columns:
        return EXTRA + name[len("params") :]
    return name


def scored(metric: str) -> dict[str, Any]:
    """The runs that may be an experiment's best: with a value of ``metric``, not running
    (a running run's score is not final; the local store leaves them out alike)."""
    return {
        "bool": {
            "filter": [{"exists": {"field": metric}}],
            "must_not": [{"term": {"status": "running"}}],
        }
    }


def ranking_aggs(query: RankQuery, experiments: int, candidates: int) -> dict[str, Any]:
    """Each experiment's run count (``runs``), and over its finished runs with the metric
    (``scored``) a ``max``/``min`` and a ``top_hits`` of the few best, with only the fields the
    tie rule reads. The filter sits above the experiments, once (not one per experiment); sorts
    name their ``unmapped_type``: an index that has not mapped the metric yet answers."""
    metric = query.metric
    sort = [
        {metric: {"order": query.order, "unmapped_type": "double"}},
        {"ended_at": {"order": "asc", "missing": "_last", "unmapped_type": "date"}},
        {"run_id": {"order": "asc", "unmapped_type": "keyword"}},
    ]
    top = {
        "size": candidates,
        "sort": sort,
        "_source": {"includes": ["run_id", "ended_at", metric]},
    }
    ranked = {
        "terms": {"field": "experiment", "size": experiments, "order": {"best": query.order}},
        "aggs": {"best": {query.direction: {"field": metric}}, "top": {"top_hits": top}},
    }
    return {
        "runs": {"terms": {"field": "experiment", "size": experiments}},
        "scored": {"filter": scored(metric), "aggs": {"experiments": ranked}},
    }


def _rank_key(query: RankQuery) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """Best first: the score in the query's direction, then the earlier end, then run_id."""
    sign = -1.0 if query.direction == "max" else 1.0

    def key(run: Mapping[str, Any]) -> tuple[Any, ...]:
        value = get_path(run, query.metric)
        score = sign * float(value) if isinstance(value, int | float) else math.inf
        ended = parse_time(run.get("ended_at"))
        return (score, ended is None, ended or _EPOCH, run.get("run_id", ""))

    return key


def ranked_winners(
    aggs: Mapping[str, Any], query: RankQuery
) -> list[tuple[str, dict[str, Any], int]]:
    """``(experiment, best candidate, run count)`` per experiment of :func:`ranking_aggs`'s
    answer; ties on the score are settled here, exactly as the local store settles them."""
    key = _rank_key(query)
    counts = {str(b["key"]): int(b["doc_count"]) for b in aggs["runs"]["buckets"]}
    winners = []
    for bucket in aggs["scored"]["experiments"]["buckets"]:
        hits = bucket["top"]["hits"]["hits"]
        if bucket["best"]["value"] is None or not hits:
            continue
        best = min((h["_source"] for h in hits), key=key)
        name = str(bucket["key"])
        winners.append((name, best, counts.get(name, int(bucket["doc_count"]))))
    return winners


def best_first(rows: list[ExperimentBest], query: RankQuery) -> list[ExperimentBest]:
    """Experiments in the order of the tie rule (score, earlier end, run id)."""
    key = _rank_key(query)
    return sorted(rows, key=lambda r: key(r.run))


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


__all__ = [
    "EXTRA",
    "best_first",
    "extra_bounds",
    "extra_leaf",
    "extra_wildcard_error",
    "hits",
    "kinds",
    "params_field",
    "ranked_winners",
    "ranking_aggs",
    "runs_body",
    "to_query",
    "wildcard_prefix",
    "wildcard_stem",
    "with_extra_params",
]
