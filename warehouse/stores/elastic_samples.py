"""ElasticStore's samples: the ``{prefix}-samples`` index written and read, a split at a time.

A split is replaced whole: its documents are deleted, the new batches streamed in bulk (ids
checked on the way: a refused split is deleted again, as in the local store) and the index
refreshed once at the end. Reads are sorted searches (``search``), a point-in-time scan in
write order (``batches``) and the grouped counts of ``elastic_groups`` (``group``).

The functions take the store's :class:`~warehouse.stores.elastic_indices.ElasticIndices` (the
connection, the error border, the mapping cache, counts and paged hits) and use only its public
methods; the store's ``write_samples``, ``search_samples``, ``sample_batches`` and
``group_samples`` call them.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from warehouse.errors import InvalidRecord, NotFound
from warehouse.filters import lucene
from warehouse.stores import elastic_bulk as bulk
from warehouse.stores import elastic_groups as eg
from warehouse.stores import elastic_query as eq
from warehouse.stores.base import Group, GroupQuery, SampleQuery
from warehouse.stores.elastic_errors import public_url
from warehouse.stores.sample_ids import SampleIds

if TYPE_CHECKING:
    from warehouse.stores.elastic_indices import ElasticIndices

log = logging.getLogger("warehouse.stores.elastic")  # the store's own logger, as before

SAMPLE_DEFAULTS = ("sample_id",)  # what a bare term searches in a sample filter


def write(
    store: ElasticIndices,
    run_id: str,
    experiment: str,
    split: str,
    batches: Iterable[pa.RecordBatch],
) -> int:
    """Replace the samples of ``run_id``/``split``; stream the batches; return the count."""
    index = store.names["samples"]
    recorded_at = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
    result = bulk.BulkResult()
    rows = 0
    seen: dict[str, None] = {}
    with store.errors("write samples", writing=True):
        store.ensure_ready("samples")
        client = store.writer()
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
    store.raise_rejected(result, "sample", rows)
    if seen:
        _warn_unindexed(store, run_id, split, list(seen))
    return rows


def _warn_unindexed(store: ElasticIndices, run_id: str, split: str, names: Sequence[str]) -> None:
    """Say which sample columns the index left unmapped past its field limit: they are
    kept in ``_source`` (and read back) but cannot be filtered, sliced or sorted on."""
    mapped = store.columns("samples", fresh=True)
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
            store.names["samples"],
        )


def search(store: ElasticIndices, query: SampleQuery) -> Iterator[dict[str, Any]]:
    """A run's sample rows (one split or all), sorted, from ``offset``, at most ``limit``."""
    limit = query.limit
    store.require_run(query.run_id, "samples")

    def build(columns: dict[str, str]) -> dict[str, Any]:
        must: list[dict[str, Any]] = [{"term": {"run_id": query.run_id}}]
        if query.split is not None:
            must.append({"term": {"split": query.split}})
        if query.filter:
            must.append(eq.to_query(query.filter, columns, SAMPLE_DEFAULTS))
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

    body = store.build("samples", build)
    if body is None:
        return iter(())
    return (hit["_source"] for hit in store.hits("samples", body, limit, query.offset))


def batches(
    store: ElasticIndices, run_id: str, split: str, columns: Sequence[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """One split's rows as Arrow batches in write order (a point-in-time scan)."""
    body: dict[str, Any] = {
        "query": {"bool": {"filter": [{"term": {"run_id": run_id}}, {"term": {"split": split}}]}},
        "sort": [{bulk.ROW_FIELD: {"order": "asc"}}],
        "_source": {"excludes": [bulk.ROW_FIELD]}
        if columns is None
        else {"includes": list(columns)},
    }
    if not store.count("samples", run_id=run_id, split=split):
        raise NotFound(
            f"run {run_id} has no {split!r} samples in Elasticsearch at {public_url(store.url)}",
            run_id=run_id,
        )
    hits = store.hits("samples", body, None, 0)
    return bulk.batches_of(hit["_source"] for hit in hits)


def group(store: ElasticIndices, query: GroupQuery) -> list[Group]:
    """Grouped sample counts: one aggregation (two with bins: their range first)."""
    columns = store.columns("samples")
    if query.by not in columns or query.column not in columns:
        return []
    index = store.names["samples"]
    cuts: list[float] = []
    with store.errors("group samples"):
        client = store.client
        if query.bins is not None:
            span = client.search(index=index, **eg.range_body(query))
            lo, hi = (span.body["aggregations"][k]["value"] for k in ("lo", "hi"))
            if lo is None or hi is None:
                return []
            cuts = query.cuts(float(lo), float(hi))
        keys = None
        if query.order == "wrong" and not query.per_run and query.bins is None:
            first = eg.most_wrong_body(query, columns[query.column])
            found = client.search(index=index, **first).body
            keys = eg.candidates(found)
            if not keys:  # nothing is ever wrong: the first groups by key
                keys = None
        request = eg.body(query, columns[query.column], cuts, keys)
        answer = client.search(index=index, **request).body
    return eg.groups(answer, query, cuts)


__all__ = ["SAMPLE_DEFAULTS", "batches", "group", "search", "write"]
