"""The warehouse's indices on one Elasticsearch: what every reader and writer of them shares.

:class:`ElasticIndices` holds the connection (created and version-checked on first use by
``elastic_connect``), the index names of a prefix, the one error border (:meth:`errors`: every
client error becomes a warehouse error), the mapping cache (``{field: lucene kind}``, 30 s),
counts, existence checks and sorted hits past ``index.max_result_window`` (point in time +
``search_after``). :class:`~warehouse.stores.elastic.ElasticStore` (runs, steps, the contract)
and ``elastic_samples`` (the samples index) are both built on it, through these public methods
only. Construction never touches the network.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import elastic_transport
from elasticsearch import Elasticsearch

from warehouse.errors import InvalidRecord, NotFound, QuerySyntaxError, WarehouseError
from warehouse.stores import elastic_bulk as bulk
from warehouse.stores import elastic_connect as connect
from warehouse.stores import elastic_query as eq
from warehouse.stores.elastic_errors import CLIENT_ERRORS, map_error, not_initialised, public_url
from warehouse.stores.elastic_templates import Kind, index_names

if TYPE_CHECKING:
    from warehouse.settings import Settings

WRITE_TIMEOUT_S = 120.0  # bulk chunks and delete_by_query may take longer than a search
_FIELDS_TTL_S = 30.0


class ElasticIndices:
    """``{prefix}-runs``, ``-samples`` and ``-steps`` on the server at ``url``."""

    def __init__(
        self,
        client_or_url: Elasticsearch | str,
        *,
        prefix: str = "warehouse",
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
        self.options = dict(client_options or {})
        self.require_tls = require_tls
        self.prefix = prefix
        self.names = index_names(prefix)
        self.server_version: str | None = None
        self._lock = threading.Lock()
        self._info: dict[str, Any] | None = None
        self._ready: set[Kind] = set()
        self._fields: dict[Kind, tuple[float, dict[str, str]]] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> ElasticIndices:
        """The indices ``settings`` describe (URL, credentials, TLS, prefix); offline."""
        url, options = connect.settings_options(settings)
        return cls(
            url,
            prefix=settings.index_prefix,
            client_options=options,
            require_tls=settings.require_tls,
        )

    # connection ----------------------------------------------------------------------------
    @property
    def client(self) -> Elasticsearch:
        """The client, created and version-checked on first use (see ``elastic_connect``:
        a time-out is never retried, refused connections and 429/5xx answers twice)."""
        with self._lock:
            if self._client is None:
                self._client = connect.connect(self.url, self.options, require_tls=self.require_tls)
            client = self._client
        if self._info is None:
            try:
                self._info, self.server_version = connect.read_info(client)
            except elastic_transport.ConnectionTimeout:
                raise connect.not_answering(self.url, self.options) from None
        return client

    def server_info(self) -> dict[str, Any]:
        """``GET /`` of the server: version, cluster name (raises if unsupported/unreachable)."""
        with self.errors("connect"):
            self.client  # noqa: B018 - connects and reads the info once
        assert self._info is not None
        return self._info

    @contextlib.contextmanager
    def errors(self, doing: str, *, writing: bool = False) -> Iterator[None]:
        """The error border: every client/transport error inside becomes a warehouse error."""
        try:
            yield
        except WarehouseError:
            raise
        except CLIENT_ERRORS as exc:
            raise map_error(exc, self.url, doing=doing, writing=writing) from exc

    def writer(self) -> Elasticsearch:
        """The client with the write timeout: bulk chunks and deletes outlast a search."""
        return self.client.options(request_timeout=WRITE_TIMEOUT_S)

    def close(self) -> None:
        """Close the connections (the client is recreated if used again)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
        self._info = None

    # writing -------------------------------------------------------------------------------
    def ensure_ready(self, kind: Kind) -> None:
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

    def installed(self) -> None:
        """Forget what was checked and cached: templates and mappings may have changed."""
        self._ready.clear()
        self._fields.clear()

    def raise_rejected(self, result: bulk.BulkResult, what: str, total: int) -> None:
        """InvalidRecord (or 'run warehouse init') for the documents a bulk rejected."""
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

    # the mapping ---------------------------------------------------------------------------
    def columns(self, kind: Kind, *, fresh: bool = False) -> dict[str, str]:
        """``{dotted.field: lucene kind}`` of every field the index has mapped (cached 30 s)."""
        cached = self._fields.get(kind)
        if cached and not fresh and time.monotonic() - cached[0] < _FIELDS_TTL_S:
            return cached[1]
        with self.errors(f"read the {kind} mapping"):
            answer = self.client.indices.get_mapping(index=self.names[kind]).body
        columns = eq.kinds(answer)
        columns.pop(bulk.ROW_FIELD, None)
        if eq.EXTRA in columns and not self.count_where(kind, {"exists": {"field": eq.EXTRA}}):
            columns.pop(eq.EXTRA)  # mapped by the template, but no run has a huge config
        self._fields[kind] = (time.monotonic(), columns)
        return columns

    def forget_columns(self, kind: Kind) -> None:
        """Read ``kind``'s mapping afresh next time (a write added fields)."""
        self._fields.pop(kind, None)

    def build(
        self, kind: Kind, build: Callable[[dict[str, str]], dict[str, Any]]
    ) -> dict[str, Any] | None:
        """``build(columns)``; on a field error, retried with a fresh mapping; None if empty."""
        try:
            return build(self.columns(kind))
        except QuerySyntaxError:
            try:
                return build(self.columns(kind, fresh=True))
            except QuerySyntaxError:
                if self.count(kind) == 0:
                    return None  # nothing recorded yet: no answer rather than a field error
                raise

    # reading -------------------------------------------------------------------------------
    def count(self, kind: Kind, **term: str) -> int:
        """How many ``kind`` documents match the terms (``run_id=..., split=...``)."""
        query: dict[str, Any] = {"bool": {"filter": [{"term": {k: v}} for k, v in term.items()]}}
        return self.count_where(kind, query)

    def count_where(self, kind: Kind, query: dict[str, Any]) -> int:
        with self.errors(f"count {kind}"):
            return int(self.client.count(index=self.names[kind], query=query).body["count"])

    def has_extra(self, key: str) -> bool:
        """Whether some run keeps ``params.<key>`` in ``params_extra`` (a huge config)."""
        return bool(self.count_where("runs", {"exists": {"field": f"{eq.EXTRA}.{key}"}}))

    def exists(self, kind: Kind) -> bool:
        with self.errors(f"look for {self.names[kind]}"):
            return bool(self.client.indices.exists(index=self.names[kind]).body)

    def require_run(self, run_id: str, kind: Kind) -> None:
        """NotFound unless the run or some of its ``kind`` records exist."""
        if self.count("runs", run_id=run_id):
            return
        if (kind == "samples" or self.exists(kind)) and self.count(kind, run_id=run_id):
            return
        raise NotFound(
            f"no run {run_id!r} in Elasticsearch at {public_url(self.url)} "
            f"({self.names['runs']}); list runs with 'warehouse query runs'",
            run_id=run_id,
        )

    def hits(
        self, kind: Kind, body: dict[str, Any], limit: int | None, offset: int
    ) -> Iterator[dict[str, Any]]:
        """Hits of a sorted search (one request when small, else point in time + search_after)."""
        if limit == 0:
            return iter(())
        with self.errors(f"search {kind}"):
            client = self.client
        return eq.hits(
            client,
            self.names[kind],
            body,
            limit,
            offset,
            lambda: self.errors(f"search {kind}"),
        )


__all__ = ["WRITE_TIMEOUT_S", "ElasticIndices"]
