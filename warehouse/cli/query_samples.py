"""`warehouse query samples`: per-sample results of one run, of the best run, or the samples
most runs get wrong, from :mod:`warehouse.query.api` (one store opening, streamed).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

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
from warehouse.output import RUN_ID_WIDTH, Format, info


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
    limit: Annotated[int | None, limit_opt("default 100")] = None,
    fmt: FormatOpt = Format.table,
    fail_empty: FailEmptyOpt = False,
    metric: MetricOpt = None,
    direction: DirectionOpt = None,
) -> None:
    """Per-sample results of a run (--run) or of the best run (--best), with output URIs.

    Example — the 100 validation samples with the lowest pixel accuracy from the best run:
    warehouse query samples --best --split val --sort pixel_acc --asc --limit 100
    """
    from warehouse.models import SAMPLE_FIXED_COLUMNS
    from warehouse.query import api

    if hardest:
        _hardest(experiment, split, filter, limit_or(limit, 100), fmt, fail_empty, metric)
        return
    if not best and run is None:
        raise typer.BadParameter(
            "give --run RUN_ID or --best (or --hardest: the samples most runs get wrong)",
            param_hint="--run/--best/--hardest",
        )
    if download is not None:
        _writable_folder(download, "--download")
    settings = load_settings(primary_metric=metric, direction=direction)
    if best and run is not None:
        from warehouse.errors import ConfigurationError

        raise ConfigurationError("give either a run id (--run RUN_ID) or --best, not both")
    with api.connect(settings) as store:  # the one opening: the rows stream from it
        result = api.sample_rows(
            run,
            metric=metric,
            direction=None if direction is None else direction.value,
            filter=filter,
            experiment=experiment,
            split=split,
            sort=sort,
            order="asc" if ascending else "desc",
            limit=limit_or(limit, 100),
            where=where,
            store=store,
            settings=settings,
        )
        chosen = result.run
        if best:
            from warehouse.models import resolve_metric
            from warehouse.query.lookup import finite

            name = settings.primary_metric  # --metric's, when given
            score = finite(get_path(chosen, resolve_metric(name).path))
            shown = "" if score is None else f", {name} = {score:.4g}"
            short = str(chosen.get("run_id"))[:RUN_ID_WIDTH]
            info(f"best run: {short} ({chosen.get('experiment')}{shown})")
        batches = api.sample_batches(result, store=store) if download is None else None
        if fmt is Format.csv and batches is not None:
            # every row in stored order: Arrow batches straight to CSV, flat in memory
            import sys

            from warehouse.history.streaming import write_csv_batches

            count = write_csv_batches(batches, sys.stdout, empty_header=SAMPLE_FIXED_COLUMNS)
            finish(count, fail_empty, "samples match")
            return
        rows: Iterable[dict[str, Any]] = result
        if download is not None:
            rows = list(result)
        columns = None
        primary = None
        if fmt is Format.table:  # the run is named on stderr; show what differs per row
            from warehouse.models import resolve_metric, sample_column_for

            rows = list(rows)
            # one run: its id and experiment go under the table ("same in every row")
            same = {"run_id", "experiment", "recorded_at", *(("split",) if split else ())}
            columns = [c for c in (rows[0] if rows else {}) if c not in same]
            columns += ["run_id", "experiment"]
            chosen_metric = resolve_metric(settings.primary_metric, settings.direction)
            primary = sort or sample_column_for(chosen_metric.name, columns)
        count = render_rows(rows, fmt, columns=columns, empty=SAMPLE_FIXED_COLUMNS, primary=primary)
    if download is not None and count:
        from warehouse.objects.download import download_outputs

        written = download_outputs(rows, download, settings)
        info(f"saved {len(written)} outputs in {download}")
    finish(count, fail_empty, "samples match")


def _hardest(
    experiment: str | None,
    split: str | None,
    filter: str | None,
    limit: int | None,
    fmt: Format,
    fail_empty: bool,
    metric: str | None,
) -> None:
    from warehouse.query import api

    settings = load_settings(primary_metric=metric)
    result = api.hardest(
        experiment=experiment, split=split, filter=filter, limit=limit, settings=settings
    )
    count = render_rows(
        result.rows, fmt, columns=list(result.columns), empty=result.columns, primary="error_rate"
    )
    finish(count, fail_empty, "sample was got wrong by any run", result.empty, filter)


def _writable_folder(path: Path, option: str) -> None:
    """Create ``path`` now, so a bad folder is said before any query runs or prints."""
    from warehouse.errors import ConfigurationError

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"{option} {path}: cannot create the folder ({exc.strerror or exc}); choose another"
        ) from exc
