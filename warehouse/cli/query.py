"""`warehouse query ...`: the question-answering commands over the configured store.

Each command parses its flags, loads the settings (unset flags stay None, so they never beat
the environment), opens the store, asks one view of :mod:`warehouse.query.views` and prints
the rows with :mod:`warehouse.output`: results on stdout, messages on stderr. Errors are
``WarehouseError``\\ s; ``warehouse.cli.main`` turns them into exit codes. Everything heavy
(settings, stores, rich) is imported inside the command bodies.

This module holds the ``query`` app, the flags every view shares, the plumbing and ``runs``;
:mod:`~warehouse.cli.query_ranked` the views ranked by a metric,
:mod:`~warehouse.cli.query_samples` the per-sample views and :mod:`~warehouse.cli.query_show`
the views of given runs (``show``, ``compare``, ``steps``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from warehouse.filters.docpath import get_path
from warehouse.output import Format, info, render

if TYPE_CHECKING:
    from warehouse.settings import Settings
    from warehouse.stores.base import RunQuery


class DirectionChoice(StrEnum):
    max = "max"
    min = "min"


FilterOpt = Annotated[
    str | None,
    typer.Option(
        "--filter",
        "-q",
        help="Lucene filter, as in Kibana's search bar, e.g. "
        "'experiment:svm AND metrics.val.acc:>=0.9 AND NOT status:failed'.",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    Format,
    typer.Option(
        "--format",
        "-f",
        help="table for people; json (an array) or csv for scripts.",
        case_sensitive=False,
    ),
]
FailEmptyOpt = Annotated[
    bool, typer.Option("--fail-empty", help="Exit with code 1 when nothing matches.")
]
MetricOpt = Annotated[
    str | None,
    typer.Option(
        "--metric",
        "-m",
        help="split.metric to rank by (val.acc, val/acc or metrics.val.acc); "
        "default: the primary_metric setting.",
        show_default=False,
    ),
]
DirectionOpt = Annotated[
    DirectionChoice | None,
    typer.Option(
        "--direction",
        help="max = higher is better, min = lower; default: the direction setting, else "
        "inferred from the name (loss, error ... → min).",
        show_default=False,
    ),
]


def limit_opt(default_text: str) -> Any:
    return typer.Option(
        "--limit",
        "-n",
        min=0,
        help=f"At most this many rows ({default_text}; 0 = no limit).",
        show_default=False,
    )


query_app = typer.Typer(
    name="query",
    help="Ask the warehouse: runs, the best runs, the leaderboard, the best score over time, "
    "bias/variance, per-sample results, one run, runs side by side, a run's steps.\n\n"
    "Example: warehouse query leaderboard --metric val.acc",
    no_args_is_help=True,
    add_completion=False,
)


@query_app.callback()
def _no_pandas(ctx: typer.Context) -> None:
    # pyarrow would import pandas (~0.2 s) only to ask whether a value is a pandas object
    from warehouse.stores.lazy import without_pandas

    ctx.with_resource(without_pandas())


def register(app: typer.Typer) -> None:
    """Add the `query` command family to the main app: ``runs`` here, then the ranked views,
    the samples and the one-run views, each module adding its commands when imported."""
    from warehouse.cli import query_ranked, query_samples, query_show  # noqa: F401

    app.add_typer(query_app, name="query")


# --- shared plumbing --------------------------------------------------------------------


def load_settings(**cli: Any) -> Settings:
    from warehouse.settings import load

    return load(cli={k: (v.value if isinstance(v, StrEnum) else v) for k, v in cli.items()})


def metric_in_force(
    settings: Settings, metric: str | None, direction: DirectionChoice | None
) -> tuple[str, str | None]:
    """The metric and direction in force: a --metric flag brings its own inferred direction."""
    if direction is not None:
        return settings.primary_metric, direction.value
    if metric is not None:
        return metric, None
    return settings.primary_metric, settings.direction


def limit_or(value: int | None, default: int | None) -> int | None:
    if value is None:
        return default
    return None if value == 0 else value


def finish(
    count: int,
    fail_empty: bool,
    what: str,
    settings: Settings | None = None,
    filter: str | None = None,
) -> None:
    """Say on stderr when nothing matched — and why: the warehouse holds no run at all (a
    mistyped WAREHOUSE_HOME), or the filter looks mistyped (``metrics.val.acc>0.9``: the
    filter meant, :mod:`warehouse.cli.filter_hints`); exit 1 then if --fail-empty was given."""
    if count:
        return
    message = f"no {what}" + (f" (filter: {filter})" if filter else "")
    hints: list[str] = []
    if settings is not None and _holds_no_run(settings):
        from warehouse.dashboards.report import describe_source

        message = (
            f"no runs recorded in {describe_source(settings)} yet — record one (warehouse demo, "
            "the Hydra callback, warehouse.start_run) or check WAREHOUSE_HOME / es_url"
        )
    elif settings is not None and filter:
        from warehouse.cli import filter_hints
        from warehouse.stores import open_store

        with open_store(settings) as store:
            hints = filter_hints.hints(filter, store)
    info(message)
    for line in hints:
        info(line)
    if fail_empty:
        raise typer.Exit(1)


def _holds_no_run(settings: Settings) -> bool:
    from warehouse.stores import open_store
    from warehouse.stores.base import RunQuery

    with open_store(settings) as store:
        return not store.search_runs(RunQuery(limit=1, fields=("run_id",)))


def render_rows(
    rows: Iterable[Mapping[str, Any]],
    fmt: Format,
    columns: Sequence[str] | None = None,
    title: str | None = None,
    empty: Sequence[str] | None = None,
    **table: Any,
) -> int:
    """``empty``: the view's columns, the CSV header when nothing matched; ``table``: what a
    table takes besides (:func:`warehouse.output.write_table`)."""
    return render(rows, fmt, columns=columns, title=title, empty_header=empty, **table)


# --- runs -------------------------------------------------------------------------------

RUN_TABLE_FIELDS = ("run_id", "experiment", "status", "started_at", "ended_at", "duration_s")


@query_app.command()
def runs(
    filter: FilterOpt = None,
    sort: Annotated[
        list[str] | None,
        typer.Option(
            "--sort",
            "-s",
            help="field[:asc|desc], repeatable; a metric without an order sorts best first. "
            "Default: newest first.",
            show_default=False,
        ),
    ] = None,
    columns: Annotated[
        str | None,
        typer.Option(
            "--columns",
            "-c",
            help="Comma-separated field paths to show, e.g. "
            "run_id,experiment,metrics.val.acc,params.model.C (json: only these keys).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[int | None, limit_opt("default 100")] = None,
    fmt: FormatOpt = Format.table,
    fail_empty: FailEmptyOpt = False,
    metric: MetricOpt = None,
    direction: DirectionOpt = None,
) -> None:
    """Runs matching a filter, sorted and limited. --format json prints whole run records.

    Example: warehouse query runs -q 'experiment:svm AND status:completed'
    --sort metrics.val.acc:desc --columns run_id,metrics.val.acc,params.model.C -n 10
    """
    from warehouse.query import views
    from warehouse.stores import open_store

    settings = load_settings(primary_metric=metric, direction=direction)
    wanted = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    whole_docs = fmt is Format.json and wanted is None
    csv_default = fmt is Format.csv and wanted is None
    fields = None if whole_docs else (wanted or (*RUN_TABLE_FIELDS, "metrics", "primary_metric"))
    most = limit_or(limit, 100)

    def say_if_cut(shown: int) -> None:
        if most is not None and shown == most and limit is None:
            info(f"showing the first {most} runs; --limit N shows more (0 = all)")

    with open_store(settings) as store:
        if csv_default:
            streamed = _csv_from_columns(store, filter, sort or (), most, say_if_cut)
        elif whole_docs:
            streamed = _json_documents(store, filter, sort or (), most, say_if_cut)
        else:
            streamed = None
        docs = [] if streamed is not None else views.runs(store, filter, sort or (), most, fields)
    if streamed is None:
        say_if_cut(len(docs))
    if streamed is not None:
        count = streamed
    elif whole_docs:
        count = render_rows(docs, fmt)
    else:
        primary = None
        if wanted:
            cols = wanted
            blank = [c for c in cols if docs and all(get_path(d, c) is None for d in docs)]
            if blank:
                info(
                    f"no run shown has a value for {', '.join(blank)}; check the name "
                    "(`warehouse query runs -n 1 --format json` shows a whole run)"
                )
        elif fmt is Format.table:  # most wanted first: a narrow terminal drops the last
            primary = _primary_path(settings, docs, metric, direction)
            cols = _run_columns(docs, primary)
        else:
            cols = [*RUN_TABLE_FIELDS, *_metric_columns(docs)]
        rows = ({c: get_path(d, c) for c in cols} for d in docs)
        count = render_rows(
            rows,
            fmt,
            columns=cols,
            primary=None if wanted else primary,
            more="--columns picks them, --format json shows whole runs",
        )
    finish(count, fail_empty, "runs match", settings, filter)


def _csv_from_columns(
    store: Any,
    filter: str | None,
    sort: Sequence[str],
    most: int | None,
    before: Callable[[int], None],
) -> int | None:
    """The default CSV of ``runs`` written from a store's columns, a chunk of runs at a time
    (the local store: ``LocalStore.csv_rows``); the rows written, or None (nothing written)
    when the store cannot, and the run documents are read instead."""
    export = getattr(store, "csv_rows", None)
    if export is None:
        return None
    import csv
    import sys
    from datetime import UTC, datetime

    from warehouse.filters.docpath import project
    from warehouse.output import OutputClosed
    from warehouse.query.status import STATUS_FIELDS, shown_status

    now = datetime.now(UTC)
    seen = (*RUN_TABLE_FIELDS, "metrics", "primary_metric", *STATUS_FIELDS)  # as views.runs
    plan = export(
        _run_query(filter, sort, most),
        RUN_TABLE_FIELDS,
        lambda doc: shown_status(project(doc, seen), now),
    )
    if plan is None:
        return None
    before(len(plan.rows))
    count = 0
    try:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(plan.columns)
        for rows in plan.chunks():
            writer.writerows(rows)
            count += len(rows)
        sys.stdout.flush()
    except BrokenPipeError as exc:
        raise OutputClosed from exc
    return count


def _json_documents(
    store: Any,
    filter: str | None,
    sort: Sequence[str],
    most: int | None,
    before: Callable[[int], None],
) -> int | None:
    """``runs --format json`` (whole documents) written as a store reads them, a chunk at a
    time (the local store: ``LocalStore.run_documents``); the rows written, or None when
    the store cannot (then views.runs reads them all first)."""
    read = getattr(store, "run_documents", None)
    if read is None:
        return None
    from datetime import UTC, datetime

    from warehouse.query.status import with_shown_status

    now = datetime.now(UTC)
    count, docs = read(_run_query(filter, sort, most))
    before(count)
    return render_rows((with_shown_status([doc], now)[0] for doc in docs), Format.json)


def _run_query(filter: str | None, sort: Sequence[str], most: int | None) -> RunQuery:
    """The ``RunQuery`` of ``query runs``' flags, ``status:lost`` spelled in stored fields."""
    from warehouse.query.lookup import parse_sort
    from warehouse.query.status import lost_aware
    from warehouse.stores.base import RunQuery

    return RunQuery(filter=lost_aware(filter), sort=tuple(map(parse_sort, sort)), limit=most)


def _primary_path(
    settings: Settings,
    docs: Sequence[Mapping[str, Any]],
    metric: str | None,
    direction: DirectionChoice | None,
) -> str:
    """The primary metric's column: the flag or setting in force, else the primary metric most
    of the shown runs were recorded with."""
    from collections import Counter

    from warehouse.models import resolve_metric

    name, _ = metric_in_force(settings, metric, direction)
    if not {"primary_metric", "direction"} & settings.model_fields_set:
        recorded = Counter(
            str((d.get("primary_metric") or {}).get("name"))
            for d in docs
            if (d.get("primary_metric") or {}).get("name")
        )
        name = recorded.most_common(1)[0][0] if recorded else name
    return resolve_metric(name).path


def _run_columns(docs: Sequence[Mapping[str, Any]], primary: str) -> list[str]:
    """The default table's columns, most wanted first: identity, the primary metric, the same
    metric in the other splits, the other metrics, the status, then the times."""
    metrics = _metric_columns(docs)
    name = primary.rsplit(".", 1)[-1]
    first = [primary] if primary in metrics else []
    same = [m for m in metrics if m.rsplit(".", 1)[-1] == name and m != primary]
    others = [m for m in metrics if m not in first and m not in same]
    return [
        "run_id",
        "experiment",
        *first,
        *same,
        *others,
        "status",
        "ended_at",
        "duration_s",
        "started_at",
    ]


def _metric_columns(docs: Sequence[Mapping[str, Any]], only: str | None = None) -> list[str]:
    """``metrics.<split>.<name>`` of the runs (only metric ``only``): by name, then split."""
    names = {
        f"metrics.{split}.{name}"
        for d in docs
        for split, values in (d.get("metrics") or {}).items()
        for name in values
        if only is None or name == only
    }
    split_rank = {"train": 0, "val": 1, "test": 2}
    return sorted(names, key=lambda n: (n.split(".")[2], split_rank.get(n.split(".")[1], 3), n))
