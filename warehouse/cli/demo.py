"""`warehouse demo`: record a real Hydra sweep (the digits example) into the warehouse.

It owns running ``examples/digits/train.py -m`` in a subprocess with the current settings'
warehouse folder, showing progress, checking every job became a run, and telling the user
where the records are and what to run next. The example lives in the repository checkout,
not in the installed package.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import Counter, deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from warehouse.settings import Settings

# 5 model families x 3 seeds = 15 runs in 5 experiments (digits-<family>), on half the
# training split: each seed draws another half (and seeds the model), so every family has
# 3 seed replicates, and the spread between them shows which gaps between families are noise.
DEMO_SWEEP = ("model=logreg,svm,knn,random_forest,mlp", "seed=0,1,2", "data.train_fraction=0.5")
DEMO_TAG = "demo"
NEXT_COMMANDS = (
    ("warehouse query leaderboard", "experiments ranked by their best val.acc"),
    (
        "warehouse query samples --best --split val --sort confidence --asc --limit 20",
        "the best run's least confident validation images",
    ),
    ("warehouse report", "the static HTML report"),
    ("warehouse query runs --format json", "every run record in full"),
)

_LAUNCHING = re.compile(r"\[HYDRA\] Launching (\d+) jobs")
_JOB_START = re.compile(r"\[HYDRA\]\s+#(\d+) : (.*)$")
_TAIL_LINES = 40


def register(app: typer.Typer) -> None:
    """Add ``warehouse demo`` to the main app."""

    @app.command("demo")
    def demo(
        verbose: bool = typer.Option(
            False, "--verbose", "-v", help="Show the sweep's own output (Hydra and the app's logs)."
        ),
    ) -> None:
        """Run the digits example as a Hydra sweep (5 models x 3 seeds: 15 runs) into the warehouse.

        Example: warehouse demo && warehouse query leaderboard
        """
        from warehouse.settings import load

        run_demo(load(), verbose=verbose)


def find_example(root: Path | None = None) -> Path:
    """The digits example's ``train.py`` in the repository checkout the package runs from."""
    from warehouse.errors import NotFound

    if root is None:
        import warehouse

        root = Path(warehouse.__file__).resolve().parents[1]
    app = root / "examples" / "digits" / "train.py"
    if not app.is_file():
        raise NotFound(
            f"the demo needs the digits example, which is not at {app}: this installation has "
            "no repository checkout. Clone the repository and install it from there: "
            "pip install -e '.[examples]', then run 'warehouse demo' again"
        )
    return app


def check_example_dependencies() -> None:
    """Fail early, with the install command, when the examples extra is missing."""
    import importlib.util

    from warehouse.errors import ConfigurationError

    missing = [m for m in ("sklearn", "PIL", "hydra") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigurationError(
            f"the demo needs {', '.join(missing)}, which is not installed; "
            "install the examples extra: pip install 'results-warehouse[examples]'"
        )


def sweep_command(app: Path, sweep_dir: Path) -> list[str]:
    """The multirun command line, non-strict as training should be: an Elasticsearch or S3
    outage never stops the sweep nor fails a run; the records wait in the outbox."""
    return [
        sys.executable,
        str(app),
        "-m",
        *DEMO_SWEEP,
        f"hydra.sweep.dir={_hydra_value(str(sweep_dir))}",
        "hydra.callbacks.warehouse.strict=false",
        f"++hydra.callbacks.warehouse.tags=[{DEMO_TAG}]",
    ]


def _set_up_servers(settings: Settings) -> list[str]:
    """Install the Elasticsearch templates and the S3 bucket first (idempotent, as `init`).

    Without them the demo's records would wait in the outbox for a `warehouse init`. A
    server that cannot be reached does not stop the demo (recording is local first): it is
    named in the returned list, and its records wait in the outbox.
    """
    from warehouse.cli.ops import INIT_STEPS
    from warehouse.errors import BackendUnavailable
    from warehouse.output import info

    down: list[str] = []
    for part, wanted, step in INIT_STEPS:
        if part == "Kibana" or not wanted(settings):
            continue
        try:
            rows = step(settings)
        except BackendUnavailable as exc:
            down.append(part)
            info(f"{part}: not set up ({exc}); the demo goes on and its records wait in the outbox")
            continue
        changed = [row for row in rows if row[2] not in ("kept", "unchanged")]
        info(f"{part}: set up ({len(changed)} change(s)); 'warehouse init' does the same")
    return down


def run_demo(settings: Settings, *, verbose: bool = False) -> None:
    """Run the sweep into ``settings``' warehouse, check its runs, print where they went."""
    import os
    import tempfile

    from warehouse.errors import WarehouseError
    from warehouse.output import stderr_console

    app = find_example()
    check_example_dependencies()
    down = _set_up_servers(settings)
    from warehouse.home import Home

    home = Home.from_settings(settings).ensure()
    scratch = home / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    sweep_dir = Path(tempfile.mkdtemp(prefix="demo-sweep-", dir=scratch))
    env = {
        **os.environ,
        "WAREHOUSE_HOME": str(home),  # exactly where `warehouse query` will look
        "PYTHONUNBUFFERED": "1",
        "HYDRA_FULL_ERROR": "1",
        "WAREHOUSE_STRICT": "0",  # the environment outranks the callback's strict=false
    }
    console = stderr_console()
    started = time.perf_counter()
    code, tail, jobs = _run_with_progress(sweep_command(app, sweep_dir), env, console, verbose)
    elapsed = time.perf_counter() - started
    runs = _sweep_runs(settings, sweep_dir) if code == 0 else []
    if code != 0 or (jobs and len(runs) < jobs):
        if not verbose:
            console.rule("last lines of the sweep's output", style="red")
            for line in tail:
                console.print(line, markup=False, highlight=False, soft_wrap=True)
        what = (
            f"exit code {code}"
            if code != 0
            else f"{jobs} jobs ran but only {len(runs)} runs reached the warehouse at {home}"
        )
        raise WarehouseError(
            f"the demo sweep failed ({what}); its output is above and under {sweep_dir}. "
            "Fix the cause, or rerun with 'warehouse demo --verbose'"
        )
    _print_summary(settings, runs, elapsed)
    _print_waiting(settings, down)


def _run_with_progress(
    command: list[str], env: dict[str, str], console: Any, verbose: bool
) -> tuple[int, list[str], int]:
    """Run the sweep, a progress bar on stderr; return exit code, last lines, job count."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    tail: deque[str] = deque(maxlen=_TAIL_LINES)
    jobs = 0
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress:
        task = progress.add_task("starting the digits sweep", total=None)
        with subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            text=True,
            bufsize=1,
        ) as proc:
            assert proc.stdout is not None
            try:
                for raw in proc.stdout:
                    line = raw.rstrip("\n")
                    tail.append(line)
                    if verbose:
                        progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
                    jobs = _track(progress, task, line, jobs)
                code = proc.wait()
            except BaseException:
                proc.kill()
                raise
        if code == 0 and jobs:
            progress.update(task, completed=jobs)
    return code, list(tail), jobs


def _track(progress: Progress, task: TaskID, line: str, jobs: int) -> int:
    """Advance the bar on Hydra's launcher lines; return the number of jobs announced."""
    if launching := _LAUNCHING.search(line):
        jobs = int(launching.group(1))
        progress.update(task, total=jobs, completed=0)
    elif started := _JOB_START.search(line):
        number, overrides = int(started.group(1)), started.group(2).strip()
        progress.update(task, completed=number, description=f"job #{number}: {overrides}")
    return jobs


def _sweep_runs(settings: Settings, sweep_dir: Path) -> list[dict[str, Any]]:
    """The runs this sweep recorded, read back from the local store (the durable copy)."""
    from warehouse.stores import open_local_store
    from warehouse.stores.base import RunQuery

    wanted = str(sweep_dir.resolve())
    query = RunQuery(
        limit=None,
        fields=["run_id", "experiment", "status", "hydra", "metrics", "primary_metric"],
    )
    with open_local_store(settings) as store:
        docs = store.search_runs(query)
    return [d for d in docs if _same_dir((d.get("hydra") or {}).get("sweep_dir"), wanted)]


def _same_dir(recorded: Any, wanted: str) -> bool:
    return bool(recorded) and str(Path(str(recorded)).resolve()) == wanted


def _print_summary(settings: Settings, runs: list[dict[str, Any]], elapsed: float) -> None:
    """Where the records went, a line per experiment, and the commands to try next."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    out = Console(highlight=False)
    per_experiment = Counter(str(r["experiment"]) for r in runs)
    failed = sum(1 for r in runs if r.get("status") != "completed")
    out.print(
        f"[bold green]Recorded {len(runs)} runs in {len(per_experiment)} experiments[/] "
        f"in {elapsed:.1f} s" + (f" ([red]{failed} not completed[/])" if failed else "")
    )
    table = Table(box=None, pad_edge=False)
    table.add_column("experiment")
    table.add_column("runs", justify="right")
    table.add_column("best val.acc", justify="right")
    best: dict[str, float | None] = dict.fromkeys(per_experiment)
    for r in runs:
        value = (r.get("primary_metric") or {}).get("value")
        if value is not None:
            name = str(r["experiment"])
            seen = best[name]
            best[name] = float(value) if seen is None else max(seen, float(value))
    for name in sorted(best, key=lambda n: (best[n] is None, -(best[n] or 0.0), n)):
        score = best[name]
        table.add_row(
            escape(name), str(per_experiment[name]), "-" if score is None else f"{score:.4f}"
        )
    out.print(table)
    out.print(f"\nWarehouse folder: [bold]{escape(str(settings.resolved_home))}[/]")
    if settings.store_engine == "elasticsearch" and settings.es_url:
        from warehouse.url_credentials import strip_url_credentials

        out.print(f"Elasticsearch:    [bold]{escape(strip_url_credentials(settings.es_url))}[/]")
    if settings.s3_url:
        out.print(f"Model outputs:    [bold]{escape(settings.s3_url)}[/]")
    out.print("\nNext:")
    for command, what in NEXT_COMMANDS:
        out.print(f"  [cyan]{escape(command)}[/]\n      {escape(what)}")


def _print_waiting(settings: Settings, down: list[str]) -> None:
    """What waits in the outbox for a server that was down, and how to ship it."""
    from rich.console import Console
    from rich.markup import escape

    from warehouse.home import Home
    from warehouse.replication.outbox import Outbox

    waiting = Outbox(Home.from_settings(settings).outbox).count()
    if not waiting and not down:
        return
    servers = " and ".join(down) or "Elasticsearch/S3"
    Console(highlight=False).print(
        f"\n[yellow]{waiting} record(s) wait in the outbox[/] for {escape(servers)}, which "
        "did not answer; training went on and every run is in the local store. When the "
        "server is back: [cyan]warehouse init && warehouse sync[/]"
    )


def _hydra_value(value: str) -> str:
    """``value`` as a Hydra override value: bare when safe, else single-quoted and escaped."""
    if re.fullmatch(r"[\w./:+~-]+", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
