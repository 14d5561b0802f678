"""ElasticStore: the store contract on Elasticsearch (official ``elasticsearch`` 9.x client).

Translation only: records become documents (``elastic_bulk``), queries become DSL
(``elastic_query``), client errors become ours at one border (``elastic_errors``, through
``ElasticIndices.errors``); templates, aliases and the steps data stream come from
``elastic_templates`` and ``elastic_admin`` (`warehouse init`). Writes are idempotent by
``_id``: runs are indexed with ``version_type=external_gte`` and a nanosecond version (a late
copy never overwrites a newer one), a split's samples are deleted and rewritten, steps are
created by ``run_id:seq`` (the first write wins: a 409 on ``create`` means already stored).
Runs and steps are written with ``refresh=wait_for``, samples refreshed once at the end:
"record, then query" sees the record. A server that answers the 9.x client's first request is
accepted whatever version it reports (an 8.x refuses its ``compatible-with=9`` headers;
noida-db says 8.15.3 and speaks the 9 API). The connection, the error border, the mapping
cache and paged hits are ``elastic_indices`` (the client and its retry policy come from
``elastic_connect``); the samples index is written and read by ``elastic_samples`` on those
same indices.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self

import pyarrow as pa
from elasticsearch import Elasticsearch

from warehouse.filters import lucene
from warehouse.filters.docpath import get_path
from warehouse.models import run_version
from warehouse.stores import elastic_bulk as bulk
from warehouse.stores import elastic_connect as connect
from warehouse.stores import elastic_query as eq
from warehouse.stores import elastic_samples as samples
from warehouse.stores.base import (
    CountQuery,
    ExperimentBest,
    Group,
    GroupQuery,
    RankQuery,
    RunQuery,
    SampleQuery,
    StepRange,
    Timeline,
    TimelineQuery,
)
from warehouse.stores.elastic_connect import DEFAULT_TIMEOUT_S, MAX_RETRIES
from warehouse.stores.elastic_errors import map_error, public_url
from warehouse.stores.elastic_indices import ElasticIndices
from warehouse.stores.elastic_templates import KINDS, MAX_TYPED_PARAMS, Kind
from warehouse.stores.timeline_search import timeline_by_search

if TYPE_CHECKING:
    from warehouse.settings import Settings

log = logging.getLogger(__name__)

MAX_EXPERIMENTS = 10_000
_TIE_CANDIDATES = 10  # best runs fetched per experiment; ties among them settled client-side


class ElasticStore:
    """Runs, samples and steps in Elasticsearch: ``{prefix}-runs``, ``-samples``, ``-steps``.

    ``ElasticStore("http://localhost:9200", prefix="team-a")`` or an ``Elasticsearch`` client;
    :meth:`from_settings` for the configured one. Construction never touches the network.
    The connection, the error border and the mapping cache are its :attr:`indices`
    (:class:`~warehouse.stores.elastic_indices.ElasticIndices`), shared with the samples.
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
        self.indices = ElasticIndices(
            client_or_url, prefix=prefix, client_options=client_options, require_tls=require_tls
        )
        self.url = self.indices.url
        self.require_tls = require_tls
        self.prefix = prefix
        self.steps_retention = steps_retention
        self.names = self.indices.names

    @classmethod
    def from_settings(cls, settings: Settings) -> ElasticStore:
        """The store ``settings`` describe (URL, credentials, TLS, prefix); offline."""
        url, options = connect.settings_options(settings)
        return cls(
            url,
            prefix=settings.index_prefix,
            steps_retention=settings.steps_retention,
            client_options=options,
            require_tls=settings.require_tls,
        )

    # connection ----------------------------------------------------------------------------
    @property
    def client(self) -> Elasticsearch:
        """The client, created and version-checked on first use."""
        return self.indices.client

    @property
    def server_version(self) -> str | None:
        """The version the server reported (None before the first request)."""
        return self.indices.server_version

    def server_info(self) -> dict[str, Any]:
        """``GET /`` of the server: version, cluster name (raises if unsupported/unreachable)."""
        return self.indices.server_info()

    def columns(self, kind: Kind, *, fresh: bool = False) -> dict[str, str]:
        """``{dotted.field: lucene kind}`` of every field the index has mapped (cached 30 s)."""
        return self.indices.columns(kind, fresh=fresh)

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
        with self.indices.errors("write runs", writing=True):
            self.indices.ensure_ready("runs")
            writer = self.indices.writer()
            result = bulk.send(writer, items, refresh="wait_for")
        if any(len(doc.get("params") or {}) > MAX_TYPED_PARAMS for doc in docs):
            self.indices.forget_columns("runs")  # params_extra now holds values: read it afresh
        self.indices.raise_rejected(result, "run", len(items))

    def write_samples(
        self, run_id: str, experiment: str, split: str, batches: Iterable[pa.RecordBatch]
    ) -> int:
        """Replace the samples of ``run_id``/``split``; stream the batches; return the count."""
        return samples.write(self.indices, run_id, experiment, split, batches)

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
        with self.indices.errors("write steps", writing=True):
            self.indices.ensure_ready("steps")
            writer = self.indices.writer()
            result = bulk.send(writer, bulk.item_lines("create", stream, docs), refresh="wait_for")
        if result.existing:
            log.debug("%d step(s) of run %s were already stored", result.existing, run_id)
        self.indices.raise_rejected(result, "step", len(docs))

    # reads ---------------------------------------------------------------------------------
    def search_runs(self, query: RunQuery) -> list[dict[str, Any]]:
        """Run documents matching ``query``, in its order, at most ``limit``."""

        def build(columns: dict[str, str]) -> dict[str, Any]:
            return eq.runs_body(query, columns, self.indices.has_extra)

        body = self.indices.build("runs", build)
        if body is None:
            return []
        hits = self.indices.hits("runs", body, query.limit, 0)
        return [bulk.run_from_source(hit["_source"]) for hit in hits]

    def best_per_experiment(self, query: RankQuery) -> list[ExperimentBest]:
        """Each experiment's best run, best first (ties: the earlier ended_at, then run_id).

        One aggregation: each experiment's run count, and over its finished runs with the
        metric a ``max``/``min`` and a ``top_hits`` of the few best candidates with only the
        fields the tie rule reads; one ``mget`` then fetches the winners' documents:
        O(experiments) documents cross the wire, never O(runs). A running run is never a
        best."""
        metric = query.metric

        def build(columns: dict[str, str]) -> dict[str, Any]:
            lucene.check_metric(metric, columns)
            where = eq.to_query(
                query.filter, columns, lucene.DEFAULT_FIELDS, self.indices.has_extra
            )
            return {"size": 0, "query": where}

        body = self.indices.build("runs", build)
        if body is None:
            return []
        body["aggs"] = eq.ranking_aggs(query, MAX_EXPERIMENTS, _TIE_CANDIDATES)
        with self.indices.errors("rank experiments"):
            answer = self.client.search(index=self.names["runs"], **body).body
        aggs = answer["aggregations"]
        if aggs["runs"].get("sum_other_doc_count"):
            log.warning("more than %d experiments: the leaderboard is cut", MAX_EXPERIMENTS)
        winners = eq.ranked_winners(aggs, query)
        docs = self._runs_by_id([str(w[1]["run_id"]) for w in winners])
        rows = [
            ExperimentBest(name, float(get_path(best, metric)), docs[str(best["run_id"])], count)
            for name, best, count in winners
            if str(best["run_id"]) in docs
        ]
        return eq.best_first(rows, query)

    def timeline(self, query: TimelineQuery) -> Timeline:
        """The records chased one one-run search each (O(records) requests), or every scored
        run in one sorted, paged search (:mod:`warehouse.stores.timeline_search`)."""
        return timeline_by_search(self.search_runs, query)

    def count_by(self, query: CountQuery) -> dict[str, int]:
        """One ``terms`` aggregation over the matching runs."""

        def build(columns: dict[str, str]) -> dict[str, Any]:
            where = eq.to_query(
                query.filter, columns, lucene.DEFAULT_FIELDS, self.indices.has_extra
            )
            return {"size": 0, "query": where}

        body = self.indices.build("runs", build)
        if body is None or query.field not in self.columns("runs"):
            return {}
        body["aggs"] = {"values": {"terms": {"field": query.field, "size": MAX_EXPERIMENTS}}}
        with self.indices.errors("count runs"):
            answer = self.client.search(index=self.names["runs"], **body).body
        return {
            str(b.get("key_as_string", b["key"])): int(b["doc_count"])
            for b in answer["aggregations"]["values"]["buckets"]
        }

    def version(self) -> Hashable:
        """The run count and the newest ``updated_at`` (a run's version) with its run id:
        one search of one hit (``ignore_unavailable``: no runs index yet answers none)."""
        body: dict[str, Any] = {
            "size": 1,
            "track_total_hits": True,
            "ignore_unavailable": True,
            "sort": [{"updated_at": {"order": "desc", "unmapped_type": "date"}}],
            "_source": ["run_id", "updated_at"],
        }
        with self.indices.errors("count runs"):
            answer = self.client.search(index=self.names["runs"], **body).body
        hits = answer["hits"]
        newest = hits["hits"][0].get("_source", {}) if hits["hits"] else {}
        return (int(hits["total"]["value"]), newest.get("updated_at"), newest.get("run_id"))

    def _runs_by_id(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The whole documents of these runs, by id (one request)."""
        if not run_ids:
            return {}
        with self.indices.errors("read runs"):
            answer = self.client.mget(index=self.names["runs"], ids=list(run_ids)).body
        return {
            str(doc["_id"]): bulk.run_from_source(doc["_source"])
            for doc in answer["docs"]
            if doc.get("found")
        }

    def search_samples(self, query: SampleQuery) -> Iterator[dict[str, Any]]:
        """A run's sample rows (one split or all), sorted, from ``offset``, at most ``limit``."""
        return samples.search(self.indices, query)

    def sample_batches(
        self, run_id: str, split: str, columns: Sequence[str] | None = None
    ) -> Iterator[pa.RecordBatch]:
        """One split's rows as Arrow batches in write order (a point-in-time scan)."""
        return samples.batches(self.indices, run_id, split, columns)

    def group_samples(self, query: GroupQuery) -> list[Group]:
        """Grouped sample counts: one aggregation (two with bins: their range first)."""
        return samples.group(self.indices, query)

    def steps(self, query: StepRange) -> Iterator[dict[str, Any]]:
        """A run's steps in ``seq`` order, after ``after_seq``, at most ``limit``."""
        limit = query.limit
        self.indices.require_run(query.run_id, "steps")
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
        if not self.indices.exists("steps"):
            return iter(())  # the stream is created by the first step written
        return (hit["_source"] for hit in self.indices.hits("steps", body, limit, 0))

    # read helpers --------------------------------------------------------------------------
    def count_records(self, kind: Kind, **term: str) -> int:
        """How many ``kind`` documents match the terms (``run_id=..., split=...``); 0 when
        their index does not exist yet. For ``warehouse sync --verify``."""
        if kind != "samples" and not self.indices.exists(kind):
            return 0
        with self.indices.errors(f"count {kind}"):
            self.client.indices.refresh(index=self.names[kind])
        return self.indices.count(kind, **term)

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """``delete_by_query`` on samples and steps (a data stream allows it), the run
        documents last; each refreshed, so every view answers without them at once."""
        if not run_ids:
            return 0
        query = {"terms": {"run_id": list(run_ids)}}
        found = 0
        with self.indices.errors("delete runs"):
            for kind in ("samples", "steps", "runs"):
                if not self.indices.exists(kind):
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

        with self.indices.errors("install templates"):
            rows = install(self.client, self.prefix, self.steps_retention)
        self.indices.installed()
        return rows

    def template_status(self) -> dict[str, str]:
        """``{template name: installed|outdated|missing}``."""
        from warehouse.stores.elastic_admin import template_status

        with self.indices.errors("read templates"):
            return template_status(self.client, self.prefix, self.steps_retention)

    def close(self) -> None:
        """Close the connections (the client is recreated if the store is used again)."""
        self.indices.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def init_elasticsearch(settings: Settings) -> list[tuple[str, str, str]]:
    """`warehouse init`'s Elasticsearch step: ``(what, name, outcome)`` rows."""
    with ElasticStore.from_settings(settings) as store:
        return store.install()


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "KINDS",
    "MAX_RETRIES",
    "ElasticStore",
    "init_elasticsearch",
    "map_error",
    "public_url",
]
