"""`warehouse query best | leaderboard | over-time | decomposition`: the views ranked by a
metric, each of which says on stderr which runs it left out for lacking the metric.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from warehouse.cli.query import (
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
    metric_in_force,
    query_app,
    render_rows,
)
from warehouse.output import Format, info

if TYPE_CHECKING:
    from warehouse.settings import Settings
    from warehouse.stores.base import Store


class IntervalChoice(StrEnum):
    day = "day"
    week = "week"
    month = "month"


SAME = "≈"
"""Marks a leaderboard row whose lead over the next row is not significant."""


def _marked(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows with a ``≈`` column after the score when some row's gap to the next row is not
    significant (``vs_next_p >= 0.05``), and the caption line that says what it means."""
    if not any(isinstance(r.get("vs_next_p"), float) and r["vs_next_p"] >= 0.05 for r in rows):
        return rows, []
    marked = []
    for row in rows:
        p = row.get("vs_next_p")
        mark = SAME if isinstance(p, float) and p >= 0.05 else ""
        items = list(row.items())
        at = next((i + 1 for i, (k, _) in enumerate(items) if k == "best_score"), len(items))
        marked.append(dict([*items[:at], (SAME, mark), *items[at:]]))
    note = (
        f"{SAME}: not significantly better than the next row (paired test on the samples both "
        "runs have, vs_next_p ≥ 0.05): the ranking may be luck"
    )
    return marked, [note]


def _ranked_view(
    ask: Callable[[Store, Settings, str, str | None], list[dict[str, Any]]],
    metric: str | None,
    direction: DirectionChoice | None,
    filter: str | None,
    fmt: Format,
    fail_empty: bool,
    *,
    empty: Sequence[str],
    what: str = "run has a value of",
    title: str | None = None,
    keep: Sequence[str] = (),
    primary: str | None = None,
    **settings_flags: Any,
) -> None:
    """A view ranked by a metric: settings with the flags, ``ask(store, settings, metric,
    direction)`` for the rows, then the table (``title`` may name ``{name}``; ``keep``: the
    columns a narrow terminal keeps first after the run id and ``primary``, the score column,
    see :func:`warehouse.output.write_table`) or JSON/CSV."""
    from warehouse.errors import QuerySyntaxError
    from warehouse.models import resolve_metric
    from warehouse.query.coverage import default_metric, left_out
    from warehouse.stores import open_store

    settings = load_settings(primary_metric=metric, direction=direction, **settings_flags)
    name, way = metric_in_force(settings, metric, direction)
    with open_store(settings) as store:
        if not {"primary_metric", "direction"} & settings.model_fields_set:
            # no metric asked for: the one the matching runs were recorded with
            name, way = default_metric(store, filter, name), None
        chosen = resolve_metric(name, way)
        try:
            rows = ask(store, settings, name, way)
        except QuerySyntaxError as exc:  # no run has the metric: say which ones they have
            hint = left_out(store, chosen, filter).message()
            if getattr(exc, "field", None) != chosen.path or not hint:
                raise
            raise QuerySyntaxError(
                f"no run has {chosen.label}: {hint}", field=chosen.path
            ) from None
        missing = left_out(store, chosen, filter).message()
    shown = title.format(name=name) if title else None
    notes: list[str] = []
    if fmt is Format.table:
        rows, notes = _marked(rows)
    rendered = render_rows(
        rows, fmt, title=shown, empty=empty, keep=keep, notes=notes, primary=primary
    )
    if missing:
        info(missing)
    finish(rendered, fail_empty, f"{what} {name}", settings, filter)


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
    from warehouse.query import views

    default = None if per_experiment else 1
    _ranked_view(
        lambda store, _, name, way: views.best(
            store, name, way, filter, per_experiment, limit_or(limit, default)
        ),
        metric,
        direction,
        filter,
        fmt,
        fail_empty,
        empty=views.BEST_PER_EXPERIMENT_COLUMNS if per_experiment else views.BEST_COLUMNS,
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
    """Experiments ranked: each one's best score, its run and its number of runs.

    Example: warehouse query leaderboard --metric val.acc -q 'ended_at:>=2024-05-01'
    """
    from warehouse.query import views

    def ask(store: Store, _: Settings, name: str, way: str | None) -> list[dict[str, Any]]:
        if by_group:
            from warehouse.models import resolve_metric
            from warehouse.query.replicates import leaderboard_by_group

            m = resolve_metric(name, way)
            return leaderboard_by_group(store, m, filter=filter, limit=limit_or(limit, None))
        return views.leaderboard(store, name, way, filter, limit_or(limit, None), evidence=True)

    _ranked_view(
        ask,
        metric,
        direction,
        filter,
        fmt,
        fail_empty,
        empty=_by_group_columns() if by_group else views.LEADERBOARD_EVIDENCE_COLUMNS,
        title="best {name}",
        keep=("rank", "experiment", "best_score", SAME),
        primary="mean" if by_group else "best_score",
    )


def _by_group_columns() -> tuple[str, ...]:
    from warehouse.query.replicates import BY_GROUP_COLUMNS

    return BY_GROUP_COLUMNS


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
    from warehouse.query import views

    period: Any = interval.value if interval is not None else None
    if by_group and period is not None:
        from warehouse.errors import ConfigurationError

        raise ConfigurationError("--by-group gives one point per group; leave out --interval")

    def ask(store: Store, _: Settings, name: str, way: str | None) -> list[dict[str, Any]]:
        if by_group:
            from warehouse.models import resolve_metric
            from warehouse.query.replicates import over_time_by_group

            m = resolve_metric(name, way)
            return over_time_by_group(store, m, filter=filter, limit=limit_or(limit, None))
        return views.over_time(
            store, name, way, filter, period, limit_or(limit, None), every_run=every_run
        )

    if by_group:
        from warehouse.query.replicates import OVER_TIME_BY_GROUP_COLUMNS

        _ranked_view(
            ask,
            metric,
            direction,
            filter,
            fmt,
            fail_empty,
            empty=OVER_TIME_BY_GROUP_COLUMNS,
            keep=("ended_at", "best_so_far", "experiment", "mean", "is_new_best"),
            primary="best_so_far",
            what="ended run has a value of",
        )
        return
    _ranked_view(
        ask,
        metric,
        direction,
        filter,
        fmt,
        fail_empty,
        empty=views.OVER_TIME_COLUMNS if period is None else views.OVER_TIME_PERIOD_COLUMNS,
        # the question is the running best: when, how good, and the run that set it
        keep=(
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
    from warehouse.query import views

    _ranked_view(
        lambda store, settings, name, way: views.decomposition(
            store, name, way, filter, settings.baseline_error, limit_or(limit, None)
        ),
        metric,
        direction,
        filter,
        fmt,
        fail_empty,
        empty=views.DECOMPOSITION_COLUMNS,
        # the question is bias/variance per experiment: after its run and score, the
        # decomposition, then the errors it is made of
        keep=("experiment", "avoidable_bias", "variance", "dev_overfit", *views.DECOMPOSITION_KEYS),
        baseline_error=baseline_error,
    )
