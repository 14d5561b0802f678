"""Small helpers shared by tests: running the ``warehouse`` command in-process."""

from __future__ import annotations

import sys

import pytest


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
