"""`warehouse query diff` (what changed between two runs, sample by sample) and
`warehouse check` (the regression gate for CI pipelines).

Both read per-sample results through :mod:`warehouse.query.evidence`; results go to stdout,
the summary and messages to stderr. ``check`` exits 0 when the run is not significantly worse
than its reference, 1 when it is, 2 on bad usage, 4 when a run is not found.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from warehouse.output import Format, info, render

if TYPE_CHECKING:
    from warehouse.models import Metric
    from warehouse.settings import Settings

SplitOpt = Annotated[
    str | None,
    typer.Option("--split", help="The split to compare (default: the metric's split, val)."),
]
ColumnOpt = Annotated[
    str | None,
    typer.Option(
        "--column",
        "-c",
        help="The per-sample column to compare (default: the one the metric is the mean of, "
        "e.g. correct for val.acc).",
        show_default=False,
    ),
]
MetricOpt = Annotated[
    str | None,
    typer.Option(
        "--metric",
        "-m",
        help="split.metric the runs are compared on (default: the primary_metric setting).",
        show_default=False,
    ),
]


def register(app: typer.Typer) -> None:
    """Add `query diff/slices/replicates` to the query family and `check` to the main app."""
    from warehouse.cli.query import query_app

    query_app.command("diff")(diff)
    query_app.command("slices")(slices)
    query_app.command("replicates")(replicates)
    app.command("check")(check)


def _metric(settings: Settings, metric: str | None) -> Metric:
    from warehouse.models import resolve_metric

    return resolve_metric(metric or settings.primary_metric, None if metric else settings.direction)


def diff(
    run_a: Annotated[str, typer.Argument(help="A run id or prefix, best, or best:EXPERIMENT.")],
    run_b: Annotated[str, typer.Argument(help="The run to compare it with (same forms).")],
    split: SplitOpt = None,
    column: ColumnOpt = None,
    metric: MetricOpt = None,
    download: Annotated[
        Path | None,
        typer.Option(
            "--download",
            "-d",
            help="Save both runs' outputs of every changed sample here, side by side.",
            show_default=False,
            file_okay=False,
        ),
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="table, json or csv.", case_sensitive=False)
    ] = Format.table,
) -> None:
    """What changed between two runs, sample by sample: fixed, broke or changed, with both
    outputs; a summary line gives the counts and the paired difference with its interval and
    p-value.

    Example: warehouse query diff best best:digits-knn --download flips/
    """
    from warehouse.query import evidence
    from warehouse.settings import load
    from warehouse.stores import open_store

    settings = load()
    m = _metric(settings, metric)
    with open_store(settings) as store:
        a = evidence.resolve_run(store, run_a, m)
        b = evidence.resolve_run(store, run_b, m)
        found = evidence.diff(store, a, b, split=split or m.split, metric=m, column=column)
    info(f"a = {found.run_a} ({a.get('experiment')}), b = {found.run_b} ({b.get('experiment')})")
    render(found.rows, fmt, columns=list(evidence.DIFF_COLUMNS), empty_header=evidence.DIFF_COLUMNS)
    info(found.summary())
    if download is not None and found.rows:
        from warehouse.objects.download import download_outputs

        written = []
        for side in ("a", "b"):
            uri = f"{side}_output_uri"
            rows = [{"sample_id": r["sample_id"], "output_uri": r[uri]} for r in found.rows]
            written += download_outputs(rows, download / side, settings)
        info(f"saved {len(written)} outputs in {download}/a and {download}/b")


def check(
    run: Annotated[str, typer.Argument(help="The run to judge: an id or prefix, or best:EXP.")],
    against: Annotated[
        str,
        typer.Option(
            "--against",
            help="The reference: best, best:EXPERIMENT or a run id (default: best).",
        ),
    ] = "best",
    metric: MetricOpt = None,
    margin: Annotated[
        float,
        typer.Option(
            "--margin",
            help="Tolerated loss: fail only when worse by more than this (e.g. 0.005).",
            min=0.0,
        ),
    ] = 0.0,
    split: SplitOpt = None,
    column: ColumnOpt = None,
    slice_by: Annotated[
        str | None,
        typer.Option(
            "--slice",
            help="Also fail when any slice of this sample column (label, or size:bins=5) is "
            "significantly worse than the reference's same slice.",
            show_default=False,
        ),
    ] = None,
    min_n: Annotated[
        int, typer.Option("--min-n", help="With --slice: judge slices of this many samples.", min=1)
    ] = 30,
) -> None:
    """The regression gate: exit 1 when RUN is significantly worse than the reference on the
    samples both have (paired test), else 0. Without per-sample results the scores are
    compared and the line says no test was possible. With --slice, a slice that got
    significantly worse fails it too, even when the overall score hides it.

    Example: warehouse check $RUN_ID --against best:resnet --metric val.acc --margin 0.005
    """
    from warehouse.query import evidence
    from warehouse.settings import load
    from warehouse.stores import open_store

    settings = load()
    m = _metric(settings, metric)
    with open_store(settings) as store:
        judged = evidence.resolve_run(store, run, m)
        reference = evidence.resolve_run(store, against, m)
        verdict = evidence.check(
            store,
            judged,
            reference,
            metric=m,
            split=split,
            column=column,
            margin=margin,
            slice_by=slice_by,
            min_n=min_n,
        )
    typer.echo(verdict.line)
    raise typer.Exit(verdict.code)


def slices(
    by: Annotated[
        str,
        typer.Option(
            "--by",
            help="Sample column to slice by (label, source ...), or a numeric one cut into "
            "equal-width bins: size:bins=5.",
        ),
    ],
    runs: Annotated[
        list[str] | None,
        typer.Option(
            "--run",
            "-r",
            help="Slice this run (id, prefix, best, best:EXPERIMENT); repeatable. Default: "
            "each experiment's best run.",
            show_default=False,
        ),
    ] = None,
    split: SplitOpt = None,
    column: ColumnOpt = None,
    metric: MetricOpt = None,
    min_n: Annotated[int, typer.Option("--min-n", help="Hide slices with fewer samples.")] = 0,
    filter: Annotated[
        str | None,
        typer.Option("--filter", "-q", help="Lucene filter on the runs.", show_default=False),
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="table, json or csv.", case_sensitive=False)
    ] = Format.table,
) -> None:
    """Where a model fails: the metric per slice of the samples (n, mean, 95 % interval, gap to
    the run's overall score), the worst slices first.

    Example: warehouse query slices --by label --min-n 30
    """
    from warehouse.query.slices import SLICE_COLUMNS, parse_by
    from warehouse.query.slices import slices as slice_rows
    from warehouse.settings import load
    from warehouse.stores import open_store

    settings = load()
    m = _metric(settings, metric)
    name = parse_by(by)[0]
    columns = [c.replace("{by}", name) for c in SLICE_COLUMNS]
    with open_store(settings) as store:
        rows = slice_rows(
            store, m, by, column=column, split=split, runs=runs or (), filter=filter, min_n=min_n
        )
    render(rows, fmt, columns=columns, empty_header=columns, primary="mean", keep=(name, "n"))
    if not rows:
        info(f"no slices: no chosen run has per-sample results with a column {name!r}")


def replicates(
    experiment: Annotated[
        str | None,
        typer.Option("--experiment", "-x", help="Only this experiment.", show_default=False),
    ] = None,
    metric: MetricOpt = None,
    filter: Annotated[
        str | None,
        typer.Option("--filter", "-q", help="Lucene filter on the runs.", show_default=False),
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="table, json or csv.", case_sensitive=False)
    ] = Format.table,
) -> None:
    """Seeds: runs whose configs differ only in seed keys, grouped — mean, spread, interval,
    best and worst seed, whether the best is a lucky seed, and how many samples flip across
    seeds.

    Example: warehouse query replicates --experiment digits-svm
    """
    from warehouse.query.replicates import REPLICATE_COLUMNS
    from warehouse.query.replicates import replicates as replicate_rows
    from warehouse.settings import load
    from warehouse.stores import open_store

    settings = load()
    m = _metric(settings, metric)
    with open_store(settings) as store:
        rows = replicate_rows(store, m, experiment=experiment, filter=filter)
    render(
        rows,
        fmt,
        columns=list(REPLICATE_COLUMNS),
        empty_header=REPLICATE_COLUMNS,
        primary="mean",
        keep=("experiment", "n_seeds", "std"),
    )
    lucky = [r["experiment"] for r in rows if r["lucky_seed"]]
    if lucky:
        info(
            "lucky seed: "
            + ", ".join(sorted(set(lucky)))
            + " (fewer than 3 seeds, or the best seed is more than 2 std above its group)"
        )
