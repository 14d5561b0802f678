"""The views that stream, from a store the caller keeps open: the rows never all in memory.

``warehouse query runs --format json|csv``, ``samples`` and ``steps`` print what these yield
as the store reads it, a chunk at a time (:func:`warehouse.query.api.connect` opens the store
once for them and for why an answer is empty). Re-exported by :mod:`warehouse.query.api`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from warehouse.query.door import setting_metric

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.query.views import SampleRows
    from warehouse.settings import Settings
    from warehouse.stores.base import Store
    from warehouse.stores.local_export import CsvRows


def run_stream(
    filter: str | None, *, sort: Sequence[str] = (), limit: int | None, store: Store
) -> tuple[int, Iterator[dict[str, Any]]] | None:
    """``runs`` as whole documents read a chunk at a time, in flat memory, where the store
    can (:class:`~warehouse.stores.base.StreamsRuns`): how many, and the documents with their status
    as shown; None where it cannot (ask :func:`runs`)."""
    from warehouse.stores.base import streams_runs

    streaming = streams_runs(store)
    if streaming is None:
        return None
    from datetime import UTC, datetime

    from warehouse.query.status import with_shown_status

    now = datetime.now(UTC)
    total, docs = streaming.run_documents(_run_query(filter, sort, limit))
    return total, (with_shown_status([doc], now)[0] for doc in docs)


def run_csv(
    filter: str | None,
    *,
    sort: Sequence[str] = (),
    limit: int | None,
    first: Sequence[str],
    store: Store,
) -> CsvRows | None:
    """``runs`` as CSV rows read from a store's columns a chunk at a time, where the store
    can (:class:`~warehouse.stores.base.StreamsRuns`; ``first``: the leading columns, the
    metrics after them); None where it cannot (ask :func:`runs`)."""
    from warehouse.stores.base import streams_runs

    streaming = streams_runs(store)
    if streaming is None:
        return None
    from datetime import UTC, datetime

    from warehouse.filters.docpath import project
    from warehouse.query.status import STATUS_FIELDS, shown_status

    now = datetime.now(UTC)
    seen = (*first, "metrics", "primary_metric", *STATUS_FIELDS)  # as runs() reads them
    plan: CsvRows | None = streaming.csv_rows(
        _run_query(filter, sort, limit), first, lambda doc: shown_status(project(doc, seen), now)
    )
    return plan


def _run_query(filter: str | None, sort: Sequence[str], limit: int | None) -> Any:
    from warehouse.query.lookup import parse_sort
    from warehouse.query.status import lost_aware
    from warehouse.stores.base import RunQuery

    return RunQuery(filter=lost_aware(filter), sort=tuple(map(parse_sort, sort)), limit=limit)


def sample_rows(
    run: str | None,
    *,
    split: str | None = None,
    sort: str | None = None,
    order: str = "asc",
    where: str | None = None,
    limit: int | None = 100,
    offset: int = 0,
    metric: str | None = None,
    direction: str | None = None,
    filter: str | None = None,
    experiment: str | None = None,
    store: Store,
    settings: Settings,
) -> SampleRows:
    """The rows of :func:`samples` streamed from ``store`` (kept open by the caller):
    ``run`` an id or prefix, None for the best run by ``metric``; ``.run`` is its document."""
    from warehouse.errors import QuerySyntaxError
    from warehouse.query import views

    if order not in ("asc", "desc"):
        raise QuerySyntaxError(f"sample order {order!r} is neither asc nor desc")
    m = setting_metric(settings, metric, direction)
    found = views.samples(
        store,
        run,
        best=run is None,
        metric=m.label,
        direction=m.direction,
        filter=filter,
        experiment=experiment,
        split=split,
        sort=sort,
        order="desc" if order == "desc" else "asc",
        limit=limit,
        where=where,
    )
    return replace(found, query=replace(found.query, offset=offset)) if offset else found


def sample_batches(found: SampleRows, *, store: Store) -> Iterator[pa.RecordBatch] | None:
    """Every stored row of ``found`` in stored order as Arrow batches, split by split, when
    it asks for that (no sort, filter or limit), so the rows never become Python dicts;
    None otherwise (iterate ``found``)."""
    query, run = found.query, found.run
    plain = query.sort is None and query.filter is None and query.limit is None
    if not plain or query.offset or not (query.split or run.get("sample_counts")):
        return None
    from warehouse.errors import NotFound
    from warehouse.models import sample_column_order

    def batches() -> Iterator[pa.RecordBatch]:
        counts = run.get("sample_counts") or {}
        for split in [query.split] if query.split else sorted(counts):
            try:
                for batch in store.sample_batches(query.run_id, split):
                    yield batch.select(sample_column_order(batch.schema.names))  # as every store
            except NotFound:  # counted, never written (a run cut short)
                continue

    return batches()


def step_rows(
    run: str, *, limit: int | None = None, after_seq: int = -1, store: Store
) -> Iterator[dict[str, Any]]:
    """The rows of :func:`steps` streamed from ``store`` (kept open by the caller)."""
    from warehouse.query import views

    return views.steps(store, run, limit, after_seq)


__all__ = ["run_csv", "run_stream", "sample_batches", "sample_rows", "step_rows"]
