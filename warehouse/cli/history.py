"""Owning your history: `warehouse export` (the way out, as plain files other tools read).

Results go to files; what was written is said on stderr, with a progress bar while it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from warehouse.output import info


def register(app: typer.Typer) -> None:
    """Add `export` to the main app."""
    app.command("export")(export)


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
