"""The ``warehouse`` command: parse flags, call the library, render; errors become exit codes.

Every command module in this package registers its commands on the one ``app`` through a
``register(app)`` function and imports heavy libraries only inside command bodies, so that
``warehouse --help`` stays fast. The app is built on first use (``warehouse.cli.app``).
``warehouse watch`` is parsed by an app holding that one command: the command it watches
starts without waiting for the other command modules to load (issue 15).
"""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import sys
import threading
from typing import NoReturn

import typer

from warehouse.cli import live

EXIT_CODES_HELP = (
    "Exit codes: 0 ok · 1 no match (only with --fail-empty) · 2 bad usage, config or query · "
    "3 server unreachable (nothing lost: records wait in the outbox) · 4 not found · "
    "5 sync incomplete · 70 unexpected error · 130 interrupted · 141 output pipe closed."
)

_APP_SETTINGS: dict[str, object] = {
    "no_args_is_help": True,
    "pretty_exceptions_show_locals": False,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,  # plain click help: no rich, markdown_it, pygments at start
    "add_completion": False,
}


def build_app() -> typer.Typer:
    """The ``warehouse`` app with every command registered (see the module docstring)."""
    from warehouse.cli import demo, evidence, history, kibana, ops, query, ui

    full = typer.Typer(
        name="warehouse",
        help="results-warehouse: one queryable record per ML training run.\n\n"
        "Example: warehouse demo && warehouse query leaderboard",
        epilog=EXIT_CODES_HELP,
        **_APP_SETTINGS,  # type: ignore[arg-type]
    )
    for module in (demo, query, ops, live, kibana, evidence, history, ui):
        module.register(full)
    _reflow_help(full)
    return full


def watch_app() -> typer.Typer:
    """An app of the ``watch`` command alone: what ``warehouse watch ...`` is parsed by."""
    single = typer.Typer(name="warehouse watch", **_APP_SETTINGS)  # type: ignore[arg-type]
    live.register(single)
    _reflow_help(single)
    return single


SHORT_HELP = {
    # the one-line summaries in `--help` command lists (click cuts longer first sentences)
    "demo": "Record the digits demo: a 15-run Hydra sweep.",
    "init": "Set up Elasticsearch, the bucket and Kibana.",
    "status": "Where records go; servers; what waits to ship.",
    "sync": "Ship what waits in the outbox (ES / S3).",
    "compact": "Fold recent runs into the local run catalog.",
    "export-templates": "Write the Elasticsearch index templates as JSON.",
    "watch": "Record a run from any command's output.",
    "report": "Write the static HTML report.",
    "check": "Regression gate: exit 1 if RUN is worse.",
    "export": "Write runs, samples, steps as Parquet/JSONL.",
    "push": "Copy the local history to Elasticsearch and S3.",
    "pull": "Copy runs from Elasticsearch to the local store.",
    "query": "Ask questions: runs, best, leaderboard, ...",
    "kibana": "Kibana saved objects: generate, import, export.",
    "runs": "Tidy runs: tag, note, rename, delete.",
    "runs.tag": "Add (+name) and remove (-name) tags.",
    "runs.note": "Set a run's note.",
    "runs.rename-experiment": "Rename an experiment in all its runs.",
    "runs.delete": "Delete runs and everything they hold.",
    "query.runs": "Runs matching a filter, sorted.",
    "query.best": "The best run (or one per experiment).",
    "query.leaderboard": "Experiments ranked by their best run.",
    "query.over-time": "The best score so far, over time.",
    "query.decomposition": "Bias/variance of each experiment's best run.",
    "query.samples": "Per-sample results of a run.",
    "query.show": "One run in full.",
    "query.compare": "Runs side by side: differing config, metrics.",
    "query.steps": "A run's training steps and system metrics.",
    "query.diff": "What changed between two runs, per sample.",
    "query.slices": "The metric per slice of the samples.",
    "query.replicates": "Seed replicate groups: mean, spread, luck.",
    "kibana.export-objects": "Regenerate kibana/warehouse.ndjson.",
    "kibana.import": "Import the saved objects into Kibana.",
    "kibana.export": "Export the saved objects from Kibana.",
    "ui": "Serve the local web UI (read-only).",
}


def _reflow(doc: str) -> str:
    """A docstring as help text: each paragraph's lines joined, so the terminal wraps them
    (typer's rich mode keeps every source line break: ragged help on an 80-column terminal).
    Indented lines (examples, lists) and lines starting with a ``warehouse`` command keep
    their breaks."""
    paragraphs = []
    for block in inspect.cleandoc(doc).split("\n\n"):
        lines = block.splitlines()
        if any(line.startswith((" ", "-", "*")) for line in lines[1:]):
            paragraphs.append(block)
        else:
            joined: list[str] = []
            for line in lines:  # a command on a line of its own stays on its own line
                if joined and not line.startswith("warehouse "):
                    joined[-1] += " " + line.strip()
                else:
                    joined.append(line.strip())
            paragraphs.append("\n".join(joined))
    return "\n\n".join(paragraphs)


def _reflow_help(typer_app: typer.Typer, prefix: str = "") -> None:
    for command in typer_app.registered_commands:
        doc = command.help or (command.callback.__doc__ if command.callback else None)
        if doc:
            command.help = _reflow(doc)
        name = command.name or (command.callback.__name__ if command.callback else "")
        short = SHORT_HELP.get(prefix + name.replace("_", "-"))
        if short is not None:
            command.short_help = short
    for group in typer_app.registered_groups:
        if group.name is not None and group.name in SHORT_HELP and not prefix:
            group.short_help = SHORT_HELP[group.name]
        if group.typer_instance is not None:
            _reflow_help(group.typer_instance, f"{prefix}{group.name}.")


def __getattr__(name: str) -> typer.Typer:
    """``warehouse.cli.app``: the full app, built once on first use."""
    if name == "app":
        return full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def full_app() -> typer.Typer:
    return build_app()


def debug_enabled() -> bool:
    """``--debug`` anywhere on the command line, or ``WAREHOUSE_DEBUG=1``."""
    return "--debug" in sys.argv or os.environ.get("WAREHOUSE_DEBUG", "") not in ("", "0")


def main() -> None:
    """Console-script entry: run the app, turning WarehouseError into one red line + exit code."""
    from warehouse.errors import WarehouseError
    from warehouse.output import OutputClosed

    debug = debug_enabled()
    if "--debug" in sys.argv:
        sys.argv.remove("--debug")
    args = sys.argv[1:]
    if args[:1] == ["watch"]:
        target, prog, args = watch_app(), "warehouse watch", args[1:]
    else:
        target, prog = full_app(), "warehouse"
    try:
        # typer.Exit(n) comes back as n here
        code = target(args=args, standalone_mode=False, prog_name=prog)
        sys.stdout.flush()
    except WarehouseError as exc:
        from warehouse.output import error

        if debug:  # the traceback, and still the exit code scripts rely on
            import traceback

            traceback.print_exc()
        error(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except (BrokenPipeError, OutputClosed):
        # the reader went away (`warehouse query runs | head -1`): stop quietly, as a
        # program killed by SIGPIPE would, and keep Python from complaining at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(141)
    except SystemExit:
        raise
    except Exception as exc:
        # typer vendors click: its usage errors derive from typer.TyperException
        if isinstance(exc, typer.TyperException):
            show = getattr(exc, "show", None)
            if callable(show):
                show()
            sys.exit(exc.exit_code)
        if isinstance(exc, typer.Abort):
            sys.exit(130)
        if debug:
            raise
        from warehouse.output import error

        error(
            f"unexpected error: {type(exc).__name__}: {exc} — rerun with --debug for the "
            "traceback and report it"
        )
        sys.exit(70)
    if isinstance(code, int) and code:
        sys.exit(code)


def run() -> NoReturn:
    """The process entry (console script, ``python -m warehouse``): :func:`main`, then leave
    without the interpreter's teardown.

    Once a command has finished, its records are stored and its output written, freeing
    every object of the interpreter one by one still costs ~0.1 s — on a watched short
    command, a third of what ``watch`` adds (issue 15). So, as Instagram's servers do, the
    process leaves through ``os._exit`` after doing what a normal exit does that matters:
    non-daemon threads joined, ``atexit`` handlers run (ours and the libraries'), the
    standard streams flushed. An exception that escapes ``main`` (``--debug``) exits the
    normal way, traceback and all.
    """
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = _exit_status(exc.code)
    _leave(code)


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # what sys.exit("message") prints
    return 1


def _leave(code: int) -> NoReturn:
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()  # noqa: SLF001 - the stdlib has no public way to run them now
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader went away or the stream is closed
            if stream is sys.stdout and code == 0:
                code = 141
    os._exit(code)
