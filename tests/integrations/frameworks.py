"""What the framework tests share: importing the framework (skip locally, fail in CI) and
reading back what was recorded."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from warehouse.models import normalise_name
from warehouse.stores.base import RunQuery, StepRange
from warehouse.stores.local import LocalStore

REQUIRE = "WAREHOUSE_TEST_REQUIRE_FRAMEWORKS"
README = Path(__file__).parents[2] / "README.md"


def require(module: str, extra: str) -> ModuleType:
    """``module`` imported; without it the tests of the file skip with the install command,
    or fail where ``WAREHOUSE_TEST_REQUIRE_FRAMEWORKS`` is set (``.ci/run`` sets it)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        reason = (
            f"{module} is not installed ({exc}): pip install -e '.[{extra}]' "
            "(.ci/run installs every framework, with torch's CPU build)"
        )
        if os.environ.get(REQUIRE, "") not in ("", "0"):
            pytest.fail(f"{reason}; {REQUIRE} is set", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def stored_runs(home: Path) -> list[dict[str, Any]]:
    with LocalStore(home) as store:
        return store.search_runs(RunQuery(limit=None))


def stored_steps(home: Path, run_id: str) -> list[dict[str, Any]]:
    with LocalStore(home) as store:
        return list(store.steps(StepRange(run_id=run_id)))


def stored_names(values: dict[str, float]) -> dict[str, float]:
    """``values`` under the names the warehouse stores them by (``val/acc`` -> ``val_acc``)."""
    return {normalise_name(k): v for k, v in values.items()}


def step_metrics(home: Path, run_id: str) -> list[tuple[int, dict[str, float]]]:
    """``(step, metrics)`` of each step document that has metrics, in order."""
    return [(d["step"], d["metrics"]) for d in stored_steps(home, run_id) if d["metrics"]]


def run_readme_block(title: str, namespace: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """Run the README's Python block that follows ``**title**`` (in ``cwd``), with
    ``namespace`` holding what the block takes as given (the model, the data)."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"**{title}**")
    block = text[start:].split("```python", 1)[1].split("```", 1)[0]
    here = Path.cwd()
    os.chdir(cwd)
    try:
        exec(compile(block, f"README.md ({title})", "exec"), namespace)
    finally:
        os.chdir(here)
    return namespace
