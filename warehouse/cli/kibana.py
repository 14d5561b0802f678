"""`warehouse report` and `warehouse kibana export-objects|import|export`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from warehouse.dashboards.kibana_client import ImportReport

kibana_app = typer.Typer(
    name="kibana",
    help="Kibana saved objects: generate them, import them into Kibana, export them back.\n\n"
    "Example: WAREHOUSE_KIBANA_URL=http://localhost:5601 warehouse kibana import",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

MetricOpt = Annotated[
    str | None,
    typer.Option(
        "--metric", "-m", help="split.metric the views rank by (default: primary_metric)."
    ),
]
DirectionOpt = Annotated[
    str | None, typer.Option("--direction", help="max or min (default: inferred from the name).")
]
UrlOpt = Annotated[
    str | None, typer.Option("--url", help="Kibana URL (default: WAREHOUSE_KIBANA_URL).")
]
SpaceOpt = Annotated[
    str | None, typer.Option("--space", help="Kibana space id (default: WAREHOUSE_KIBANA_SPACE).")
]


def register(app: typer.Typer) -> None:
    """Add `report` and the `kibana` group to the main app."""
    app.command("report")(report)
    app.add_typer(kibana_app, name="kibana")


SliceOpt = Annotated[
    str | None,
    typer.Option(
        "--slice",
        metavar="COLUMN",
        help="Sample column of the slice heat map (default: label, shown when present).",
    ),
]


def _settings(**cli: Any) -> Any:
    from warehouse.settings import load

    return load(cli=cli)


def report(
    out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write.")] = Path(
        "report.html"
    ),
    query: Annotated[
        str | None,
        typer.Option("--query", "-q", help="Only runs matching this Lucene filter."),
    ] = None,
    metric: MetricOpt = None,
    direction: DirectionOpt = None,
    title: Annotated[str | None, typer.Option("--title", help="Heading of the report.")] = None,
    slice: SliceOpt = None,
) -> None:
    """Write one self-contained HTML report: the three views, the leaderboard, the run count.

    It opens offline (charts are inline SVG). Example: warehouse report --out results.html
    """
    from warehouse.dashboards.report import write_report
    from warehouse.output import info

    settings = _settings(primary_metric=metric, direction=direction)
    path = write_report(settings, out, filter=query, title=title, slice=slice)
    info(f"report written to {path}")
    typer.echo(str(path))


@kibana_app.command("export-objects")
def export_objects_cmd(
    out_dir: Annotated[
        Path, typer.Option("--out-dir", help="Folder for the NDJSON (kibana/ of the repo).")
    ] = Path("kibana"),
    prefix: Annotated[
        str | None,
        typer.Option(
            "--prefix", help="Index prefix (default: WAREHOUSE_INDEX_PREFIX or warehouse)."
        ),
    ] = None,
    metric: MetricOpt = None,
    direction: DirectionOpt = None,
    slice: SliceOpt = None,
) -> None:
    """Generate the saved objects from the package into kibana/warehouse.ndjson.

    Data views (runs, samples, steps), the Vega views, the runs search and the two dashboards.
    Example: warehouse kibana export-objects --prefix team-a
    """
    from warehouse.dashboards.kibana import objects_for, write_ndjson
    from warehouse.output import info

    settings = _settings(index_prefix=prefix, primary_metric=metric, direction=direction)
    path = write_ndjson(out_dir, objects_for(settings, slice or "label"))
    info(f"wrote {path}")
    typer.echo(str(path))


@kibana_app.command("import")
def import_cmd(
    file: Annotated[
        Path | None,
        typer.Option(
            "--file", "-f", help="NDJSON to import (default: generated for the settings)."
        ),
    ] = None,
    url: UrlOpt = None,
    space: SpaceOpt = None,
) -> None:
    """Import the saved objects into Kibana, replacing older copies.

    Example: warehouse kibana import --url http://localhost:5601 --space ml
    """
    from warehouse.dashboards.kibana import import_objects
    from warehouse.errors import NotFound

    settings = _settings(kibana_url=url, kibana_space=space)
    ndjson = None
    if file is not None:
        if not file.is_file():
            raise NotFound(
                f"no NDJSON file at {file}; generate one with 'warehouse kibana export-objects'"
            )
        ndjson = file.read_text(encoding="utf-8")
    print_import_report(import_objects(settings, ndjson))


def print_import_report(report: ImportReport) -> None:
    """Summary and per-object errors on stderr; ConfigurationError (exit 2) when any failed.

    `warehouse init` can call this with the
    :class:`warehouse.dashboards.kibana.ImportReport` it gets.
    """
    from warehouse.errors import ConfigurationError
    from warehouse.output import error, info

    info(report.summary())
    for failure in report.errors:
        error(str(failure))
    if not report.ok:
        raise ConfigurationError(
            f"{len(report.errors) or report.total - report.success_count} saved object(s) were "
            "not imported (see above); fix them and run 'warehouse kibana import' again"
        )


@kibana_app.command("export")
def export_cmd(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="File to write (default: stdout).")
    ] = None,
    all_types: Annotated[
        bool,
        typer.Option("--all", help="Every data view, visualization, search and dashboard."),
    ] = False,
    url: UrlOpt = None,
    space: SpaceOpt = None,
) -> None:
    """Export the warehouse's saved objects from Kibana as NDJSON (with your edits).

    Example: warehouse kibana export --out kibana/edited.ndjson
    """
    from warehouse.dashboards.kibana import export_objects

    settings = _settings(kibana_url=url, kibana_space=space)
    text = export_objects(settings, all_types=all_types)
    if out is None:
        sys.stdout.write(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        typer.echo(str(out))
