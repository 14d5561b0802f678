"""`warehouse query diff` (what changed between two runs, sample by sample) and
`warehouse check` (the regression gate for CI pipelines).

Both read per-sample results through :mod:`warehouse.query.evidence`; results go to stdout,
the summary and messages to stderr. ``check`` exits 0 when the run is not significantly worse
than its reference, 1 when it is, 6 when no test was possible (inconclusive), 2 on bad usage,
4 when a run is not found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from warehouse.output import Format, info, render

SplitOpt = Annotated[
    str | None,
    typer.Option("--split", help="The split to compare (default: the metric's split, val)."),
]
ColumnOpt = Annotated[
    str | None,
    typer.Option(
        "--column",
        "-c",
        help="The per-sample column to compare, or how the metric is computed from its "
        "samples: 'sum(matches)/sum(length)', '100*mean(correct)' (default: what the run "
        "declared, else the column the metric is the mean of, e.g. correct for val.acc).",
        show_default=False,
    ),
]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        help="A sample column whose equal values are not independent (a passage, a "
        "conversation): each cluster counts as one unit (default: the one the run declared).",
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
    from warehouse.cli.query_flags import query_app

    query_app.command("diff")(diff)
    query_app.command("slices")(slices)
    query_app.command("replicates")(replicates)
    app.command("check")(check)


def diff(
    run_a: Annotated[str, typer.Argument(help="A run id or prefix, best, or best:EXPERIMENT.")],
    run_b: Annotated[str, typer.Argument(help="The run to compare it with (same forms).")],
    split: SplitOpt = None,
    column: ColumnOpt = None,
    metric: MetricOpt = None,
    cluster: ClusterOpt = None,
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
    outputs; a summary line gives the counts and the paired difference (b - a) with its
    interval, p-value and the smallest difference the samples detect (80 % power).

    Example: warehouse query diff best best:digits-knn --download flips/
    """
    from warehouse.query import api
    from warehouse.settings import load

    settings = load()
    found = api.diff(
        run_a, run_b, split=split, column=column, metric=metric, cluster=cluster, settings=settings
    )
    a, b = found.a, found.b
    info(f"a = {a['run_id']} ({a.get('experiment')}), b = {b['run_id']} ({b.get('experiment')})")
    render(found.rows, fmt, columns=list(found.columns), empty_header=found.columns)
    info(found.summary or "")
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
    cluster: ClusterOpt = None,
    slice_by: Annotated[
        str | None,
        typer.Option(
            "--slice",
            help="Also fail when any slice of this sample column (label, or size:bins=5) is "
            "significantly worse than the reference's same slice (Holm-corrected).",
            show_default=False,
        ),
    ] = None,
    min_n: Annotated[
        int, typer.Option("--min-n", help="With --slice: judge slices of this many samples.", min=1)
    ] = 30,
    seeds: Annotated[
        bool,
        typer.Option(
            "--seeds/--no-seeds",
            help="Where the reference's setup has several seeds, judge the setup across seeds "
            "(default); --no-seeds judges the two runs on their samples only.",
        ),
    ] = True,
) -> None:
    """The regression gate: exit 1 when RUN is significantly worse than the reference, else
    0; 6 when no test was possible (no per-sample results, or samples that do not describe
    the logged scores). Where the reference's setup was run with several seeds, the setups
    are compared across seeds; else the runs on their samples (paired on shared samples,
    unpaired otherwise). A `best` reference is the best of K runs: the test is corrected for
    that. With --slice, a slice that got significantly worse fails it too.

    Example: warehouse check $RUN_ID --against best:resnet --metric val.acc --margin 0.005
    """
    from warehouse.query import api

    verdict = api.check(
        run,
        against=against,
        metric=metric,
        split=split,
        column=column,
        margin=margin,
        slice_by=slice_by,
        min_n=min_n,
        cluster=cluster,
        seeds=seeds,
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
    the run's score over all its samples, labelled or not), the worst slices first.

    Example: warehouse query slices --by label --min-n 30
    """
    from warehouse.query import api

    found = api.slices(
        by, metric=metric, column=column, split=split, runs=runs or (), min_n=min_n, filter=filter
    )
    name = found.columns[2]  # the slice column, as --by names it
    render(
        found.rows,
        fmt,
        columns=list(found.columns),
        empty_header=found.columns,
        primary="mean",
        keep=(name, "n"),
    )
    if not found.rows:
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
    """Seeds: runs whose configs differ only in seed keys, grouped — distinct seeds and runs,
    mean, spread, interval, best and worst run, whether the best seed is a lucky one (left out,
    beyond the others' prediction bound), and how many samples flip across seeds.

    Example: warehouse query replicates --experiment digits-svm
    """
    from warehouse.query import api

    found = api.replicates(metric=metric, experiment=experiment, filter=filter)
    rows = found.rows
    render(
        rows,
        fmt,
        columns=list(found.columns),
        empty_header=found.columns,
        primary="mean",
        keep=("experiment", "n_seeds", "std"),
    )
    lucky = sorted({str(r["experiment"]) for r in rows if r["lucky_seed"]})
    if lucky:
        info(
            f"lucky seed: {', '.join(lucky)} (the best seed lies beyond what the other seeds "
            "predict: t prediction bound at 1 - 0.05/n)"
        )
    few = sorted({str(r["experiment"]) for r in rows if r["lucky_seed"] is None})
    if few:
        info(
            "no seed can be called lucky (fewer than 3 seeds, or the other seeds' scores all "
            f"equal): {', '.join(few)}"
        )
