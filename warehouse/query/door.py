"""How every view is asked, once for all front ends: the settings, the store, the metric in
force, what a ranked view left out, and why an answer is empty.

:mod:`warehouse.query.api` (the views) and :mod:`warehouse.query.overview` build on these;
the front ends (CLI, UI, report, Python) never repeat them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from warehouse.errors import UnknownField
from warehouse.query.result import Empty, Result

if TYPE_CHECKING:
    from warehouse.models import Metric
    from warehouse.settings import Settings
    from warehouse.stores.base import Store


def open_store(settings: Settings | None = None) -> Store:
    """The configured store, for a front end that holds it open (the UI) and closes it."""
    from warehouse import stores
    from warehouse.settings import load

    return stores.open_store(settings or load())


@contextlib.contextmanager
def connect(settings: Settings | None = None) -> Iterator[Store]:
    """The configured store, opened once for several views (pass it as ``store=``); closed
    on leaving the block."""
    with open_store(settings) as store:
        yield store


@contextlib.contextmanager
def opened(store: Store | None, settings: Settings | None) -> Iterator[tuple[Store, Settings]]:
    """``store`` (left open) or the configured one (closed after), with the settings."""
    from warehouse.settings import load

    chosen = settings or load()
    if store is not None:
        yield store, chosen
        return
    with open_store(chosen) as fresh:
        yield fresh, chosen


def setting_metric(settings: Settings, metric: str | None, direction: str | None) -> Metric:
    """``metric`` (its direction given or inferred from its name), else the primary_metric
    and direction settings."""
    from warehouse.models import resolve_metric

    if metric is None:
        return resolve_metric(settings.primary_metric, direction or settings.direction)
    return resolve_metric(metric, direction)


def metric_in_force(
    store: Store,
    settings: Settings,
    metric: str | None,
    direction: str | None,
    filter: str | None,
) -> Metric:
    """The metric a ranked view ranks by: ``metric``, else the primary_metric setting when
    one was set (flag, environment, file), else the primary metric most of the matching runs
    were recorded with (:func:`warehouse.query.coverage.default_metric`)."""
    from warehouse.models import resolve_metric
    from warehouse.query.coverage import default_metric

    if metric is not None or direction is not None:
        return setting_metric(settings, metric, direction)
    if {"primary_metric", "direction"} & settings.model_fields_set:
        return setting_metric(settings, None, None)
    return resolve_metric(default_metric(store, filter, settings.primary_metric))


def ranked(
    store: Store,
    settings: Settings,
    metric: str | None,
    direction: str | None,
    filter: str | None,
    columns: Sequence[str],
    ask: Callable[[Metric], list[dict[str, Any]]],
) -> Result:
    """A view ranked by a metric: the metric in force, the runs it cannot rank (said, never
    silent: :func:`warehouse.query.coverage.left_out`), ``ask(metric)`` for the rows, and
    why none came back. When no run has the metric at all, the error names the metrics the
    matching runs have instead."""
    from warehouse.query.coverage import left_out

    m = metric_in_force(store, settings, metric, direction, filter)
    left = left_out(store, m, filter)
    said = left.message()
    if not left.recorded and said:
        raise UnknownField(f"no run has {m.label}: {said}", field=m.path)
    rows = ask(m)
    return Result(
        rows,
        columns,
        metric=m.label,
        direction=m.direction,
        left_out=said,
        empty=None if rows else why_empty(filter, store=store, settings=settings),
    )


def why_empty(filter: str | None, *, store: Store, settings: Settings, hints: bool = True) -> Empty:
    """Why a view matched nothing: the warehouse holds no run at all, or the filter's likely
    slips (:mod:`warehouse.query.filter_hints`), asked of the store the view used."""
    from warehouse.query.filter_hints import hints as slips
    from warehouse.stores.base import RunQuery

    empty = not store.search_runs(RunQuery(limit=1, fields=("run_id",)))
    found = slips(filter, store) if filter and hints and not empty else None
    return Empty(describe_source(settings), empty, found)


def describe_source(settings: Settings) -> str:
    """``Elasticsearch http://host:9200 (warehouse-*)`` or ``local store /path`` — no secrets."""
    if settings.store_engine == "elasticsearch" and settings.es_url:
        from warehouse.url_credentials import strip_url_credentials

        url = strip_url_credentials(settings.es_url)
        return f"Elasticsearch {url} ({settings.index_prefix}-*)"
    return f"local store {settings.resolved_home}"


__all__ = [
    "connect",
    "describe_source",
    "metric_in_force",
    "open_store",
    "opened",
    "ranked",
    "setting_metric",
    "why_empty",
]
