"""Owning your history: `warehouse export` (the way out, as plain files other tools read),
and `warehouse runs tag|note|rename-experiment` (tidying recorded runs).

Results go to files; what was written is said on stderr, with a progress bar while it runs.
Changed runs are printed as a table, or as JSON/CSV with ``--format``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
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
    """Add `export`, `push`, `pull` and the `runs` group to the main app."""
    app.command("export")(export)
    app.command("push")(push)
    app.command("pull")(pull)
    app.add_typer(runs_app, name="runs")


def push(
    filter: Annotated[
        str | None, typer.Option("--filter", "-q", help="Only the local runs matching this.")
    ] = None,
    to_es: Annotated[
        bool, typer.Option("--to-es", help="Runs, samples and steps to Elasticsearch only.")
    ] = False,
    to_s3: Annotated[
        bool, typer.Option("--to-s3", help="Artifacts and outputs to S3 only.")
    ] = False,
    workers: Annotated[int, typer.Option("--workers", min=1, max=32)] = 4,
    fmt: FormatOpt = Format.table,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Copy the local history (runs, samples, steps, artifacts, outputs) to the configured
    Elasticsearch and S3: the way from a solo warehouse to the team's.

    Pushing twice stores nothing twice; an interrupted push goes on where it stopped when run
    again; a newer remote version of a run is never overwritten. Links to outputs in the local
    folder become their S3 URIs.

    Example: WAREHOUSE_ES_URL=http://es:9200 WAREHOUSE_S3_URL=s3://team/runs warehouse push
    """
    from warehouse.history.transfer import push as copy
    from warehouse.home import Home
    from warehouse.objects.local import LocalObjectStore
    from warehouse.settings import load
    from warehouse.stores.local import LocalStore

    settings = load()
    both = not to_es and not to_s3
    remote = None
    if (both or to_es) and settings.es_url:
        from warehouse.stores.elastic import ElasticStore

        remote = ElasticStore.from_settings(settings)
    elif to_es:
        raise _unset("WAREHOUSE_ES_URL", "--to-es")
    objects = None
    if (both or to_s3) and settings.s3_url:
        from warehouse.objects.s3 import S3ObjectStore

        objects = S3ObjectStore.from_settings(settings)
    elif to_s3:
        raise _unset("WAREHOUSE_S3_URL", "--to-s3")
    home = Home.from_settings(settings)
    with (
        LocalStore(home) as local,
        LocalObjectStore(home.objects) as local_objects,
        _bar("pushing runs", quiet) as progress,
    ):
        done = copy(
            local, local_objects, remote, objects, filter=filter, progress=progress, workers=workers
        )
    if remote is not None:
        remote.close()
    if objects is not None:
        objects.close()
    _report(done, "pushed", fmt)
    if done.local_links:
        info(
            f"{done.local_links} pushed run(s) link outputs in this machine's folder; set "
            "WAREHOUSE_S3_URL and push again to share them"
        )


def pull(
    filter: Annotated[
        str | None,
        typer.Option("--filter", "-q", help="The runs to take home, e.g. 'experiment:resnet*'."),
    ] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, max=32)] = 4,
    fmt: FormatOpt = Format.table,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Copy runs (with samples and steps) from Elasticsearch into the local store, to use the
    views offline. Outputs stay in S3; their links keep working.

    Example: warehouse pull -q 'experiment:resnet* AND tags:paper'
    """
    from warehouse.history.transfer import pull as copy
    from warehouse.home import Home
    from warehouse.settings import load
    from warehouse.stores.local import LocalStore

    settings = load()
    if not settings.es_url:
        raise _unset("WAREHOUSE_ES_URL", "pull")
    from warehouse.stores.elastic import ElasticStore

    with (
        ElasticStore.from_settings(settings) as remote,
        LocalStore(Home.from_settings(settings)) as local,
        _bar("pulling runs", quiet) as progress,
    ):
        done = copy(remote, local, filter=filter, progress=progress, workers=workers)
    _report(done, "pulled", fmt)


def _unset(variable: str, what: str) -> Exception:
    from warehouse.errors import ConfigurationError

    return ConfigurationError(f"{what} needs {variable}; set it (see warehouse status)")


def _report(done: Any, verb: str, fmt: Format) -> None:
    from warehouse.output import render

    if fmt is not Format.table:
        render([done.row()], fmt)
        return
    info(
        f"{verb} {done.runs} run(s), {done.sample_rows:,} sample row(s), {done.steps:,} step(s), "
        f"{done.objects} object(s), {done.bytes / 1e6:.1f} MB; {done.present} run(s) were "
        "already there"
    )


@contextlib.contextmanager
def _bar(label: str, quiet: bool) -> Iterator[Callable[[int, int, int], None] | None]:
    """A rich bar on stderr with runs done of total and bytes moved (none when quiet or when
    stderr is not a terminal)."""
    import sys

    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from warehouse.output import stderr_console

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[mb]:.1f} MB"),
        console=stderr_console(),
        transient=True,
    )
    task = bar.add_task(label, total=None, mb=0.0)

    def update(done: int, total: int, nbytes: int) -> None:
        bar.update(task, completed=done, total=total, mb=nbytes / 1e6)

    with bar:
        yield update


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
    from warehouse.capture.redact import redact_overrides
    from warehouse.errors import ConfigurationError
    from warehouse.history.edits import TagChange
    from warehouse.history.edits import tag as tagging
    from warehouse.settings import load

    run_ids = [w for w in words if w[:1] not in "+-"]
    tokens = [w for w in words if w[:1] in "+-"]
    if redact_overrides(tokens, load().redaction) != tokens:
        raise ConfigurationError("a tag looks like a secret (a key or token); tags are public")
    _edit(run_ids, filter, tagging(TagChange.parse(tokens)), fmt)


@runs_app.command("note")
def note(
    run_id: Annotated[str, typer.Argument(help="The run (a unique id prefix works).")],
    text: Annotated[str, typer.Argument(help='The note; "" removes it.')],
    fmt: FormatOpt = Format.table,
) -> None:
    """Set a run's note (free text, searchable with -q note:word).

    Example: warehouse runs note 3f2a9c1b "baseline for the paper; data v2"
    """
    from warehouse.history.edits import note as noting
    from warehouse.settings import load

    _edit([run_id], None, noting(load().redaction.text(text)), fmt)


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
    from warehouse.history.edits import rename_experiment as renaming
    from warehouse.query.views import quote
    from warehouse.settings import load

    clean = load().redaction.text(new)  # a name is stored and shown: no secret in it
    _edit(
        [], f"experiment:{quote(old)}", renaming(clean), fmt, none=f"no run has experiment {old!r}"
    )


@runs_app.command("delete")
def delete(
    run_ids: Annotated[
        list[str] | None, typer.Argument(help="Run ids (a unique prefix works).")
    ] = None,
    filter: FilterOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
) -> None:
    """Delete runs with their samples, steps, artifacts and outputs, locally and (through the
    outbox) in Elasticsearch and S3. Shows what would go and asks first; --yes skips that.

    Example: warehouse runs delete -q 'status:failed AND ended_at:<now-30d'
    """
    from warehouse.errors import ConfigurationError
    from warehouse.history.edits import delete_runs, select_for_deletion
    from warehouse.replication import open_recording
    from warehouse.settings import load

    if not run_ids and filter is None:
        raise ConfigurationError("name the runs: give run ids, or -q FILTER")
    settings = load()
    docs = select_for_deletion(settings, run_ids or [], filter)
    if not docs:
        raise ConfigurationError("no run matches; `warehouse query runs` lists them")
    rows = sum(sum((d.get("sample_counts") or {}).values()) for d in docs)
    experiments = sorted({str(d.get("experiment")) for d in docs})
    what = (
        f"{len(docs)} run(s) of {', '.join(experiments[:5])}"
        f"{' ...' if len(experiments) > 5 else ''}, {rows:,} sample row(s), their steps, "
        "artifacts and outputs"
    )
    if not yes:
        import sys

        if not sys.stdin.isatty():
            raise ConfigurationError(f"would delete {what}; pass --yes to delete without asking")
        typer.confirm(f"delete {what}?", abort=True, err=True)
    recording = open_recording(settings)
    try:
        count = delete_runs(recording.store, recording.objects, docs)
    finally:
        recording.close()
    info(f"deleted {count} run(s) ({what})")


def _edit(
    run_ids: list[str],
    filter: str | None,
    change: Callable[[dict[str, Any]], dict[str, Any]],
    fmt: Format,
    *,
    none: str = "",
) -> None:
    from warehouse.errors import ConfigurationError
    from warehouse.history.edits import edit_runs, select_runs
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
    from warehouse.history.export import FORMATS
    from warehouse.history.export import export as write
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
