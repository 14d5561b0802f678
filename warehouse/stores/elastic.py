"""ElasticStore: the store contract on Elasticsearch (official ``elasticsearch`` 9.x client).

Translation only: records become documents (``elastic_bulk``), queries become DSL
(``elastic_query``), client errors become ours at one border (``elastic_errors``, through
``_map_errors``); templates, aliases and the steps data stream come from ``elastic_templates``
and ``elastic_admin`` (`warehouse init`). Writes are idempotent by ``_id``: runs are indexed
with ``version_type=external_gte`` and a nanosecond version (a late copy never overwrites a
newer one), a split's samples are deleted and rewritten, steps are created by ``run_id:seq``
(the first write wins: a 409 on ``create`` means already stored). Runs and steps are written with
``refresh=wait_for``, samples refreshed once at the end: "record, then query" sees the record.
A server that answers the 9.x client's first request is accepted whatever version it reports
(an 8.x refuses its ``compatible-with=9`` headers; noida-db says 8.15.3 and speaks the 9 API).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

import elastic_transport
import pyarrow as pa
from elasticsearch import Elasticsearch

from warehouse import lucene
from warehouse.docpath import get_path
from warehouse.errors import (
    ConfigurationError,
    InvalidRecord,
    NotFound,
    QuerySyntaxError,
    StoreUnavailable,
    WarehouseError,
)
from warehouse.models import run_version
from warehouse.plain_http import check_credentials_transport
from warehouse.sample_rows import SampleIds
from warehouse.stores import elastic_bulk as bulk
from warehouse.stores import elastic_groups as eg
from warehouse.stores import elastic_query as eq
from warehouse.stores.base import (
    CountQuery,
    ExperimentBest,
    Group,
    GroupQuery,
    RankQuery,
    RunQuery,
    SampleQuery,
    StepRange,
)
from warehouse.stores.elastic_errors import (
    CLIENT_ERRORS,
    map_error,
    not_initialised,
    public_url,
    quiet_transport_logs,
)
from warehouse.stores.elastic_templates import KINDS, MAX_TYPED_PARAMS, Kind, index_names

if TYPE_CHECKING:
    from warehouse.settings import Settings

log = logging.getLogger(__name__)

MAX_EXPERIMENTS = 10_000
_TIE_CANDIDATES = 10  # best runs fetched per experiment; ties among them settled client-side
DEFAULT_TIMEOUT_S = 4.0  # as the setting es_timeout_s: one timeout + start-up fits in 5 s
MAX_RETRIES = 2  # of refused connections and 429/5xx answers; a time-out is never retried
WRITE_TIMEOUT_S = 120.0  # bulk chunks and delete_by_query may take longer than a search
_FIELDS_TTL_S = 30.0
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_SAMPLE_DEFAULTS = ("sample_id",)  # what a bare term searches in a sample filter


class ElasticStore:
    """Runs, samples and steps in Elasticsearch: ``{prefix}-runs``, ``-samples``, ``-steps``.

    ``ElasticStore("http://localhost:9200", prefix="team-a")`` or an ``Elasticsearch`` client;
    :meth:`from_settings` for the configured one. Construction never touches the network.
    """

    def __init__(
        self,
        client_or_url: Elasticsearch | str,
        *,
        prefix: str = "warehouse",
        steps_retention: str = "90d",
        client_options: Mapping[str, Any] | None = None,
        require_tls: bool = False,
    ) -> None:
        if isinstance(client_or_url, str):
            self._client: Elasticsearch | None = None
            self.url = client_or_url
        else:
            self._client = client_or_url
            node = next(iter(client_or_url.transport.node_pool.all())).config
            self.url = f"{node.scheme}://{node.host}:{node.port}{node.path_prefix}"
        self._options = dict(client_options or {})
        self.require_tls = require_tls
        self.prefix = prefix
        self.steps_retention = steps_retention
        self.names = index_names(prefix)
        self._lock = threading.Lock()
        self._info: dict[str, Any] | None = None
        self._ready: set[Kind] = set()
        self._fields: dict[Kind, tuple[float, dict[str, str]]] = {}
        self.server_version: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ElasticStore:
        """The store ``settings`` describe (URL, credentials, TLS, prefix); offline."""
        if not settings.es_url:
            raise ConfigurationError(
                "the store is elasticsearch but no URL is set: set WAREHOUSE_ES_URL "
                "(e.g. http://localhost:9200) or es_url in warehouse.toml"
            )
        options: dict[str, Any] = {
            "request_timeout": settings.es_timeout_s,
            "verify_certs": settings.es_verify_certs,
        }
        if settings.es_api_key is not None:
            options["api_key"] = settings.es_api_key.get_secret_value()
        elif settings.es_username:
            password = settings.es_password.get_secret_value() if settings.es_password else ""
            options["basic_auth"] = (settings.es_username, password)
        if not settings.es_verify_certs:
            options["ssl_show_warn"] = False  # asked for explicitly; no warning per request
        if settings.es_ca_certs is not None:
            options["ca_certs"] = str(settings.es_ca_certs)
        if settings.es_fingerprint:
            options["ssl_assert_fingerprint"] = settings.es_fingerprint
        return cls(
            settings.es_url,
            prefix=settings.index_prefix,
            steps_retention=settings.steps_retention,
            client_options=options,
            require_tls=settings.require_tls,
        )

    # connection ----------------------------------------------------------------------------
    @property
    def client(self) -> Elasticsearch:
        """The client, created and version-checked on first use.

        Bounded against a server that accepts connections but never answers: a request that
        times out (``request_timeout``, WAREHOUSE_ES_TIMEOUT_S) is not sent again, so the
        first contact of a command costs one timeout, not one per retry. Refused connections
        and 429/502/503/504 answers are retried (twice, 0.25 s then 0.5 s apart).
        """
        with self._lock:
            if self._client is None:
                options = {
                    "request_timeout": DEFAULT_TIMEOUT_S,
                    "max_retries": MAX_RETRIES,
                    "retry_on_status": (429, 502, 503, 504),
                    "retry_on_timeout": False,
                    "retry_backoff_base": 0.25,
                    "retry_backoff_cap": 1.0,
                    **self._options,
                }
                if not self.url.startswith("https:"):
                    for key in (
                        "ca_certs",
                        "ssl_assert_fingerprint",
                        "verify_certs",
                        "ssl_show_warn",
                    ):
                        options.pop(key, None)
                check_credentials_transport(
                    self.url,
                    service="Elasticsearch",
                    setting="WAREHOUSE_ES_URL",
                    credentials="api_key" in options
                    or "basic_auth" in options
                    or "@" in urlsplit(self.url).netloc,
                    require_tls=self.require_tls,
                )
                quiet_transport_logs()
                try:
                    self._client = Elasticsearch(self.url, **options)
                except ValueError as exc:
                    raise ConfigurationError(
                        f"invalid Elasticsearch connection settings for "
                        f"{public_url(self.url)}: {exc}"
                    ) from None
            client = self._client
        if self._info is None:
            try:
                self._info = self._read_info(client)  # other errors: the caller's _map_errors
            except elastic_transport.ConnectionTimeout:
                timeout = self._options.get("request_timeout", DEFAULT_TIMEOUT_S)
                raise StoreUnavailable(
                    f"Elasticsearch at {public_url(self.url)} accepted the connection but did "
                    f"not answer within {timeout:g} s (WAREHOUSE_ES_TIMEOUT_S); check that it "
                    "is healthy (not overloaded, out of disk or stopped in a debugger); "
                    "records wait in the outbox until 'warehouse sync'",
                    url=public_url(self.url),
                    hung=True,  # the shipper remembers it for the process, as its own waits
                ) from None
        return client

    def server_info(self) -> dict[str, Any]:
        """``GET /`` of the server: version, cluster name (raises if unsupported/unreachable)."""
        with self._map_errors("connect"):
            self.client  # noqa: B018 - connects and reads the info once
        assert self._info is not None
        return self._info

    def _read_info(self, client: Elasticsearch) -> dict[str, Any]:
        info = dict(client.info().body)
        number = str(info.get("version", {}).get("number", "?"))
        if not number.split(".")[0].isdigit() or int(number.split(".")[0]) < 9:
            # A real 8.x refuses the 9 client's compatible-with=9 headers (400 on this very
            # request); a server that answers speaks the 9 API whatever number it reports.
            log.debug("server reports version %s but accepts API version 9; using it", number)
        self.server_version = number
        return info

    @contextlib.contextmanager
    def _map_errors(self, doing: str, *, writing: bool = False) -> Iterator[None]:
        """Turn every client/transport error inside the block into a warehouse error."""
        try:
            yield
        except WarehouseError:
            raise
        except CLIENT_ERRORS as exc:
            raise map_error(exc, self.url, doing=doing, writing=writing) from exc

    # writes --------------------------------------------------------------------------------
    def write_runs(self, docs: Sequence[dict[str, Any]]) -> None:
        """Index run documents by ``run_id``; a copy older than the stored one is ignored.

        The version is the document's ``updated_at`` (:func:`warehouse.models.run_version`),
        given to Elasticsearch as an ``external_gte`` version: a late retry or a replay never
        replaces a newer copy, and an equal one is rewritten harmlessly."""
        if not docs:
            return
        items = [
            bulk.action(
                "index",
                self.names["runs"],
                str(doc["run_id"]),
                version=run_version(doc),  # 0 (accepted by ES) for a copy without updated_at
                version_type="external_gte",
            )
            + bulk.encode(bulk.run_source(doc))
            + b"\n"
            for doc in docs
        ]
        with self._map_errors("write runs", writing=True):
            self._ensure_ready("runs")
            writer = self.client.options(request_timeout=WRITE_TIMEOUT_S)
            result = bulk.send(writer, items, refresh="wait_for")
        if any(len(doc.get("params") or {}) > MAX_TYPED_PARAMS for doc in docs):
            self._fields.pop("runs", None)  # params_extra now holds values: read it afresh
        self._raise_rejected(result, "run", len(items))

    def write_samples(
        self, run_id: str, experiment: str, split: str, batches: Iterable[pa.RecordBatch]
    ) -> int:
        """Replace the samples of ``run_id``/``split``; stream the batches; return the count."""
        index = self.names["samples"]
        recorded_at = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
        result = bulk.BulkResult()
        rows = 0
        seen: dict[str, None] = {}
        with self._map_errors("write samples", writing=True):
            self._ensure_ready("samples")
            client = self.client.options(request_timeout=WRITE_TIMEOUT_S)
            split_query = {
                "bool": {"filter": [{"term": {"run_id": run_id}}, {"term": {"split": split}}]}
            }

            def clear() -> None:
                client.delete_by_query(
                    index=index,
                    query=split_query,
                    refresh=True,
                    conflicts="proceed",
                    wait_for_completion=True,
                )

            clear()
            ids = SampleIds(run_id, split)
            try:
                for batch in batches:
                    bulk.check_batch(batch, run_id, split)
                    ids.check(batch)
                    if not len(batch):
                        continue
                    try:
                        items = bulk.sample_items(
                            batch, index, run_id, experiment, split, recorded_at, rows
                        )
                    except pa.ArrowException as exc:
                        raise InvalidRecord(
                            f"samples of run {run_id} split {split!r} cannot be encoded ({exc}); "
                            "give each column one plain type (numbers, text, booleans, times)"
                        ) from None
                    result.add(bulk.send(client, items))
                    rows += len(batch)
                    seen.update(dict.fromkeys(batch.schema.names))
                ids.finish()
            except InvalidRecord:
                clear()  # a refused split is not stored, as in the local store
                raise
            client.indices.refresh(index=index)
        self._raise_rejected(result, "sample", rows)
        if seen:
            self._warn_unindexed(run_id, split, list(seen))
        return rows

    def _warn_unindexed(self, run_id: str, split: str, names: Sequence[str]) -> None:
        """Say which sample columns the index left unmapped past its field limit: they are
        kept in ``_source`` (and read back) but cannot be filtered, sliced or sorted on."""
        mapped = self.columns("samples", fresh=True)
        missing = [n for n in names if n not in mapped and not any(
            key.startswith(f"{n}.") for key in mapped
        )]  # fmt: skip
        if missing:
            shown = ", ".join(missing[:8]) + (
                f" and {len(missing) - 8} more" if len(missing) > 8 else ""
            )
            log.warning(
                "samples of run %s split %r: %d column(s) went unindexed past the samples "
                "index's field limit (%s): kept and read back, but Elasticsearch cannot filter, "
                "slice or sort on them; raise index.mapping.total_fields.limit of %s or log "
                "fewer columns",
                run_id,
                split,
                len(missing),
                shown,
                self.names["samples"],
            )

    def write_steps(self, run_id: str, experiment: str, steps: Sequence[dict[str, Any]]) -> None:
        """Store step documents ``run_id:seq``; the first write of a ``seq`` wins.

        A data stream takes only ``create`` (Elasticsearch refuses ``index`` ops, even on the
        backing index): a 409 on our deterministic ``_id`` means the step is already stored
        (a retry after a timeout, a replay of spilled steps) and counts as written. Nothing
        is ever rewritten, so a re-sent batch can never stall the steps after it; the local
        store answers the same (its first line of a ``seq`` wins).
        """
        if not steps:
            return
        stream = self.names["steps"]
        docs = [
            (f"{run_id}:{int(s['seq'])}", {**s, "run_id": run_id, "experiment": experiment})
            for s in steps
        ]
        with self._map_errors("write steps", writing=True):
            self._ensure_ready("steps")
            writer = self.client.options(request_timeout=WRITE_TIMEOUT_S)
            result = bulk.send(writer, bulk.item_lines("create", stream, docs), refresh="wait_for")
        if result.existing:
            log.debug("%d step(s) of run %s were already stored", result.existing, run_id)
        self._raise_rejected(result, "step", len(docs))

    def _ensure_ready(self, kind: Kind) -> None:
        """Fail with 'run warehouse init' before writing where init never ran (checked once)."""
        if kind in self._ready:
            return
        client = self.client
        name = self.names[kind]
        present = (
            client.indices.exists_index_template(name=name).body
            if kind == "steps"
            else client.indices.exists_alias(name=name).body
        )
        if not present:
            raise not_initialised(self.url, name)
        self._ready.add(kind)

    def _raise_rejected(self, result: bulk.BulkResult, what: str, total: int) -> None:
        if not result.rejected:
            return
        first_id, first = result.rejected[0]
        if "index_not_found" in first or "no such index" in first:
            raise not_initialised(self.url, self.prefix + "-*")
        raise InvalidRecord(
            f"Elasticsearch at {public_url(self.url)} rejected {len(result.rejected)} of "
            f"{total} {what} document(s); first: {first_id}: {first}. The index mapping "
            "disagrees with the record; fix the record (or the mapping) and run "
            "'warehouse sync'",
            items=[f"{i}: {r}" for i, r in result.rejected[:20]],
        )

    # reads ---------------------------------------------------------------------------------
    def search_runs(self, query: RunQuery) -> list[dict[str, Any]]:
        """Run documents matching ``query``, in its order, at most ``limit``."""

        def build(columns: dict[str, str]) -> dict[str, Any]:
            return eq.runs_body(query, columns, self._has_extra)

        body = self._build("runs", build)
        if body is None:
            return []
        hits = self._hits("runs", body, query.limit, 0)
        return [bulk.run_from_source(hit["_source"]) for hit in hits]

    def best_per_experiment(self, query: RankQuery) -> list[ExperimentBest]:
        """Each experiment's best run, best first (ties: the earlier ended_at, then run_id).

        One ``terms`` aggregation ranks the experiments by a ``max``/``min`` sub-aggregation;
        per experiment a ``top_hits`` brings the few best candidates with only the fields the
        tie rule reads, and one ``mget`` then fetches the winners' documents: O(experiments)
        documents cross the wire, never O(runs)."""
        metric = query.metric

        def build(columns: dict[str, str]) -> dict[str, Any]:
            lucene.check_metric(metric, columns)
            where = eq.to_query(query.filter, columns, lucene.DEFAULT_FIELDS, self._has_extra)
            return {"size": 0, "query": where}

        body = self._build("runs", build)
        if body is None:
            return []
        body["aggs"] = eq.ranking_aggs(query, MAX_EXPERIMENTS, _TIE_CANDIDATES)
        with self._map_errors("rank experiments"):
            answer = self.client.search(index=self.names["runs"], **body).body
        agg = answer["aggregations"]["experiments"]
        if agg.get("sum_other_doc_count"):
            log.warning("more than %d experiments: the leaderboard is cut", MAX_EXPERIMENTS)
        winners = eq.ranked_winners(agg, query)
        docs = self._runs_by_id([str(w[1]["run_id"]) for w in winners])
        rows = [
            ExperimentBest(name, float(get_path(best, metric)), docs[str(best["run_id"])], count)
            for name, best, count in winners
            if str(best["run_id"]) in docs
        ]
        return eq.best_first(rows, query)

    def count_by(self, query: CountQuery) -> dict[str, int]:
        """One ``terms`` aggregation over the matching runs."""

        def build(columns: dict[str, str]) -> dict[str, Any]:
            where = eq.to_query(query.filter, columns, lucene.DEFAULT_FIELDS, self._has_extra)
            return {"size": 0, "query": where}

        body = self._build("runs", build)
        if body is None or query.field not in self.columns("runs"):
            return {}
        body["aggs"] = {"values": {"terms": {"field": query.field, "size": MAX_EXPERIMENTS}}}
        with self._map_errors("count runs"):
            answer = self.client.search(index=self.names["runs"], **body).body
        return {
            str(b.get("key_as_string", b["key"])): int(b["doc_count"])
            for b in answer["aggregations"]["values"]["buckets"]
        }

    def _runs_by_id(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The whole documents of these runs, by id (one request)."""
        if not run_ids:
            return {}
        with self._map_errors("read runs"):
            answer = self.client.mget(index=self.names["runs"], ids=list(run_ids)).body
        return {
            str(doc["_id"]): bulk.run_from_source(doc["_source"])
            for doc in answer["docs"]
            if doc.get("found")
        }

    def search_samples(self, query: SampleQuery) -> Iterator[dict[str, Any]]:
        """A run's sample rows (one split or all), sorted, from ``offset``, at most ``limit``."""
        limit = query.limit
        self._require_run(query.run_id, "samples")

        def build(columns: dict[str, str]) -> dict[str, Any]:
            must: list[dict[str, Any]] = [{"term": {"run_id": query.run_id}}]
            if query.split is not None:
                must.append({"term": {"split": query.split}})
            if query.filter:
                must.append(eq.to_query(query.filter, columns, _SAMPLE_DEFAULTS))
            if query.sort is not None:
                lucene.sort_kind(query.sort, columns, explicit=True, what="sample column")
                sort: list[Any] = [
                    {query.sort: {"order": query.order, "missing": "_last"}},
                    {"sample_id": {"order": "asc"}},
                    {"split": {"order": "asc"}},
                ]
            else:
                sort = [{"split": {"order": "asc"}}, {bulk.ROW_FIELD: {"order": "asc"}}]
            return {
                "query": {"bool": {"filter": must}},
                "sort": sort,
                "_source": {"excludes": [bulk.ROW_FIELD]},
            }

        body = self._build("samples", build)
        if body is None:
            return iter(())
        return (hit["_source"] for hit in self._hits("samples", body, limit, query.offset))

    def sample_batches(
        self, run_id: str, split: str, columns: Sequence[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """One split's rows as Arrow batches in write order (a point-in-time scan)."""
        body: dict[str, Any] = {
            "query": {
                "bool": {"filter": [{"term": {"run_id": run_id}}, {"term": {"split": split}}]}
            },
            "sort": [{bulk.ROW_FIELD: {"order": "asc"}}],
            "_source": {"excludes": [bulk.ROW_FIELD]}
            if columns is None
            else {"includes": list(columns)},
        }
        if not self._count("samples", run_id=run_id, split=split):
            raise NotFound(
                f"run {run_id} has no {split!r} samples in Elasticsearch at {public_url(self.url)}",
                run_id=run_id,
            )
        hits = self._hits("samples", body, None, 0)
        return bulk.batches_of(hit["_source"] for hit in hits)

    def group_samples(self, query: GroupQuery) -> list[Group]:
        """Grouped sample counts: one aggregation (two with bins: their range first)."""
        columns = self.columns("samples")
        if query.by not in columns or query.column not in columns:
            return []
        cuts: list[float] = []
        with self._map_errors("group samples"):
            if query.bins is not None:
                span = self.client.search(index=self.names["samples"], **eg.range_body(query))
                lo, hi = (span.body["aggregations"][k]["value"] for k in ("lo", "hi"))
                if lo is None or hi is None:
                    return []
                cuts = query.cuts(float(lo), float(hi))
            keys = None
            if query.order == "wrong" and not query.per_run and query.bins is None:
                first = eg.most_wrong_body(query, columns[query.column])
                found = self.client.search(index=self.names["samples"], **first).body
                keys = eg.candidates(found)
                if not keys:  # nothing is ever wrong: the first groups by key
                    keys = None
            request = eg.body(query, columns[query.column], cuts, keys)
            answer = self.client.search(index=self.names["samples"], **request).body
        return eg.groups(answer, query, cuts)

    def steps(self, query: StepRange) -> Iterator[dict[str, Any]]:
        """A run's steps in ``seq`` order, after ``after_seq``, at most ``limit``."""
        limit = query.limit
        self._require_run(query.run_id, "steps")
        body: dict[str, Any] = {
            "query": {
                "bool": {
                    "filter": [
                        {"term": {"run_id": query.run_id}},
                        {"range": {"seq": {"gt": query.after_seq}}},
                    ]
                }
            },
            "sort": [{"seq": {"order": "asc"}}],
        }
        if query.fields is not None:
            body["_source"] = {"includes": list(query.fields)}
        if not self._exists("steps"):
            return iter(())  # the stream is created by the first step written
        return (hit["_source"] for hit in self._hits("steps", body, limit, 0))

    # read helpers --------------------------------------------------------------------------
    def columns(self, kind: Kind, *, fresh: bool = False) -> dict[str, str]:
        """``{dotted.field: lucene kind}`` of every field the index has mapped (cached 30 s)."""
        cached = self._fields.get(kind)
        if cached and not fresh and time.monotonic() - cached[0] < _FIELDS_TTL_S:
            return cached[1]
        with self._map_errors(f"read the {kind} mapping"):
            answer = self.client.indices.get_mapping(index=self.names[kind]).body
        columns = eq.kinds(answer)
        columns.pop(bulk.ROW_FIELD, None)
        if eq.EXTRA in columns and not self._count_where(kind, {"exists": {"field": eq.EXTRA}}):
            columns.pop(eq.EXTRA)  # mapped by the template, but no run has a huge config
        self._fields[kind] = (time.monotonic(), columns)
        return columns

    def _build(
        self, kind: Kind, build: Callable[[dict[str, str]], dict[str, Any]]
    ) -> dict[str, Any] | None:
        """``build(columns)``; on a field error, retried with a fresh mapping; None if empty."""
        try:
            return build(self.columns(kind))
        except QuerySyntaxError:
            try:
                return build(self.columns(kind, fresh=True))
            except QuerySyntaxError:
                if self._count(kind) == 0:
                    return None  # nothing recorded yet: no answer rather than a field error
                raise

    def count_records(self, kind: Kind, **term: str) -> int:
        """How many ``kind`` documents match the terms (``run_id=..., split=...``); 0 when
        their index does not exist yet. For ``warehouse sync --verify``."""
        if kind != "samples" and not self._exists(kind):
            return 0
        with self._map_errors(f"count {kind}"):
            self.client.indices.refresh(index=self.names[kind])
        return self._count(kind, **term)

    def _count(self, kind: Kind, **term: str) -> int:
        query: dict[str, Any] = {"bool": {"filter": [{"term": {k: v}} for k, v in term.items()]}}
        return self._count_where(kind, query)

    def _count_where(self, kind: Kind, query: dict[str, Any]) -> int:
        with self._map_errors(f"count {kind}"):
            return int(self.client.count(index=self.names[kind], query=query).body["count"])

    def _has_extra(self, key: str) -> bool:
        """Whether some run keeps ``params.<key>`` in ``params_extra`` (a huge config)."""
        return bool(self._count_where("runs", {"exists": {"field": f"{eq.EXTRA}.{key}"}}))

    def _exists(self, kind: Kind) -> bool:
        with self._map_errors(f"look for {self.names[kind]}"):
            return bool(self.client.indices.exists(index=self.names[kind]).body)

    def _require_run(self, run_id: str, kind: Kind) -> None:
        """NotFound unless the run or some of its ``kind`` records exist."""
        if self._count("runs", run_id=run_id):
            return
        if (kind == "samples" or self._exists(kind)) and self._count(kind, run_id=run_id):
            return
        raise NotFound(
            f"no run {run_id!r} in Elasticsearch at {public_url(self.url)} "
            f"({self.names['runs']}); list runs with 'warehouse query runs'",
            run_id=run_id,
        )

    def _hits(
        self, kind: Kind, body: dict[str, Any], limit: int | None, offset: int
    ) -> Iterator[dict[str, Any]]:
        """Hits of a sorted search (one request when small, else point in time + search_after)."""
        if limit == 0:
            return iter(())
        with self._map_errors(f"search {kind}"):
            client = self.client
        return eq.hits(
            client,
            self.names[kind],
            body,
            limit,
            offset,
            lambda: self._map_errors(f"search {kind}"),
        )

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """``delete_by_query`` on samples and steps (a data stream allows it), the run
        documents last; each refreshed, so every view answers without them at once."""
        if not run_ids:
            return 0
        query = {"terms": {"run_id": list(run_ids)}}
        found = 0
        with self._map_errors("delete runs"):
            for kind in ("samples", "steps", "runs"):
                if not self._exists(kind):
                    continue
                answer = self.client.delete_by_query(
                    index=self.names[kind], query=query, refresh=True, conflicts="proceed"
                ).body
                if kind == "runs":
                    found = int(answer.get("deleted", 0))
        return found

    # admin ---------------------------------------------------------------------------------
    def install(self) -> list[tuple[str, str, str]]:
        """Install/update templates, the aliased first indices and the steps stream.

        Returns ``(what, name, outcome)`` rows, outcome ``created``/``updated``/``kept``.
        """
        from warehouse.stores.elastic_admin import install

        with self._map_errors("install templates"):
            rows = install(self.client, self.prefix, self.steps_retention)
        self._ready.clear()
        self._fields.clear()
        return rows

    def template_status(self) -> dict[str, str]:
        """``{template name: installed|outdated|missing}``."""
        from warehouse.stores.elastic_admin import template_status

        with self._map_errors("read templates"):
            return template_status(self.client, self.prefix, self.steps_retention)

    def close(self) -> None:
        """Close the connections (the client is recreated if the store is used again)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
        self._info = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def init_elasticsearch(settings: Settings) -> list[tuple[str, str, str]]:
    """`warehouse init`'s Elasticsearch step: ``(what, name, outcome)`` rows."""
    with ElasticStore.from_settings(settings) as store:
        return store.install()


__all__ = ["KINDS", "ElasticStore", "init_elasticsearch", "map_error", "public_url"]
