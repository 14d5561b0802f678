"""Run ids are shortened to one width everywhere (issue 32, item 7): ``RUN_ID_WIDTH``, the
prefix every command accepts. The line a run prints when it ends used 8 characters, the
tables 12; the command outputs are checked in ``tests/test_tables_fit.py``, the code here."""

from __future__ import annotations

import re
from pathlib import Path

from warehouse.output import RUN_ID_WIDTH

PACKAGE = Path(__file__).parents[1] / "warehouse"


def test_no_module_cuts_a_run_id_to_a_width_of_its_own() -> None:
    cut = re.compile(r"run_id\b[^\n]{0,20}\[:\s*\d+\s*\]")  # run_id[:8], str(run_id)[:12] ...
    found = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in PACKAGE.rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if cut.search(line)
    ]
    assert not found, f"use warehouse.output.RUN_ID_WIDTH: {found}"


def test_the_ui_shortens_run_ids_to_the_same_width() -> None:
    script = (PACKAGE / "ui" / "static" / "app.js").read_text(encoding="utf-8")
    [width] = re.findall(r"const short = \(id\) => .*?slice\(0, (\d+)\)", script)
    assert int(width) == RUN_ID_WIDTH
