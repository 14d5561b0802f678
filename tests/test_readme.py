"""The README stays true: every setting is documented, every command it shows exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from warehouse.cli import app
from warehouse.settings import Settings

README = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_in_the_readme_table(field: str) -> None:
    assert f"`WAREHOUSE_{field.upper()}`" in README


def test_the_first_screen_gives_the_demo_and_the_test_command() -> None:
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    assert "warehouse demo" in first_block
    assert "pytest" in first_block


COMMANDS = sorted(set(re.findall(r"`(warehouse (?:query |kibana )?[a-z-]+)", README)))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_the_readme_names_exists(command: str) -> None:
    result = CliRunner().invoke(app, [*shlex.split(command)[1:], "--help"])
    assert result.exit_code == 0, result.output


def test_the_python_example_runs(home: Path, tmp_path: Path) -> None:
    block = README.split("```python", 1)[1].split("```", 1)[0]
    model = tmp_path / "model.pt"
    model.write_bytes(b"weights")
    namespace = {
        "cfg": {"lr": 0.1},
        "loader": range(3),
        "loss": 0.5,
        "lr": 0.1,
        "rows": [{"sample_id": 1, "correct": True}],
        "sample_id": 1,
        "png_bytes": b"\x89PNG\r\n\x1a\n",
    }
    cwd = Path.cwd()
    import os

    os.chdir(tmp_path)
    try:
        exec(compile(block, "README.md", "exec"), namespace)
    finally:
        os.chdir(cwd)
    run = namespace["run"]
    assert run.record.status == "completed"
    assert run.record.metrics["val"] == {"acc": 0.93}
