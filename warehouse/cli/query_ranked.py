"""`warehouse query best | leaderboard | over-time | decomposition`: the views ranked by a
metric, each of which says on stderr which runs it left out for lacking the metric.

The views come from :mod:`warehouse.query.api` (metric in force, what was left out, why an
answer is empty, all from one store opening); this module parses flags and renders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from warehouse.cli.query_flags import (
    DirectionChoice,
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
from warehouse.output import Format, info

if TYPE_CHECKING:
    from warehouse.query.result import Result
    from warehouse.settings import Settings


class IntervalChoice(StrEnum):
    day = "day"
    week = "week"
    month = "month"


SAME = "≈"
"""Marks a leaderboard row whose lead over the next row is not significant."""


def _marked(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows with a ``≈`` column when some lead is not significant, and the caption lines
    (:func:`warehouse.query.api.leaderboard_marks`)."""
    from warehouse.query import api

    return api.leaderboard_marks(rows)


def _ranked_view(
    ask: Callable[[Settings], Result],
    metric: str | None,
    direction: DirectionChoice | None,
    filter: str | None,
    fmt: Format,
    fail_empty: bool,
    *,
    what: str = "run has a value of",
    title: str | None = None,
    keep: Sequence[str] | Callable[[Sequence[str]], Sequence[str]] = (),
    primary: str | None = None,
    **settings_flags: Any,
) -> None:
    """A view ranked by a metric: settings with the flags, ``ask(settings)`` for the view's
    :class:`~warehouse.query.result.Result`, then the table (``title`` may name ``{name}``;
    ``keep``: the columns a narrow terminal keeps first after the run id and ``primary``, the
    score column, or what picks them from the view's columns, see
    :func:`warehouse.output.write_table`) or JSON/CSV, and on stderr what it left out."""
    settings = load_settings(primary_metric=metric, direction=direction, **settings_flags)
    result = ask(settings)
    name = result.metric or settings.primary_metric
    shown = title.format(name=name) if title else None
    rows, notes = result.rows, list[str]()
    if fmt is Format.table:
        rows, notes = _marked(rows)
    kept = keep(result.columns) if callable(keep) else keep
    rendered = render_rows(
        rows, fmt, title=shown, empty=result.columns, keep=kept, notes=notes, primary=primary
    )
    if result.left_out:
        info(result.left_out)
    finish(rendered, fail_empty, f"{what} {name}", result.empty, filter)


@query_app.command()
def best(
    filter: FilterOpt = None,
    per_experiment: Annotated[
        bool, typer.Option("--per-experiment", "-e", help="The best run of every experiment.")
    ] = False,
    limit: Annotated[int | None, limit_opt("default 1; all experiments with -e")] = None,
    fmt: FormatOpt = Format.table,
    fail_empty: FailEmptyOpt = False,
    metric: MetricOpt = None,
    direction: DirectionOpt = None,
) -> None:
    """The best run by the primary metric (or --metric), globally or per experiment.

    Example: warehouse query best --metric val.acc -q 'NOT tags:debug' --per-experiment
    """
    from warehouse.query import api

    default = None if per_experiment else 1
    _ranked_view(
        lambda settings: api.best(
            metric,
            direction=_way(direction),
            filter=filter,
            per_experiment=per_experiment,
            limit=limit_or(limit, default),
            settings=settings,
        ),
        metric,
        direction,
        filter,
        fmt,
        fail_empty,
    )


@query_app.command()
def leaderboard(
    filter: FilterOpt = None,
    limit: Annotated[int | None, limit_opt("default: every experiment")] = None,
    by_group: Annotated[
        bool,
        typer.Option(
            "--by-group",
            help="Rank by each experiment's best replicate group's mean (runs differing only "
            "in seeds), not its best single run.",
        ),
    ] = False,
    fmt: FormatOpt = Format.table,
    fail_empty: FailEmptyOpt = False,
    metric: MetricOpt = None,
    direction: DirectionOpt = None,
) -> None:
    """Experiments ranked: each one's best score, its run and its number of runs, with
    each best run's interval and its comparison with the next row (vs_next_diff: the next
    row's score minus this row's; vs_next_mde: the smallest gap the test detects).

    Example: warehouse query leaderboard --metric val.acc -q 'ended_at:>=2024-05-01'
    """
    from warehouse.query import api

    _ranked_view(
        lambda settings: api.leaderboard(
            metric,
            direction=_way(direction),
            filter=filter,
            limit=limit_or(limit, None),
            by_group=by_group,
            settings=settings,
        ),
        metric,
        direction,
        filter,
        fmt,
        fail_empty,
        title="best {name}",
        keep=("rank", "experiment", "best_score", SAME),
        primary="mean" if by_group else "best_score",
    )


def _way(direction: DirectionChoice | None) -> str | None:
    return None if direction is None else direction.value


@query_app.command("over-time")
def over_time(
    filter: FilterOpt = None,
    interval: Annotated[
        IntervalChoice | None,
        typer.Option(
            "--interval",
            "-i",
            help="One point per day, week or month instead of per run.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[int | None, limit_opt("the latest points; default all")] = None,
    by_group: Annotated[
        bool,
        typer.Option(
            "--by-group",
            help="The running best of replicate-group means (runs differing only in seeds), "
            "one point per group when its last seed ended: no lucky seed sets a record.",
        ),
    ] = False,
    every_run: Annotated[
        bool,
        typer.Option(
            "--every-run", help="One point per run, not only the runs that set a new best."
        ),
    ] = False,
    fmt: FormatOpt = Format.table,
    fail_empty: FailEmptyOpt = False,
    metric: MetricOpt = None,
    direction: DirectionOpt = None,
) -> None:
    """The best score so far by run end time: the runs that set a new best (each found by
    one question, so the cost follows the records, not the runs); --every-run lists every
    run with the best so far; --interval one point per day, week or month.

    Example: warehouse query over-time --metric val.acc --interval week
    """
    from warehouse.query import api

    period: Any = interval.value if interval is not None else None
    _ranked_view(
        lambda settings: api.over_time(
            metric,
            direction=_way(direction),
            filter=filter,
            interval=period,
            limit=limit_or(limit, None),
            every_run=every_run,
            by_group=by_group,
            settings=settings,
        ),
        metric,
        direction,
        filter,
        fmt,
        fail_empty,
        # the question is the running best: when, how good, and the run (group) that set it
        keep=("ended_at", "best_so_far", "experiment", "mean", "is_new_best")
        if by_group
        else (
            ("period" if period else "ended_at"),
            "best_so_far",
            "run_id",
            "experiment",
            "score",
            "is_new_best",
        ),
        primary="best_so_far",
        what="ended run has a value of",
    )


@query_app.command()
def decomposition(
    filter: FilterOpt = None,
    baseline_error: Annotated[
        float | None,
        typer.Option(
            "--baseline-error",
            "-b",
            help="Human/Bayes-level error (default: the baseline_error setting, 0).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[int | None, limit_opt("default: every experiment")] = None,
    fmt: FormatOpt = Format.table,
    fail_empty: FailEmptyOpt = False,
    metric: MetricOpt = None,
    direction: DirectionOpt = None,
) -> None:
    """Bias/variance of each experiment's best run: avoidable bias, variance, dev overfit.

    Error is 1 - score for a higher-is-better metric (else the value), in the train, val and
    test splits: avoidable_bias = train - baseline, variance = val - train,
    dev_overfit = test - val.

    Example: warehouse query decomposition --metric val.acc --baseline-error 0.02
    """
    from warehouse.query import api

    _ranked_view(
        lambda settings: api.decomposition(
            metric,
            direction=_way(direction),
            filter=filter,
            limit=limit_or(limit, None),
            settings=settings,
        ),
        metric,
        direction,
        filter,
        fmt,
        fail_empty,
        # the question is bias/variance per experiment: after its run and score, the
        # decomposition, then the errors it is made of (experiment, run_id, score, errors ...)
        keep=lambda columns: (
            "experiment",
            "avoidable_bias",
            "variance",
            "dev_overfit",
            *columns[3:],
        ),
        primary="score",
        baseline_error=baseline_error,
    )
