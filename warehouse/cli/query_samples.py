"""`warehouse query samples`: per-sample results of one run, of the best run, or the samples
most runs get wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from warehouse.cli.query import (
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
from warehouse.filters.docpath import get_path
from warehouse.output import RUN_ID_WIDTH, Format, info

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.stores.base import SampleQuery, Store


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
    from warehouse.query import views
    from warehouse.stores import open_store

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
    name, way = metric_in_force(settings, metric, direction)
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
            limit=limit_or(limit, 100),
            where=where,
        )
        chosen = result.run
        if best:
            from warehouse.models import resolve_metric

            path = resolve_metric(name, way).path
            score = views.finite(get_path(chosen, path))
            shown = "" if score is None else f", {name} = {score:.4g}"
            short = str(chosen.get("run_id"))[:RUN_ID_WIDTH]
            info(f"best run: {short} ({chosen.get('experiment')}{shown})")
        if fmt is Format.csv and download is None and _whole(result.query, chosen):
            # every row in stored order: Arrow batches straight to CSV, flat in memory
            import sys

            from warehouse.history.streaming import write_csv_batches
            from warehouse.models import SAMPLE_FIXED_COLUMNS

            count = write_csv_batches(
                _batches(store, result.query, chosen), sys.stdout, empty_header=SAMPLE_FIXED_COLUMNS
            )
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
            primary = sort or sample_column_for(resolve_metric(name, way).name, columns)
        from warehouse.models import SAMPLE_FIXED_COLUMNS

        count = render_rows(rows, fmt, columns=columns, empty=SAMPLE_FIXED_COLUMNS, primary=primary)
    if download is not None and count:
        from warehouse.objects.download import download_outputs

        written = download_outputs(rows, download, settings)
        info(f"saved {len(written)} outputs in {download}")
    finish(count, fail_empty, "samples match")


def _whole(query: SampleQuery, run: dict[str, Any]) -> bool:
    """Every stored row in stored order (no sort, filter or limit) of splits the run names:
    what the stores' batches give, so the rows never become Python dicts."""
    plain = query.sort is None and query.filter is None and query.limit is None
    return plain and not query.offset and bool(query.split or run.get("sample_counts"))


def _batches(store: Store, query: SampleQuery, run: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    """The stored rows a batch at a time, split by split, in the order rows are listed."""
    from warehouse.errors import NotFound
    from warehouse.models import sample_column_order

    counts = run.get("sample_counts") or {}
    for split in [query.split] if query.split else sorted(counts):
        try:
            for batch in store.sample_batches(query.run_id, split):
                yield batch.select(sample_column_order(batch.schema.names))  # as every store
        except NotFound:  # counted, never written (a run cut short)
            continue


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

    settings = load_settings(primary_metric=metric)
    m = resolve_metric(settings.primary_metric, None if metric else settings.direction)
    with open_store(settings) as store:
        rows = hardest(
            store, m, experiment=experiment, split=split, filter=filter, limit=limit or 100
        )
    count = render_rows(
        rows, fmt, columns=list(HARDEST_COLUMNS), empty=HARDEST_COLUMNS, primary="error_rate"
    )
    finish(count, fail_empty, "sample was got wrong by any run", settings, filter)


def _writable_folder(path: Path, option: str) -> None:
    """Create ``path`` now, so a bad folder is said before any query runs or prints."""
    from warehouse.errors import ConfigurationError

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"{option} {path}: cannot create the folder ({exc.strerror or exc}); choose another"
        ) from exc
