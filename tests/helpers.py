"""Small helpers shared by tests: running the ``warehouse`` command in-process."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator

import pytest

HANG_S = 1200
"""How long a subprocess of a test may take before the test calls it hung: a guard against a
hang, never a deadline on speed. Beside two CPU hogs on the shared 2-core machine the demo
sweep took 20 s at load 12 and 113 s at load 16, and with its servers down 163 s and then
more than its old 280 s bound: a bound near the usual time fails tests at random (issue 32,
item 8). pytest-timeout's default in pyproject.toml is the same."""


@contextlib.contextmanager
def no_collection() -> Iterator[None]:
    """No garbage collection while counting a function's calls: a collection runs the
    finalizers of whatever earlier tests left behind (sockets, clients) inside the counted
    code, more of them on a busy machine where more is left (issue 32, item 8)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def run_main(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """``warehouse ARGV`` through the console-script entry (exit codes as scripts see them):
    ``(exit code, stdout, stderr)``."""
    from warehouse.cli import main

    monkeypatch.setattr(sys, "argv", ["warehouse", *argv])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
