"""Owning your history: `warehouse export` (the way out, as plain files other tools read),
and `warehouse runs tag|note|rename-experiment` (tidying recorded runs).

Results go to files; what was written is said on stderr, with a progress bar while it runs.
Changed runs are printed as a table, or as JSON/CSV with ``--format``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from warehouse.output import Format, info

FormatOpt = Annotated[
    Format, typer.Option("--format", "-f", help="table (people), json or csv (scripts).")
]
FilterOpt = Annotated[
    str | None,
    typer.Option("--filter", "-q", help="Also every run matching this Lucene filter."),
]

runs_app = typer.Typer(
    help="Tidy recorded runs: tags, notes, experiment names (each change is a new version).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add `export` and the `runs` group to the main app."""
    app.command("export")(export)
    app.add_typer(runs_app, name="runs")


@runs_app.command(
    "tag", context_settings={"ignore_unknown_options": True, "allow_extra_args": False}
)
def tag(
    words: Annotated[
        list[str],
        typer.Argument(
            help="Run ids (a unique prefix works), then tags to add (+name) or remove (-name)."
        ),
    ],
    filter: FilterOpt = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Add (+name) and remove (-name) tags; filter on them with -q tags:name.

    Example: warehouse runs tag 3f2a9c1b +baseline -debug
    """
    from warehouse.history import TagChange
    from warehouse.history import tag as tagging

    run_ids = [w for w in words if w[:1] not in "+-"]
    change = TagChange.parse(w for w in words if w[:1] in "+-")
    _edit(run_ids, filter, tagging(change), fmt)


@runs_app.command("note")
def note(
    run_id: Annotated[str, typer.Argument(help="The run (a unique id prefix works).")],
    text: Annotated[str, typer.Argument(help='The note; "" removes it.')],
    fmt: FormatOpt = Format.table,
) -> None:
    """Set a run's note (free text, searchable with -q note:word).

    Example: warehouse runs note 3f2a9c1b "baseline for the paper; data v2"
    """
    from warehouse.history import note as noting

    _edit([run_id], None, noting(text), fmt)


@runs_app.command("rename-experiment")
def rename_experiment(
    old: Annotated[str, typer.Argument(help="The experiment's current name.")],
    new: Annotated[str, typer.Argument(help="Its new name.")],
    fmt: FormatOpt = Format.table,
) -> None:
    """Give every run of an experiment a new experiment name.

    Per-sample and step records keep the name they were recorded with; the views join them
    to runs by run id, so every view shows the new name.
    """
    from warehouse.history import rename_experiment as renaming
    from warehouse.query.views import quote

    _edit([], f"experiment:{quote(old)}", renaming(new), fmt, none=f"no run has experiment {old!r}")


def _edit(
    run_ids: list[str],
    filter: str | None,
    change: Callable[[dict[str, Any]], dict[str, Any]],
    fmt: Format,
    *,
    none: str = "",
) -> None:
    from warehouse.errors import ConfigurationError
    from warehouse.history import edit_runs, select_runs
    from warehouse.output import render
    from warehouse.replication import open_recording
    from warehouse.settings import load
    from warehouse.stores import open_store

    if not run_ids and filter is None:
        raise ConfigurationError("name the runs: give run ids, or -q FILTER")
    settings = load()
    with open_store(settings) as store:
        docs = select_runs(store, run_ids, filter)
    if not docs:
        raise ConfigurationError(none or "no run matches; `warehouse query runs` lists them")
    recording = open_recording(settings)
    try:
        edited = edit_runs(recording.store, docs, change)
    finally:
        recording.close()
    render([e.row() for e in edited], fmt, columns=["run_id", "experiment", "tags", "note"])
    changed = sum(e.changed for e in edited)
    info(f"changed {changed} of {len(edited)} run(s)")


def export(
    dest: Annotated[Path, typer.Argument(help="Folder to write into (created if needed).")],
    filter: Annotated[
        str | None,
        typer.Option("--filter", "-q", help="Only the runs matching this Lucene filter."),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option("--format", "-f", help="parquet (dotted columns) or jsonl (whole records)."),
    ] = "parquet",
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Write runs, samples and steps as files DuckDB, pandas or Spark read directly:
    DEST/runs.parquet, DEST/samples/<run_id>/<split>.parquet, DEST/steps/<run_id>.parquet.

    Example: warehouse export out/ -q 'experiment:resnet*' && duckdb -c "SELECT * FROM
    'out/runs.parquet'"
    """
    import contextlib

    from warehouse.errors import ConfigurationError
    from warehouse.export import FORMATS
    from warehouse.export import export as write
    from warehouse.settings import load
    from warehouse.stores import open_store

    if fmt not in FORMATS:
        raise ConfigurationError(f"--format {fmt!r}: choose {' or '.join(FORMATS)}")
    settings = load()
    with open_store(settings) as store, contextlib.ExitStack() as stack:
        progress = None
        if not quiet:
            from warehouse.objects.download import transfer_progress

            advance = None

            def progress(done: int, total: int) -> None:
                nonlocal advance
                if advance is None:
                    advance = stack.enter_context(transfer_progress(total, "exporting runs"))
                advance()

        done = write(store, dest, filter=filter, fmt=fmt, progress=progress)
    info(
        f"exported {done.runs} run(s), {done.sample_rows} sample row(s) in {done.sample_files} "
        f"file(s), {done.steps} step(s) in {done.step_files} file(s) to {dest}"
    )
