"""The ``warehouse query`` app, the flags every view shares, and how a view's answer ends:
the rows printed, then on stderr what it left out and why it is empty.

Every ``query`` command asks :mod:`warehouse.query.api` (the views' one front door) and only
parses flags and renders: :mod:`~warehouse.cli.query` (``runs``),
:mod:`~warehouse.cli.query_ranked`, :mod:`~warehouse.cli.query_samples` and
:mod:`~warehouse.cli.query_show` add their commands to :data:`query_app` from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from warehouse.output import Format, info, render

if TYPE_CHECKING:
    from warehouse.query.result import Empty
    from warehouse.settings import Settings


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


def load_settings(**cli: Any) -> Settings:
    from warehouse.settings import load

    return load(cli={k: (v.value if isinstance(v, StrEnum) else v) for k, v in cli.items()})


def limit_or(value: int | None, default: int | None) -> int | None:
    if value is None:
        return default
    return None if value == 0 else value


def finish(
    count: int,
    fail_empty: bool,
    what: str,
    empty: Empty | None = None,
    filter: str | None = None,
) -> None:
    """Say on stderr when nothing matched — and why (``empty``, found by the view with the
    store it used: the warehouse holds no run at all, or the filter looks mistyped); exit 1
    then if --fail-empty was given."""
    if count:
        return
    nothing = f"no {what}" + (f" (filter: {filter})" if filter else "")
    info(empty.message(nothing) if empty is not None else nothing)
    for line in empty.hint_lines() if empty is not None else []:
        info(line)
    if fail_empty:
        raise typer.Exit(1)


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
