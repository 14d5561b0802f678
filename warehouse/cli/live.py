"""`warehouse watch -- COMMAND ...`: run a training command and record it from its output."""

from __future__ import annotations

import sys
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the main app."""
    app.command(
        "watch",
        context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
        epilog="Exit code: the command's own (killed by signal N: 128+N; 127 not found).",
    )(watch)


def watch(
    command: Annotated[
        list[str],
        typer.Argument(help="The command and its arguments (after --).", show_default=False),
    ],
    experiment: Annotated[
        str | None,
        typer.Option("--experiment", "-e", help="Experiment name (default: the script's name)."),
    ] = None,
    total_steps: Annotated[
        int | None, typer.Option("--total-steps", help="Steps expected, for % and ETA.", min=1)
    ] = None,
    primary_metric: Annotated[
        str | None,
        typer.Option("--primary-metric", help="split.metric ranking runs, e.g. val.accuracy."),
    ] = None,
    console: Annotated[
        bool, typer.Option("--console/--no-console", help="Also draw the live step line on stderr.")
    ] = False,
) -> None:
    """Run COMMAND, pass its output through unchanged, and record it as a run.

    Metrics come from its output: JSON metric lines ({"metric": "loss", "value": 0.3,
    "step": 10}), Keras 2/3 progress and epoch lines, tqdm postfixes (loss=0.12),
    Lightning's tqdm and Rich bars, the transformers Trainer's log dicts, and any line
    naming its step or epoch ([10] valid_0's l2: 0.5, Epoch 3/10: acc=0.9) or repeating
    with other numbers. The machine is
    sampled while it runs; the run's final metrics are the last values seen (val_* and
    eval_* go to split val).

    Example: warehouse watch --experiment mnist -- python train.py --epochs 3
    """
    from warehouse.output import error
    from warehouse.watch import watch as run_watch

    try:
        code = run_watch(
            command,
            experiment=experiment,
            total_steps=total_steps,
            primary_metric=primary_metric,
            console=console,
            tune_process=True,
        )
    except FileNotFoundError as exc:
        error(f"cannot run {command[0]!r}: {exc.strerror or exc}; check the command and PATH")
        code = 127
    except PermissionError as exc:
        error(f"cannot run {command[0]!r}: {exc.strerror or exc}; is it executable?")
        code = 126
    sys.exit(code)
