"""`warehouse init`, `warehouse status`, `warehouse sync` and `warehouse export-templates`.

``init`` is a list of steps (:data:`INIT_STEPS`), each a function of the settings that returns
``(what, name, outcome)`` rows and runs only when its part is configured: Elasticsearch
templates/indices/stream, the S3 bucket, the Kibana saved objects. A step that cannot reach
its server stops ``init`` with exit code 3 after printing what was done so far.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from warehouse.output import Format

if TYPE_CHECKING:
    from warehouse.settings import Settings

Row = tuple[str, str, str]

FormatOpt = Annotated[
    Format,
    typer.Option(
        "--format", "-f", help="table for people; json or csv for scripts.", case_sensitive=False
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")]


def register(app: typer.Typer) -> None:
    """Add `init`, `status`, `sync`, `compact` and `export-templates` to the main app."""
    app.command("init")(init)
    app.command("status")(status)
    app.command("sync")(sync)
    app.command("compact")(compact)
    app.command("export-templates")(export_templates)


def _settings(**cli: Any) -> Settings:
    from warehouse.settings import load

    return load(cli=cli)


# init -----------------------------------------------------------------------------------------
def init_elasticsearch(settings: Settings) -> list[Row]:
    """Index templates, the aliased runs/samples indices and the steps data stream."""
    from warehouse.stores.elastic import init_elasticsearch as install

    return install(settings)


def init_bucket(settings: Settings) -> list[Row]:
    """The S3 bucket of ``WAREHOUSE_S3_URL``."""
    from warehouse.objects.s3 import S3ObjectStore

    with S3ObjectStore.from_settings(settings) as store:
        created = store.ensure_bucket()
        return [("bucket", store.base_uri, "created" if created else "kept")]


def init_kibana(settings: Settings) -> list[Row]:
    """The Kibana saved objects (data views, views, dashboards), overwritten."""
    from warehouse.dashboards.kibana import import_objects
    from warehouse.errors import BackendUnavailable

    report = import_objects(settings)
    rows: list[Row] = [("saved objects", report.kibana_url, report.summary())]
    for failure in report.errors:
        rows.append(("saved object", f"{failure.type}/{failure.id}", f"failed: {failure}"))
    if not report.ok:
        raise BackendUnavailable(
            f"Kibana refused {len(report.errors)} saved object(s): "
            + "; ".join(str(f) for f in report.errors[:3])
        )
    return rows


INIT_STEPS: list[tuple[str, Callable[[Settings], bool], Callable[[Settings], list[Row]]]] = [
    ("Elasticsearch", lambda s: s.store_engine == "elasticsearch", init_elasticsearch),
    ("S3", lambda s: bool(s.s3_url), init_bucket),
    ("Kibana", lambda s: bool(s.kibana_url), init_kibana),
]
"""``(part, configured?, step)``: what `warehouse init` sets up, in order."""


def init(
    es_url: Annotated[
        str | None, typer.Option("--es-url", help="Elasticsearch URL (default: WAREHOUSE_ES_URL).")
    ] = None,
    prefix: Annotated[
        str | None,
        typer.Option("--prefix", help="Index prefix (default: WAREHOUSE_INDEX_PREFIX)."),
    ] = None,
    fmt: FormatOpt = Format.table,
    quiet: QuietOpt = False,
    create_roles: Annotated[
        bool,
        typer.Option(
            "--create-roles",
            help="Also create the least-privilege roles and users <prefix>-writer (training, "
            "sync) and <prefix>-reader (dashboards, queries); run once as the elastic user.",
        ),
    ] = False,
    writer_password: Annotated[
        str | None,
        typer.Option(
            envvar="WAREHOUSE_ES_WRITER_PASSWORD",
            help="Password of the writer user (use the variable: a flag shows in ps).",
            show_default=False,
        ),
    ] = None,
    reader_password: Annotated[
        str | None,
        typer.Option(
            envvar="WAREHOUSE_ES_READER_PASSWORD",
            help="Password of the reader user (use the variable: a flag shows in ps).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Set up the servers the settings name: ES templates/indices, the S3 bucket, Kibana.

    Idempotent: run it again after an upgrade; it says what it created, updated or kept.
    Example: WAREHOUSE_ES_URL=http://localhost:9200 warehouse init
    """
    from warehouse.errors import ConfigurationError, WarehouseError
    from warehouse.output import info

    settings = _settings(es_url=es_url, index_prefix=prefix)
    rows: list[Row] = []
    parts = [(name, step) for name, wanted, step in INIT_STEPS if wanted(settings)]
    if create_roles:
        if settings.store_engine != "elasticsearch":
            raise ConfigurationError(
                "--create-roles creates Elasticsearch roles, but no Elasticsearch is set: "
                "set WAREHOUSE_ES_URL (and the elastic user's credentials) first"
            )
        from warehouse.stores.elastic_admin import check_passwords

        passwords = {"writer": writer_password, "reader": reader_password}
        check_passwords(passwords)  # before anything is sent

        def roles(settings: Settings) -> list[Row]:
            from warehouse.stores.elastic_admin import create_roles

            return create_roles(settings, passwords)

        parts.insert(1, ("Elasticsearch roles", roles))
    if not parts:
        if not quiet:
            info(
                "nothing to set up: records go to the local store at "
                f"{settings.resolved_home}; set WAREHOUSE_ES_URL, WAREHOUSE_S3_URL or "
                "WAREHOUSE_KIBANA_URL first"
            )
        return
    try:
        for _name, step in parts:
            rows.extend(step(settings))
    except WarehouseError:
        if rows and not quiet:
            _print_rows(rows, fmt)
        raise
    if not quiet:
        _print_rows(rows, fmt)
        info(f"ready: {', '.join(name for name, _ in parts)}")


def _print_rows(rows: Sequence[Row], fmt: Format) -> None:
    from warehouse.output import render

    render(
        [{"what": w, "name": n, "outcome": o} for w, n, o in rows],
        fmt,
        columns=["what", "name", "outcome"],
    )


# status ---------------------------------------------------------------------------------------
def status(fmt: FormatOpt = Format.table) -> None:
    """Where records go, whether the servers answer, templates, and what waits in the outbox.

    Exits with 3 when a configured Elasticsearch cannot be reached.
    Example: warehouse status --format json
    """
    from warehouse.errors import WarehouseError
    from warehouse.home import Home
    from warehouse.output import render
    from warehouse.replication.outbox import Outbox

    settings = _settings()
    facts: dict[str, Any] = {
        "store": settings.store_engine,
        "home": str(settings.resolved_home),
    }
    if settings.store_engine == "local":
        from warehouse.stores.base import RunQuery
        from warehouse.stores.local import LocalStore

        with LocalStore(settings.resolved_home) as local:
            facts["runs"] = len(local.search_runs(RunQuery(limit=None, fields=("run_id",))))
    outbox = Outbox(Home.from_settings(settings).outbox)
    waiting = outbox.pending(staged=True)
    facts["outbox pending"] = len(waiting)
    set_aside = outbox.corrupt()
    if set_aside:
        facts["outbox corrupt"] = f"{len(set_aside)} set aside in {set_aside[0].parent}"
    failed = [e for e in waiting if e.last_error]
    if failed:
        facts["outbox last error"] = failed[-1].last_error
    unreachable = False
    if settings.store_engine == "elasticsearch":
        from warehouse.stores.elastic import ElasticStore, public_url

        facts["elasticsearch"] = public_url(settings.es_url or "")
        facts["index prefix"] = settings.index_prefix
        try:
            with ElasticStore.from_settings(settings) as store:
                info = store.server_info()
                facts["server version"] = info.get("version", {}).get("number")
                facts["reachable"] = True
                states = store.template_status()
                bad = {n: s for n, s in states.items() if s != "installed"}
                facts["templates"] = (
                    "installed"
                    if not bad
                    else ", ".join(f"{n} {s}" for n, s in bad.items()) + " — run 'warehouse init'"
                )
        except WarehouseError as exc:
            facts["reachable"] = False
            facts["problem"] = str(exc)
            unreachable = True
    if settings.store_engine == "elasticsearch" or settings.s3_url:
        from warehouse.replication.verify import last

        facts["last verification"] = last(Home.from_settings(settings).root) or (
            "never: run 'warehouse sync --verify'"
        )
    facts["s3"] = settings.s3_url  # None: not configured (a dash in the table, null in JSON)
    if settings.s3_endpoint:
        facts["s3 endpoint"] = settings.s3_endpoint
    facts["kibana"] = settings.kibana_url
    if fmt is Format.table:
        render(
            [{"setting": k, "value": v} for k, v in facts.items()],
            fmt,
            columns=["setting", "value"],
        )
    else:
        render([facts], fmt)
    if unreachable:
        raise typer.Exit(3)


# sync -----------------------------------------------------------------------------------------
def sync(
    quiet: QuietOpt = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait/--no-wait",
            help="When another sync is running: wait for it (default), or stop at once (exit 5).",
        ),
    ] = True,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Then compare both sides by content (run documents, sample rows per split, "
            "steps, objects) against the digests recorded when they were written, and repair "
            "what differs from the side that is right, saying which.",
        ),
    ] = False,
) -> None:
    """Ship what waits in the outbox to Elasticsearch / S3 (safe to run twice).

    Records a process left half-written (killed, or the disk was full) are written locally
    first. Exits with 5 when some records could not be shipped (they stay, with the reason),
    or when --verify finds a damaged or lost copy, or a difference that repairing left.
    Example: warehouse sync --verify
    """
    from warehouse.replication import open_shipper

    settings = _settings()
    shipper = open_shipper(settings)
    try:
        _ship_outbox(shipper, quiet=quiet, wait=wait)
        if verify:
            _verify(shipper, settings, quiet=quiet)
    finally:
        shipper.close()


def _verify(shipper: Any, settings: Settings, *, quiet: bool) -> None:
    from warehouse.errors import SyncIncomplete
    from warehouse.home import Home
    from warehouse.objects.local import LocalObjectStore
    from warehouse.output import info
    from warehouse.replication import verify as check
    from warehouse.stores.local import LocalStore

    home = Home.from_settings(settings)
    with LocalStore(home) as local:
        result = check.verify(shipper, local, LocalObjectStore(home.objects))
    check.save(home.root, result)
    if not quiet:
        for diff in result.found:
            info(f"differed: {diff}")
    if not result.ok:
        problems = [str(d) for d in result.remaining] + [
            str(d) for d in result.damaged if d not in result.remaining
        ]
        raise SyncIncomplete(
            f"verify: {result.summary()}: "
            + "; ".join(problems[:10])
            + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
            + ". Each line says what was done; fix what was left and run "
            "'warehouse sync --verify' again",
            items=problems,
        )
    if not quiet:
        info(f"verify: {result.summary()}")


def _ship_outbox(shipper: Any, *, quiet: bool, wait: bool) -> None:
    from warehouse.errors import SyncIncomplete
    from warehouse.output import info, stderr_console

    outbox = shipper.outbox
    total = outbox.count()
    if total == 0 and not outbox.corrupt():
        if not quiet:
            info("the outbox is empty: nothing to ship")
        return
    holder = outbox.holder() if _busy(outbox) else None
    if holder is not None and not wait:
        raise SyncIncomplete(
            f"another 'warehouse sync' is running ({holder}); nothing was shipped by this one. "
            "Run it again later, or with --wait to wait for the other"
        )
    if holder is not None and not quiet:
        info(f"waiting for the 'warehouse sync' of {holder} to finish")
    if quiet:
        report = shipper.drain(wait=wait)
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        with Progress(
            TextColumn("shipping"),
            BarColumn(),
            MofNCompleteColumn(),
            console=stderr_console(),
            transient=True,
        ) as bar:
            task = bar.add_task("sync", total=total)

            def advance(done: int, count: int) -> None:
                bar.update(task, completed=done, total=count)

            report = shipper.drain(advance, wait=wait)
    if report is None:
        raise SyncIncomplete(
            f"another 'warehouse sync' started meanwhile ({outbox.holder() or 'unknown'}); "
            "run this one again later, or with --wait"
        )
    if report.failed:
        lines = [f"{entry.describe()}: {reason}" for entry, reason in report.failed[:10]]
        more = len(report.failed) - len(lines)
        raise SyncIncomplete(
            f"shipped {report.shipped}, {len(report.failed)} still waiting in "
            f"{outbox.folder}: "
            + "; ".join(lines)
            + (f"; and {more} more" if more > 0 else "")
            + ". Fix the cause and run 'warehouse sync' again",
            items=[f"{e.name}: {r}" for e, r in report.failed],
        )
    if not quiet:
        info(f"shipped {report.shipped} record(s); the outbox is empty")


def _busy(outbox: Any) -> bool:
    with outbox.locked(wait=False) as mine:
        return not mine


# compact --------------------------------------------------------------------------------------
def compact(
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild", help="Rescan every run file (after hand edits or a damaged journal)."
        ),
    ] = False,
) -> None:
    """Fold recent runs into the local store's run catalog now (it also happens by itself).

    Example: warehouse compact --rebuild
    """
    from warehouse.home import Home
    from warehouse.output import info
    from warehouse.stores.base import RunQuery
    from warehouse.stores.local import LocalStore

    settings = _settings()
    with LocalStore(Home.from_settings(settings)) as store:
        store.compact(rebuild=rebuild)
        runs = len(store.search_runs(RunQuery(limit=None, fields=("run_id",))))
    info(f"{'rebuilt' if rebuild else 'compacted'} the run catalog: {runs} run(s)")


# export-templates -----------------------------------------------------------------------------
def export_templates(
    out_dir: Annotated[
        Path, typer.Option("--out-dir", help="Folder for the JSON files (index_templates/).")
    ] = Path("index_templates"),
    prefix: Annotated[str, typer.Option("--prefix", help="Index prefix.")] = "warehouse",
) -> None:
    """Write the index templates `warehouse init` installs, as JSON (for review or curl).

    Example: warehouse export-templates --out-dir index_templates
    """
    from warehouse.output import info
    from warehouse.stores.elastic_templates import export

    for path in export(out_dir, prefix):
        info(f"wrote {path}")
