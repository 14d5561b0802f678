"""The terminal: one rich Console on stderr for messages and progress; results go to stdout."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


@functools.cache
def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def error(message: str) -> None:
    """One red line on stderr."""
    from rich.markup import escape

    stderr_console().print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


def info(message: str) -> None:
    stderr_console().print(message, soft_wrap=True)
