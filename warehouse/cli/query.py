"""`warehouse query ...`: the question-answering commands over the configured store.

Each command parses its flags, loads the settings (unset flags stay None, so they never beat
the environment), opens the store, asks one view of :mod:`warehouse.query.views` and prints
the rows with :mod:`warehouse.output`: results on stdout, messages on stderr. Errors are
``WarehouseError``\\ s; ``warehouse.cli.main`` turns them into exit codes. Everything heavy
(settings, stores, rich) is imported inside the command bodies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from warehouse.docpath import flatten, get_path
from warehouse.output import RUN_ID_WIDTH, Format, info, render

if TYPE_CHECKING:
    from warehouse.settings import Settings
    from warehouse.stores.base import Store


class DirectionChoice(StrEnum):
    max = "max"
    min = "min"


class IntervalChoice(StrEnum):
    day = "day"
    week = "week"
    month = "month"


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


def _limit_opt(default_text: str) -> Any:
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


def register(app: typer.Typer) -> None:
    """Add the `query` command family to the main app."""
    app.add_typer(query_app, name="query")


# --- shared plumbing --------------------------------------------------------------------


def _settings(**cli: Any) -> Settings:
    from warehouse.settings import load

    return load(cli={k: (v.value if isinstance(v, StrEnum) else v) for k, v in cli.items()})


def _metric(
    settings: Settings, metric: str | None, direction: DirectionChoice | None
) -> tuple[str, str | None]:
    """The metric and direction in force: a --metric flag brings its own inferred direction."""
    if direction is not None:
        return settings.primary_metric, direction.value
    if metric is not None:
        return metric, None
    return settings.primary_metric, settings.direction


def _limit(value: int | None, default: int | None) -> int | None:
    if value is None:
        return default
    return None if value == 0 else value


def _finish(
    count: int,
    fail_empty: bool,
    what: str,
    settings: Settings | None = None,
    filter: str | None = None,
) -> None:
    """Say on stderr when nothing matched — and why, when the warehouse holds no run at all
    (a mistyped WAREHOUSE_HOME) or a filter was given; exit 1 then if --fail-empty was given."""
    if count:
        return
    message = f"no {what}" + (f" (filter: {filter})" if filter else "")
    if settings is not None and _holds_no_run(settings):
        from warehouse.report import describe_source

        message = (
            f"no runs recorded in {describe_source(settings)} yet — record one (warehouse demo, "
            "the Hydra callback, warehouse.start_run) or check WAREHOUSE_HOME / es_url"
        )
    info(message)
    if fail_empty:
        raise typer.Exit(1)


def _holds_no_run(settings: Settings) -> bool:
    from warehouse.stores import open_store
    from warehouse.stores.base import RunQuery

    with open_store(settings) as store:
        return not store.search_runs(RunQuery(limit=1, fields=("run_id",)))


def _render(
    rows: Iterable[Mapping[str, Any]],
    fmt: Format,
    columns: Sequence[str] | None = None,
    title: str | None = None,
    empty: Sequence[str] | None = None,
) -> int:
    """``empty``: the view's columns, the CSV header when nothing matched."""
    return render(rows, fmt, columns=columns, title=title, empty_header=empty)


def _writable_folder(path: Path, option: str) -> None:
    """Create ``path`` now, so a bad folder is said before any query runs or prints."""
    from warehouse.errors import ConfigurationError

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"{option} {path}: cannot create the folder ({exc.strerror or exc}); choose another"
        ) from exc


def _short(run_id: Any) -> str:
    return str(run_id)[:RUN_ID_WIDTH]


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
    limit: Annotated[int | None, _limit_opt("default 100")] = None,
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

    settings = _settings(primary_metric=metric, direction=direction)
    wanted = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    whole_docs = fmt is Format.json and wanted is None
    fields = None if whole_docs else (wanted or (*RUN_TABLE_FIELDS, "metrics"))
    most = _limit(limit, 100)
    with open_store(settings) as store:
        docs = views.runs(store, filter, sort or (), most, fields)
    if most is not None and len(docs) == most and limit is None:
        info(f"showing the first {most} runs; --limit N shows more (0 = all)")
    if whole_docs:
        count = _render(docs, fmt)
    else:
        if wanted:
            cols = wanted
            blank = [c for c in cols if docs and all(get_path(d, c) is None for d in docs)]
            if blank:
                info(
                    f"no run shown has a value for {', '.join(blank)}; check the name "
                    "(`warehouse query runs -n 1 --format json` shows a whole run)"
                )
        elif fmt is Format.table:  # the metric in force, in every split: fits a terminal
            name, _ = _metric(settings, metric, direction)
            from warehouse.models import resolve_metric

            primary = resolve_metric(name).name
            cols = [
                *RUN_TABLE_FIELDS[:3],
                "ended_at",
                "duration_s",
                *_metric_columns(docs, primary),
            ]
        else:
            cols = [*RUN_TABLE_FIELDS, *_metric_columns(docs)]
        rows = ({c: get_path(d, c) for c in cols} for d in docs)
        count = _render(rows, fmt, columns=cols)
    _finish(count, fail_empty, "runs match", settings, filter)


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


# --- best, leaderboard, over-time, decomposition ----------------------------------------


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
    **settings_flags: Any,
) -> None:
    """A view ranked by a metric: settings with the flags, ``ask(store, settings, metric,
    direction)`` for the rows, then the table (``title`` may name ``{name}``) or JSON/CSV."""
    from warehouse.errors import QuerySyntaxError
    from warehouse.models import resolve_metric
    from warehouse.query.coverage import default_metric, left_out
    from warehouse.stores import open_store

    settings = _settings(primary_metric=metric, direction=direction, **settings_flags)
    name, way = _metric(settings, metric, direction)
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
    rendered = _render(rows, fmt, title=shown, empty=empty)
    if missing:
        info(missing)
    _finish(rendered, fail_empty, f"{what} {name}", settings, filter)


@query_app.command()
def best(
    filter: FilterOpt = None,
    per_experiment: Annotated[
        bool, typer.Option("--per-experiment", "-e", help="The best run of every experiment.")
    ] = False,
    limit: Annotated[int | None, _limit_opt("default 1; all experiments with -e")] = None,
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
            store, name, way, filter, per_experiment, _limit(limit, default)
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
    limit: Annotated[int | None, _limit_opt("default: every experiment")] = None,
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
            return leaderboard_by_group(store, m, filter=filter, limit=_limit(limit, None))
        return views.leaderboard(store, name, way, filter, _limit(limit, None), evidence=True)

    _ranked_view(
        ask,
        metric,
        direction,
        filter,
        fmt,
        fail_empty,
        empty=_by_group_columns() if by_group else views.LEADERBOARD_EVIDENCE_COLUMNS,
        title="best {name}",
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
    limit: Annotated[int | None, _limit_opt("the latest points; default all")] = None,
    fmt: FormatOpt = Format.table,
    fail_empty: FailEmptyOpt = False,
    metric: MetricOpt = None,
    direction: DirectionOpt = None,
) -> None:
    """The best score so far by run end time: the running best, and the run that set it.

    Example: warehouse query over-time --metric val.acc --interval week
    """
    from warehouse.query import views

    period: Any = interval.value if interval is not None else None
    _ranked_view(
        lambda store, _, name, way: views.over_time(
            store, name, way, filter, period, _limit(limit, None)
        ),
        metric,
        direction,
        filter,
        fmt,
        fail_empty,
        empty=views.OVER_TIME_COLUMNS if period is None else views.OVER_TIME_PERIOD_COLUMNS,
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
    limit: Annotated[int | None, _limit_opt("default: every experiment")] = None,
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
            store, name, way, filter, settings.baseline_error, _limit(limit, None)
        ),
        metric,
        direction,
        filter,
        fmt,
        fail_empty,
        empty=views.DECOMPOSITION_COLUMNS,
        baseline_error=baseline_error,
    )


# --- samples ----------------------------------------------------------------------------


@query_app.command()
def samples(
    run: Annotated[
        str | None,
        typer.Option("--run", "-r", help="The run's id (or a unique prefix).", show_default=False),
    ] = None,
    best: Annotated[
        bool,
        typer.Option("--best", help="The best run by --metric (within --filter/--experiment)."),
    ] = False,
    hardest: Annotated[
        bool,
        typer.Option(
            "--hardest",
            help="The samples most runs get wrong (of --experiment, or of the runs --filter "
            "selects), with how many runs saw each.",
        ),
    ] = False,
    experiment: Annotated[
        str | None,
        typer.Option(
            "--experiment",
            "-x",
            help="With --best: the best run of this experiment; with --hardest: its runs.",
            show_default=False,
        ),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option("--split", help="Only this split (train, val, test ...).", show_default=False),
    ] = None,
    sort: Annotated[
        str | None,
        typer.Option(
            "--sort",
            "-s",
            help="Sample column to sort by (pixel_acc, loss, confidence ...).",
            show_default=False,
        ),
    ] = None,
    ascending: Annotated[
        bool, typer.Option("--asc/--desc", help="Sort order: lowest first (--asc) or highest.")
    ] = True,
    where: Annotated[
        str | None,
        typer.Option(
            "--where",
            "-w",
            help="Lucene filter over sample columns, e.g. 'correct:false'.",
            show_default=False,
        ),
    ] = None,
    download: Annotated[
        Path | None,
        typer.Option(
            "--download",
            "-d",
            help="Also save each listed sample's model output in this folder.",
            show_default=False,
            file_okay=False,
        ),
    ] = None,
    filter: FilterOpt = None,
    limit: Annotated[int | None, _limit_opt("default 100")] = None,
    fmt: FormatOpt = Format.table,
    fail_empty: FailEmptyOpt = False,
    metric: MetricOpt = None,
    direction: DirectionOpt = None,
) -> None:
    """Per-sample results of a run (--run) or of the best run (--best), with output URIs.

    Example — the 100 validation samples with the lowest pixel accuracy from the best run:
    warehouse query samples --best --split val --sort pixel_acc --asc --limit 100
    """
    from warehouse.query import views
    from warehouse.stores import open_store

    if hardest:
        _hardest(experiment, split, filter, _limit(limit, 100), fmt, fail_empty, metric)
        return
    if not best and run is None:
        raise typer.BadParameter(
            "give --run RUN_ID or --best (or --hardest: the samples most runs get wrong)",
            param_hint="--run/--best/--hardest",
        )
    if download is not None:
        _writable_folder(download, "--download")
    settings = _settings(primary_metric=metric, direction=direction)
    name, way = _metric(settings, metric, direction)
    with open_store(settings) as store:
        result = views.samples(
            store,
            run,
            best=best,
            metric=name,
            direction=way,
            filter=filter,
            experiment=experiment,
            split=split,
            sort=sort,
            order="asc" if ascending else "desc",
            limit=_limit(limit, 100),
            where=where,
        )
        chosen = result.run
        if best:
            from warehouse.models import resolve_metric

            path = resolve_metric(name, way).path
            score = views.finite(get_path(chosen, path))
            shown = "" if score is None else f", {name} = {score:.4g}"
            info(f"best run: {chosen.get('run_id')} ({chosen.get('experiment')}{shown})")
        rows: Iterable[dict[str, Any]] = result
        if download is not None:
            rows = list(result)
        columns = None
        if fmt is Format.table:  # the run is named on stderr; show what differs per row
            rows = list(rows)
            same = {"run_id", "experiment", "recorded_at", *(("split",) if split else ())}
            columns = [c for c in (rows[0] if rows else {}) if c not in same]
        from warehouse.models import SAMPLE_FIXED_COLUMNS

        count = _render(rows, fmt, columns=columns, empty=SAMPLE_FIXED_COLUMNS)
    if download is not None and count:
        from warehouse.objects.download import download_outputs

        written = download_outputs(rows, download, settings)
        info(f"saved {len(written)} outputs in {download}")
    _finish(count, fail_empty, "samples match")


def _hardest(
    experiment: str | None,
    split: str | None,
    filter: str | None,
    limit: int | None,
    fmt: Format,
    fail_empty: bool,
    metric: str | None,
) -> None:
    from warehouse.models import resolve_metric
    from warehouse.query.slices import HARDEST_COLUMNS, hardest
    from warehouse.stores import open_store

    settings = _settings(primary_metric=metric)
    m = resolve_metric(settings.primary_metric, None if metric else settings.direction)
    with open_store(settings) as store:
        rows = hardest(
            store, m, experiment=experiment, split=split, filter=filter, limit=limit or 100
        )
    count = _render(rows, fmt, columns=list(HARDEST_COLUMNS), empty=HARDEST_COLUMNS)
    _finish(count, fail_empty, "sample was got wrong by any run", settings, filter)


# --- one run, runs side by side, steps --------------------------------------------------


@query_app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run's id (or a unique prefix).")],
    fmt: FormatOpt = Format.table,
) -> None:
    """One run in full: identity, status, git, metrics, decomposition, artifacts, config (YAML).

    Example: warehouse query show 3f2a9c1d0b7e
    """
    from warehouse.query import views
    from warehouse.stores import open_store

    settings = _settings()
    with open_store(settings) as store:
        doc = views.show(store, run_id)
    if fmt is Format.json:
        _render([doc], fmt)
    elif fmt is Format.csv:
        flat = flatten(doc)
        _render(({"field": k, "value": v} for k, v in flat.items()), fmt)
    else:
        _show_table(doc)


def _show_table(doc: Mapping[str, Any]) -> None:
    import sys

    import yaml

    from warehouse.output import write_mapping, write_table, write_text

    out = sys.stdout
    identity = {
        k: doc.get(k)
        for k in (
            "run_id",
            "experiment",
            "project",
            "status",
            "tags",
            "user",
            "host",
            "started_at",
            "ended_at",
            "duration_s",
            "schema_version",
        )
        if doc.get(k) not in (None, [], "")
    }
    primary = doc.get("primary_metric") or {}
    if primary:
        identity["primary_metric"] = f"{primary.get('name')} ({primary.get('direction')})"
        identity["score"] = primary.get("value")
    error = doc.get("error") or {}
    sections: dict[str, Mapping[str, Any]] = {
        "run": identity,
        "error": {k: v for k, v in error.items() if k != "traceback" and v},
        "git": {k: v for k, v in (doc.get("git") or {}).items() if v not in (None, "")},
        "decomposition": {
            k: v for k, v in (doc.get("decomposition") or {}).items() if v is not None
        },
        "sample counts": dict(doc.get("sample_counts") or {}),
    }
    write_mapping({"run": sections.pop("run")}, out)
    metrics = doc.get("metrics") or {}
    if metrics:
        splits = list(metrics)
        names = sorted({n for values in metrics.values() for n in values})
        rows = [{"metric": n, **{s: metrics[s].get(n) for s in splits}} for n in names]
        write_table(rows, out, columns=["metric", *splits], title="metrics")
    if doc.get("invalid_metrics"):
        write_mapping({"invalid metrics": {"dropped": ", ".join(doc["invalid_metrics"])}}, out)
    write_mapping(sections, out)
    artifacts = doc.get("artifacts") or []
    if artifacts:
        cols = ["name", "kind", "size_bytes", "uri"]
        write_table(artifacts, out, columns=cols, title="artifacts")
    if doc.get("overrides"):
        write_text(" ".join(doc["overrides"]), out, title="overrides")
    if doc.get("config"):
        text = yaml.safe_dump(doc["config"], sort_keys=False, allow_unicode=True)
        write_text(text, out, title="config")


@query_app.command()
def compare(
    run_ids: Annotated[list[str], typer.Argument(help="Two or more run ids (or unique prefixes).")],
    fmt: FormatOpt = Format.table,
) -> None:
    """Runs side by side: identity, every metric, and only the config keys that differ.

    Example: warehouse query compare 3f2a9c1d0b7e 8d41c07a2f90
    """
    from warehouse.query import views
    from warehouse.stores import open_store

    settings = _settings()
    with open_store(settings) as store:
        rows = views.compare(store, run_ids)
    if fmt is Format.table:
        rows = [{k if k == "field" else _short(k): v for k, v in row.items()} for row in rows]
    _render(rows, fmt)


@query_app.command()
def steps(
    run_id: Annotated[str, typer.Argument(help="The run's id (or a unique prefix).")],
    limit: Annotated[int | None, _limit_opt("default all")] = None,
    fmt: FormatOpt = Format.table,
    fail_empty: FailEmptyOpt = False,
) -> None:
    """A run's training steps and system metrics, one row per step (in seq order).

    Example: warehouse query steps 3f2a9c1d0b7e --format csv > steps.csv
    """
    from warehouse.query import views
    from warehouse.stores import open_store

    settings = _settings()
    with open_store(settings) as store:
        rows: Iterator[dict[str, Any]] = views.steps(store, run_id, _limit(limit, None))
        from warehouse.live.table import POSITION_COLUMNS

        count = _render(rows, fmt, empty=POSITION_COLUMNS)
    _finish(count, fail_empty, "steps recorded for this run")
