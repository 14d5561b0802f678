"""`warehouse query ...`: the question-answering commands over the configured store.

Each command parses its flags, loads the settings (unset flags stay None, so they never beat
the environment), asks one view of :mod:`warehouse.query.api` — the views' one front door,
which opens the store once, picks the metric and says why an answer is empty — and prints the
rows with :mod:`warehouse.output`: results on stdout, messages on stderr. Errors are
``WarehouseError``\\ s; ``warehouse.cli.main`` turns them into exit codes. Everything heavy
(settings, stores, rich) is imported inside the command bodies.

This module holds ``runs`` and adds the other views' commands to the ``query`` app
(:mod:`~warehouse.cli.query_flags`, with the flags they share):
:mod:`~warehouse.cli.query_ranked` the views ranked by a metric,
:mod:`~warehouse.cli.query_samples` the per-sample views and :mod:`~warehouse.cli.query_show`
the views of given runs (``show``, ``compare``, ``steps``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from warehouse.cli.query_flags import (
    DirectionOpt,
    FailEmptyOpt,
    FilterOpt,
    FormatOpt,
    MetricOpt,
    finish,
    limit_opt,
    limit_or,
    load_settings,
    query_app,
    render_rows,
)
from warehouse.filters.docpath import get_path
from warehouse.output import Format, info

if TYPE_CHECKING:
    from warehouse.settings import Settings
    from warehouse.stores.local_export import CsvRows


def register(app: typer.Typer) -> None:
    """Add the `query` command family to the main app: ``runs`` here, then the ranked views,
    the samples and the one-run views, each module adding its commands when imported."""
    from warehouse.cli import query_ranked, query_samples, query_show  # noqa: F401

    app.add_typer(query_app, name="query")


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
    from warehouse.query import api

    settings = load_settings(primary_metric=metric, direction=direction)
    wanted = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    whole_docs = fmt is Format.json and wanted is None
    csv_default = fmt is Format.csv and wanted is None
    fields = None if whole_docs else (wanted or (*RUN_TABLE_FIELDS, "metrics", "primary_metric"))
    most = limit_or(limit, 100)
    order = sort or ()

    def say_if_cut(shown: int) -> None:
        if most is not None and shown == most and limit is None:
            info(f"showing the first {most} runs; --limit N shows more (0 = all)")

    streamed: int | None = None
    docs: list[dict[str, Any]] = []
    with api.connect(settings) as store:  # the one store opening, for the rows and why none
        if csv_default:
            plan = api.run_csv(filter, sort=order, limit=most, first=RUN_TABLE_FIELDS, store=store)
            streamed = None if plan is None else _write_csv(plan, say_if_cut)
        elif whole_docs:
            found = api.run_stream(filter, sort=order, limit=most, store=store)
            if found is not None:
                say_if_cut(found[0])
                streamed = render_rows(found[1], Format.json)
        if streamed is None:
            result = api.runs(
                filter, sort=order, limit=most, columns=fields, store=store, settings=settings
            )
            docs, empty = result.rows, result.empty
        else:
            empty = None if streamed else api.why_empty(filter, store=store, settings=settings)
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
            primary = _primary_path(settings, docs)
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
    finish(count, fail_empty, "runs match", empty, filter)


def _write_csv(plan: CsvRows, before: Callable[[int], None]) -> int:
    """The default CSV of ``runs`` written from the store's columns, a chunk of runs at a
    time (:func:`warehouse.query.api.run_csv`); the rows written."""
    import csv
    import sys

    from warehouse.output import OutputClosed

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


def _primary_path(settings: Settings, docs: Sequence[Mapping[str, Any]]) -> str:
    """The primary metric's column: the flag or setting in force, else the primary metric most
    of the shown runs were recorded with."""
    from collections import Counter

    from warehouse.models import resolve_metric

    name = settings.primary_metric  # --metric's, when given
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
