"""A stricter Elasticsearch for the tests: a checking layer in front of the test server.

The ES-API test server (noida-db) lets through requests Elasticsearch 9 refuses. This layer is
a small HTTP proxy on a loopback port: it answers nothing itself, it forwards every request to
the server and its answer back, except what Elasticsearch 9 refuses, which it refuses as
Elasticsearch does (same status, same error type, the same message). Each rule below is read
from Elasticsearch's source (paths under ``server/src/main/java/org/elasticsearch/``):

- ``search.max_buckets`` = 65,536 (``search/aggregations/MultiBucketConsumerService``): every
  bucket of a multi-bucket aggregation, at every level, counts; single-bucket aggregations
  (``filter``, ``missing``, ``global``) do not. ``too_many_buckets_exception``, HTTP 400.
- a sort on a field an index does not map, without ``unmapped_type``
  (``search/sort/FieldSortBuilder``): "No mapping found for [f] in order to sort on", 400; in
  the search's ``sort``, a ``top_hits`` sort and a collapse's ``inner_hits`` sort alike. A
  sort on ``_id`` (``indices.id_field_data.enabled`` is false since 8.0) and a sort or an
  aggregation on a ``text`` field (no field data) are refused too.
- ``index.max_result_window`` = 10,000 (``search/DefaultSearchContext``): ``from + size``;
  ``from`` must be 0 with ``search_after`` (``search/builder/SearchSourceBuilder``).
- ``index.max_inner_result_window`` = 100 (``search/aggregations/metrics/
  TopHitsAggregationBuilder``, ``index/query/InnerHitBuilder``): ``from + size`` of a
  ``top_hits`` and of a collapse's ``inner_hits``.
- ``index.top_metrics_max_size`` = 10; ``index.max_terms_count`` = 65,536 values in a
  ``terms`` query.
- a data stream takes only ``create`` (``action/bulk/TransportBulkAction``): an ``index``,
  ``update`` or ``delete`` op on a data stream's name is refused per bulk item ("only write
  ops with an op_type of create are allowed in data streams"), as is ``PUT <stream>/_doc/<id>``.
- a keyed ``flattened`` field (``index/mapper/flattened/FlattenedFieldMapper``) refuses
  ``wildcard``, ``regexp`` and ``fuzzy`` queries and a ``range`` without both bounds.
- ``wildcard``/``prefix``/``regexp`` queries only on keyword-like fields
  (``index/mapper/NumberFieldMapper`` & co.: "Can only use wildcard queries on keyword and
  text fields").
- ``date_histogram`` takes ``calendar_interval`` (one unit: ``1d``, never ``2d``) or
  ``fixed_interval`` (no ``M``/``q``/``y``); the old ``interval`` is gone since 8.0
  (``search/aggregations/bucket/histogram/DateHistogramAggregationBuilder``).
- ``avg``/``sum``/``min``/``max``/``stats`` take numbers, dates and booleans, never keywords
  ("Field [f] of type [keyword] is not supported for aggregation [avg]").
- a ``terms`` ``order`` names ``_key``, ``_count`` or a sub-aggregation that is a single-value
  metric, a single-bucket aggregation, or ``<multi-value metric>.<value>``
  (``search/aggregations/support/AggregationPath``).
- a ``collapse`` field must be mapped (keyword or numeric): "no mapping found for `f` in order
  to collapse on".

Where the server computes differently (terms ordered by a sub-aggregation, ``max`` of a date,
missing values in a ``top_hits`` sort), no layer can help: those views are checked against an
independent computation in their tests, never against the server.
"""

from __future__ import annotations

import contextlib
import fnmatch
import gzip
import http.client
import json
import re
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BUCKETS = 65_536
MAX_RESULT_WINDOW = 10_000
MAX_INNER_RESULT_WINDOW = 100
TOP_METRICS_MAX_SIZE = 10
MAX_TERMS_COUNT = 65_536

_SINGLE_VALUE_METRICS = frozenset(
    {
        "avg",
        "max",
        "min",
        "sum",
        "value_count",
        "cardinality",
        "weighted_avg",
        "median_absolute_deviation",
    }
)
_MULTI_VALUE_METRICS = frozenset({"stats", "extended_stats", "percentiles", "string_stats"})
_SINGLE_BUCKET = frozenset(
    {"filter", "missing", "global", "nested", "reverse_nested", "sampler", "diversified_sampler"}
)
_NUMERIC_METRICS = frozenset({"avg", "sum", "min", "max", "stats", "extended_stats"})
_NUMBERS = frozenset(
    {
        "long",
        "integer",
        "short",
        "byte",
        "double",
        "float",
        "half_float",
        "scaled_float",
        "unsigned_long",
    }
)
_KEYWORDS = frozenset({"keyword", "constant_keyword", "wildcard", "text", "match_only_text"})
_FIELD_DATA_FREE = frozenset({"text", "match_only_text"})
_CALENDAR_UNITS = {
    "m",
    "1m",
    "minute",
    "h",
    "1h",
    "hour",
    "d",
    "1d",
    "day",
    "w",
    "1w",
    "week",
    "M",
    "1M",
    "month",
    "q",
    "1q",
    "quarter",
    "y",
    "1y",
    "year",
}
_FIXED = re.compile(r"\d+(nanos|micros|ms|s|m|h|d)")
_SPECIAL_SORTS = frozenset({"_score", "_doc", "_shard_doc", "_geo_distance", "_script"})
_KEYED_FLATTENED = "flattened (keyed)"


@dataclass
class Refusal(Exception):
    """What Elasticsearch 9 answers instead: HTTP status, error type, reason."""

    status: int
    kind: str
    reason: str

    def body(self) -> bytes:
        cause = {"type": self.kind, "reason": self.reason}
        outer = "search_phase_execution_exception" if self.status == 400 else self.kind
        error = {"root_cause": [cause], "type": outer, "reason": self.reason, "caused_by": cause}
        return json.dumps({"error": error, "status": self.status}).encode()


def _bad(kind: str, reason: str) -> Refusal:
    return Refusal(400, kind, reason)


# --- mappings ----------------------------------------------------------------------------------


@dataclass
class Fields:
    """The fields of one index: dotted path -> mapped type; roots of ``flattened`` fields."""

    types: dict[str, str] = field(default_factory=dict)
    flattened: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, mappings: Mapping[str, Any]) -> Fields:
        out = cls()
        out._walk(mappings.get("properties", {}), "")
        for name, spec in (mappings.get("runtime") or {}).items():
            out.types[name] = str(spec.get("type", "keyword"))
        return out

    def _walk(self, properties: Mapping[str, Any], prefix: str) -> None:
        for name, spec in properties.items():
            path = prefix + name
            if "properties" in spec:
                self._walk(spec["properties"], path + ".")
                continue
            kind = str(spec.get("type", "object"))
            self.types[path] = kind
            if kind == "flattened":
                self.flattened.add(path)
            for sub, sub_spec in (spec.get("fields") or {}).items():
                self.types[f"{path}.{sub}"] = str(sub_spec.get("type", "keyword"))

    def type_of(self, path: str) -> str | None:
        """The field's type, ``flattened (keyed)`` inside a flattened field, None if unmapped."""
        if path in self.types:
            return self.types[path]
        parts = path.split(".")
        for i in range(1, len(parts)):
            if ".".join(parts[:i]) in self.flattened:
                return _KEYED_FLATTENED
        return None


# --- the rules over a search body --------------------------------------------------------------


def check_search(body: Mapping[str, Any], params: Mapping[str, str], indices: list[Fields]) -> None:
    """Raise the :class:`Refusal` Elasticsearch 9 gives for this search body, if any."""
    size = int(body.get("size", params.get("size", 10)))
    start = int(body.get("from", params.get("from", 0)))
    if "scroll" not in params and start + size > MAX_RESULT_WINDOW:
        raise _bad(
            "illegal_argument_exception",
            f"Result window is too large, from + size must be less than or equal to: "
            f"[{MAX_RESULT_WINDOW}] but was [{start + size}]. See the scroll api for a more "
            "efficient way to request large data sets. This limit can be set by changing the "
            "[index.max_result_window] index level setting.",
        )
    if "search_after" in body and start not in (0, -1):
        raise _bad(
            "illegal_argument_exception",
            "`from` parameter must be set to 0 when `search_after` is used.",
        )
    _check_sort(body.get("sort"), indices)
    if "query" in body:
        check_query(body["query"], indices)
    if body.get("post_filter"):
        check_query(body["post_filter"], indices)
    if "collapse" in body:
        _check_collapse(body["collapse"], indices)
    aggs = body.get("aggs", body.get("aggregations"))
    if aggs:
        _check_aggs(aggs, indices)


def _sort_items(sort: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    items = sort if isinstance(sort, list) else [sort] if sort else []
    for item in items:
        if isinstance(item, str):
            yield item, {}
        elif isinstance(item, dict):
            for name, spec in item.items():
                yield name, spec if isinstance(spec, dict) else {"order": spec}


def _check_sort(sort: Any, indices: list[Fields]) -> None:
    for name, spec in _sort_items(sort):
        if name in _SPECIAL_SORTS:
            continue
        if name == "_id":
            raise _bad(
                "illegal_argument_exception",
                "Fielddata access on the _id field is disallowed, you can re-enable it by "
                "updating the dynamic cluster setting: indices.id_field_data.enabled",
            )
        for fields in indices:
            kind = fields.type_of(name)
            if kind is None and "unmapped_type" not in spec:
                raise _bad(
                    "query_shard_exception", f"No mapping found for [{name}] in order to sort on"
                )
            if kind in _FIELD_DATA_FREE:
                raise _field_data(name)


def _field_data(name: str) -> Refusal:
    return _bad(
        "illegal_argument_exception",
        "Text fields are not optimised for operations that require per-document field data "
        "like aggregations and sorting, so these operations are disabled by default. Please "
        f"use a keyword field instead. Alternatively, set fielddata=true on [{name}] in order "
        "to load field data by uninverting the inverted index. Note that this can use "
        "significant memory.",
    )


def _check_collapse(collapse: Mapping[str, Any], indices: list[Fields]) -> None:
    name = str(collapse.get("field"))
    for fields in indices:
        kind = fields.type_of(name)
        if kind is None:
            raise _bad(
                "illegal_argument_exception",
                f"no mapping found for `{name}` in order to collapse on",
            )
        if kind not in _NUMBERS and kind != "keyword":
            raise _bad(
                "illegal_argument_exception",
                f"collapse is not supported for the field [{name}] of the type [{kind}]",
            )
    inner = collapse.get("inner_hits") or []
    for hit in inner if isinstance(inner, list) else [inner]:
        window = int(hit.get("from", 0)) + int(hit.get("size", 3))
        if window > MAX_INNER_RESULT_WINDOW:
            raise _bad(
                "illegal_argument_exception",
                f"Inner result window is too large, the inner hit definition's "
                f"[{hit.get('name', name)}]'s from + size must be less than or equal to: "
                f"[{MAX_INNER_RESULT_WINDOW}] but was [{window}]. This limit can be set by "
                "changing the [index.max_inner_result_window] index level setting.",
            )
        _check_sort(hit.get("sort"), indices)


def _agg_type(spec: Mapping[str, Any]) -> tuple[str, Any]:
    kinds = [k for k in spec if k not in ("aggs", "aggregations", "meta")]
    if len(kinds) != 1:
        raise _bad("parsing_exception", f"Expected one aggregation type, found {kinds}")
    return kinds[0], spec[kinds[0]]


def _check_aggs(aggs: Mapping[str, Any], indices: list[Fields]) -> None:
    for name, spec in aggs.items():
        kind, params = _agg_type(spec)
        subs = spec.get("aggs", spec.get("aggregations")) or {}
        name_field = params.get("field") if isinstance(params, dict) else None
        if kind == "top_hits":
            window = int(params.get("from", 0)) + int(params.get("size", 3))
            if window > MAX_INNER_RESULT_WINDOW:
                raise _bad(
                    "illegal_argument_exception",
                    f"Top hits result window is too large, the top hits aggregator [{name}]'s "
                    f"from + size must be less than or equal to: [{MAX_INNER_RESULT_WINDOW}] but "
                    f"was [{window}]. This limit can be set by changing the "
                    "[index.max_inner_result_window] index level setting.",
                )
            _check_sort(params.get("sort"), indices)
        elif kind == "top_metrics" and int(params.get("size", 1)) > TOP_METRICS_MAX_SIZE:
            raise _bad(
                "illegal_argument_exception",
                f"[top_metrics.size] must not be more than [{TOP_METRICS_MAX_SIZE}] but was "
                f"[{params.get('size')}]. This limit can be set by changing the "
                "[index.top_metrics_max_size] index level setting.",
            )
        elif kind == "date_histogram":
            _check_date_histogram(name, params)
        elif kind == "filter":
            check_query(params, indices)
        elif kind == "filters":
            queries = params.get("filters", {})
            for query in queries.values() if isinstance(queries, dict) else queries:
                check_query(query, indices)
        elif kind == "terms":
            if int(params.get("size", 10)) <= 0:
                raise _bad(
                    "illegal_argument_exception",
                    f"[size] must be greater than 0. Found [{params.get('size')}] in [{name}]",
                )
            _check_order(name, params.get("order"), subs)
        if isinstance(name_field, str):
            for fields in indices:
                typ = fields.type_of(name_field)
                if typ in _FIELD_DATA_FREE:
                    raise _field_data(name_field)
                if kind in _NUMERIC_METRICS and typ in (*_KEYWORDS, "flattened", _KEYED_FLATTENED):
                    raise _bad(
                        "illegal_argument_exception",
                        f"Field [{name_field}] of type [{typ}] is not supported for "
                        f"aggregation [{kind}]",
                    )
        if subs:
            _check_aggs(subs, indices)


def _check_date_histogram(name: str, params: Mapping[str, Any]) -> None:
    if "interval" in params:
        raise _bad(
            "x_content_parse_exception",
            f"[date_histogram] unknown field [interval] in [{name}]: use calendar_interval "
            "or fixed_interval",
        )
    calendar, fixed = params.get("calendar_interval"), params.get("fixed_interval")
    if (calendar is None) == (fixed is None):
        raise _bad(
            "illegal_argument_exception",
            "Invalid interval specified, must be non-null and non-empty",
        )
    if calendar is not None and calendar not in _CALENDAR_UNITS:
        raise _bad(
            "illegal_argument_exception",
            f"The supplied interval [{calendar}] could not be parsed as a calendar interval.",
        )
    if fixed is not None and not _FIXED.fullmatch(str(fixed)):
        raise _bad(
            "illegal_argument_exception",
            f"failed to parse setting [date_histogram.fixedInterval] with value [{fixed}] as a "
            "time value: unit is missing or unrecognized",
        )


def _check_order(name: str, order: Any, subs: Mapping[str, Any]) -> None:
    items = order if isinstance(order, list) else [order] if order else []
    for item in items:
        for path in item:
            if path in ("_key", "_count", "_term"):
                continue
            head, _, rest = path.partition(".")
            head = head.split(">")[0]
            sub = subs.get(head)
            valid = False
            if sub is not None:
                kind, _ = _agg_type(sub)
                if kind in _SINGLE_VALUE_METRICS or kind in _SINGLE_BUCKET:
                    valid = not rest or kind in _SINGLE_BUCKET
                elif kind in _MULTI_VALUE_METRICS:
                    valid = bool(rest)
            if not valid:
                raise _bad(
                    "aggregation_execution_exception",
                    f"Invalid aggregation order path [{path}] of [{name}]. Buckets can only be "
                    "sorted on a sub-aggregator path that is built out of zero or more "
                    "single-bucket aggregations within the path and a final single-bucket or a "
                    "metrics aggregation at the path end.",
                )


_COMPOUND = {"bool": ("must", "filter", "should", "must_not")}


def check_query(query: Any, indices: list[Fields]) -> None:
    """Raise the refusal of a query clause (recursively), if any."""
    if isinstance(query, list):
        for item in query:
            check_query(item, indices)
        return
    if not isinstance(query, dict):
        return
    for kind, params in query.items():
        if kind == "bool":
            for part in _COMPOUND["bool"]:
                check_query(params.get(part, []), indices)
        elif kind in ("constant_score",):
            check_query(params.get("filter"), indices)
        elif kind in ("function_score", "nested", "has_child", "has_parent"):
            check_query(params.get("query"), indices)
        elif kind == "dis_max":
            check_query(params.get("queries", []), indices)
        elif kind in ("wildcard", "regexp", "fuzzy", "prefix", "range", "terms"):
            _check_leaf(kind, params, indices)


def _check_leaf(kind: str, params: Mapping[str, Any], indices: list[Fields]) -> None:
    for name, value in params.items():
        if name in ("boost", "_name", "rewrite", "case_insensitive"):
            continue
        if kind == "terms":
            if isinstance(value, list) and len(value) > MAX_TERMS_COUNT:
                raise _bad(
                    "illegal_argument_exception",
                    f"The number of terms [{len(value)}] used in the Terms Query request has "
                    f"exceeded the allowed maximum of [{MAX_TERMS_COUNT}]. This maximum can be "
                    "set by changing the [index.max_terms_count] index level setting.",
                )
            continue
        for fields in indices:
            typ = fields.type_of(name)
            if typ == _KEYED_FLATTENED:
                if kind in ("wildcard", "regexp", "fuzzy"):
                    raise _bad(
                        "query_shard_exception",
                        f"[{kind}] queries are not currently supported on keyed [flattened] "
                        "fields.",
                    )
                bounds = value if isinstance(value, dict) else {}
                low = any(bounds.get(k) is not None for k in ("gt", "gte", "from"))
                high = any(bounds.get(k) is not None for k in ("lt", "lte", "to"))
                if kind == "range" and not (low and high):
                    raise _bad(
                        "illegal_argument_exception",
                        "[range] queries on keyed [flattened] fields must include both an upper "
                        "and a lower bound.",
                    )
            elif (
                kind in ("wildcard", "regexp", "prefix")
                and typ is not None
                and (typ in _NUMBERS or typ in ("date", "date_nanos", "boolean"))
            ):
                raise _bad(
                    "query_shard_exception",
                    f"Can only use {kind} queries on keyword and text fields - not on [{name}] "
                    f"which is of type [{typ}]",
                )


# --- the rule over an answer -------------------------------------------------------------------


def count_buckets(aggregations: Any) -> int:
    """The buckets Elasticsearch's reduce counts against ``search.max_buckets``."""
    if isinstance(aggregations, list):
        return sum(count_buckets(item) for item in aggregations)
    if not isinstance(aggregations, dict):
        return 0
    total = 0
    for name, value in aggregations.items():
        if name == "hits":  # a top_hits answer: documents, not buckets
            continue
        if name == "buckets":
            items = value.values() if isinstance(value, dict) else value
            items = list(items)
            total += len(items) + sum(count_buckets(b) for b in items)
        elif isinstance(value, dict):
            total += count_buckets(value)
    return total


def too_many_buckets(count: int) -> Refusal:
    return _bad(
        "too_many_buckets_exception",
        f"Trying to create too many buckets. Must be less than or equal to: [{MAX_BUCKETS}] but "
        f"this number of buckets was exceeded ({count}). This limit can be set by changing the "
        "[search.max_buckets] cluster level setting.",
    )


# --- data streams ------------------------------------------------------------------------------

DATA_STREAM_OPS = "only write ops with an op_type of create are allowed in data streams"


def bulk_items(lines: list[bytes], default_index: str | None) -> list[tuple[str, str, list[bytes]]]:
    """``(op, target, lines)`` per item of a bulk body (an action line and, but for
    ``delete``, its source line)."""
    items = []
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        action = json.loads(lines[i])
        ((op, meta),) = action.items()
        target = str(meta.get("_index") or default_index or "")
        take = 1 if op == "delete" else 2
        items.append((op, target, lines[i : i + take]))
        i += take
    return items


# --- the proxy ---------------------------------------------------------------------------------


class StrictProxy:
    """The checking layer: ``url`` forwards to ``upstream``; ``refused`` lists every refusal."""

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 9200)
        self.refused: list[Refusal] = []
        self._lock = threading.Lock()
        self._mappings: dict[str, list[Fields]] = {}
        self._streams: list[str] | None = None
        self._pits: dict[str, str] = {}
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    # what the rules need, read from the server (cached until a write changes it) -------------
    def forget(self) -> None:
        with self._lock:
            self._mappings.clear()
            self._streams = None

    def fields(self, conn: http.client.HTTPConnection, target: str) -> list[Fields]:
        with self._lock:
            cached = self._mappings.get(target)
        if cached is not None:
            return cached
        status, _, body = _send(conn, "GET", f"/{urllib.parse.quote(target, safe=',*')}/_mapping")
        found = (
            [Fields.of(v.get("mappings", {})) for v in json.loads(body).values()]
            if (status == 200)
            else []
        )
        with self._lock:
            self._mappings[target] = found
        return found

    def data_streams(self, conn: http.client.HTTPConnection) -> list[str]:
        with self._lock:
            cached = self._streams
        if cached is not None:
            return cached
        status, _, body = _send(conn, "GET", "/_index_template")
        patterns: list[str] = []
        if status == 200:
            for entry in json.loads(body).get("index_templates", []):
                template = entry.get("index_template", {})
                if "data_stream" in template:
                    patterns += list(template.get("index_patterns", []))
        with self._lock:
            self._streams = patterns
        return patterns

    def is_stream(self, conn: http.client.HTTPConnection, name: str) -> bool:
        if not name or name.startswith(".ds-"):
            return False
        return any(fnmatch.fnmatchcase(name, p) for p in self.data_streams(conn))

    def remember_pit(self, answer: bytes, target: str) -> None:
        with contextlib.suppress(ValueError, AttributeError):
            pit = json.loads(answer).get("id") or json.loads(answer).get("pit_id")
            if pit:
                with self._lock:
                    self._pits[str(pit)] = target

    def pit_target(self, pit: str) -> str | None:
        with self._lock:
            return self._pits.get(pit)

    def refuse(self, refusal: Refusal) -> Refusal:
        with self._lock:
            self.refused.append(refusal)
        return refusal


def _send(
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, list[tuple[str, str]], bytes]:
    try:
        conn.request(method, path, body=body, headers=dict(headers or {}))
        answer = conn.getresponse()
    except (ConnectionError, http.client.HTTPException):
        conn.close()  # a dropped keep-alive connection: once more on a fresh one
        conn.request(method, path, body=body, headers=dict(headers or {}))
        answer = conn.getresponse()
    return answer.status, answer.getheaders(), answer.read()


_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class _Handler(BaseHTTPRequestHandler):
    owner: StrictProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # no line per request
        return

    def _conn(self) -> http.client.HTTPConnection:
        """This client connection's own connection to the server (closed with it)."""
        conn: http.client.HTTPConnection | None = getattr(self, "_upstream", None)
        if conn is None:
            host, port = self.owner.upstream
            conn = self._upstream = http.client.HTTPConnection(host, port, timeout=600)
        return conn

    def finish(self) -> None:
        super().finish()
        conn = getattr(self, "_upstream", None)
        if conn is not None:
            conn.close()

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            data = b"".join(parts)
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            data = gzip.decompress(data)
            del self.headers["Content-Encoding"]
        return data

    def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for key, value in headers:
            if key.lower() not in _HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _refuse(self, refusal: Refusal) -> None:
        self.owner.refuse(refusal)
        headers = [("X-Elastic-Product", "Elasticsearch"), ("Content-Type", "application/json")]
        self._reply(refusal.status, headers, refusal.body())

    def _handle(self) -> None:
        body = self._body() if self.command in ("POST", "PUT", "DELETE") else b""
        split = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(split.query))
        parts = [urllib.parse.unquote(p) for p in split.path.strip("/").split("/") if p]
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        conn = self._conn()
        try:
            extra = self._check(parts, params, body, conn)
        except Refusal as refusal:
            self._refuse(refusal)
            return
        if extra is not None:  # a bulk with refused items: the rest forwarded, merged
            self._bulk(extra, params, headers, conn, split)
            return
        status, answer_headers, answer = _send(conn, self.command, self.path, body or None, headers)
        if status < 300 and parts and parts[-1] == "_pit":
            self.owner.remember_pit(answer, parts[0])
        if status == 200 and parts and parts[-1] == "_search":
            count = count_buckets(_json(answer, answer_headers).get("aggregations"))
            if count > MAX_BUCKETS:
                self._refuse(too_many_buckets(count))
                return
        if self.command != "GET" and not (parts and parts[-1] in ("_search", "_count", "_pit")):
            self.owner.forget()  # a write may add fields, templates or streams
        self._reply(status, answer_headers, answer)

    def _check(
        self,
        parts: list[str],
        params: dict[str, str],
        body: bytes,
        conn: http.client.HTTPConnection,
    ) -> list[tuple[str, str, list[bytes]]] | None:
        owner = self.owner
        if not parts:
            return None
        last = parts[-1]
        if last in ("_search", "_count", "_delete_by_query", "_update_by_query"):
            request = json.loads(body) if body.strip() else {}
            target = parts[0] if len(parts) > 1 else None
            pit = (request.get("pit") or {}).get("id")
            if target is None and pit:
                target = owner.pit_target(str(pit))
            indices = owner.fields(conn, target) if target else []
            if last == "_search":
                check_search(request, params, indices)
            elif "query" in request:
                check_query(request["query"], indices)
            return None
        if last == "_bulk":
            default = parts[0] if len(parts) > 1 else None
            items = bulk_items(body.splitlines(), default)
            if any(op != "create" and owner.is_stream(conn, t) for op, t, _ in items):
                return items
            return None
        if len(parts) >= 2 and parts[1] == "_doc" and self.command in ("PUT", "POST"):
            op_type = params.get("op_type", "index" if len(parts) > 2 else "create")
            if op_type != "create" and owner.is_stream(conn, parts[0]):
                raise Refusal(400, "illegal_argument_exception", DATA_STREAM_OPS)
        return None

    def _bulk(
        self,
        items: list[tuple[str, str, list[bytes]]],
        params: dict[str, str],
        headers: dict[str, str],
        conn: http.client.HTTPConnection,
        split: urllib.parse.SplitResult,
    ) -> None:
        kept = [
            (i, item)
            for i, item in enumerate(items)
            if item[0] == "create" or not self.owner.is_stream(conn, item[1])
        ]
        results: list[dict[str, Any] | None] = [None] * len(items)
        answer_headers = [
            ("X-Elastic-Product", "Elasticsearch"),
            ("Content-Type", "application/json"),
        ]
        took = 0
        if kept:
            lines = b"\n".join(line for _, (_, _, ls) in kept for line in ls) + b"\n"
            status, answer_headers, answer = _send(conn, "POST", self.path, lines, headers)
            if status != 200:
                self._reply(status, answer_headers, answer)
                return
            forwarded = _json(answer, answer_headers)
            took = int(forwarded.get("took", 0))
            for (i, _), result in zip(kept, forwarded["items"], strict=True):
                results[i] = result
            self.owner.forget()
        for i, (op, target, lines) in enumerate(items):
            if results[i] is None:
                meta = json.loads(lines[0])[op]
                error = {"type": "illegal_argument_exception", "reason": DATA_STREAM_OPS}
                self.owner.refuse(Refusal(400, error["type"], DATA_STREAM_OPS))
                results[i] = {
                    op: {"_index": target, "_id": meta.get("_id"), "status": 400, "error": error}
                }
        merged = {"errors": True, "took": took, "items": results}
        body = json.dumps(merged).encode()
        headers_out = [(k, v) for k, v in answer_headers if k.lower() != "content-encoding"]
        self._reply(200, headers_out, body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle


def _json(answer: bytes, headers: list[tuple[str, str]]) -> dict[str, Any]:
    if any(k.lower() == "content-encoding" and "gzip" in v for k, v in headers):
        answer = gzip.decompress(answer)
    try:
        found = json.loads(answer)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
