"""Test-wide fixtures: every test gets an isolated environment and its own warehouse folder.

Real servers (Elasticsearch-API and S3) come from ``tests/servers.py`` as session fixtures.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.servers", "tests.browser"]


# what distributed launchers set (warehouse.recording.ranks): a test run inside a SLURM job
# step or under torchrun must not make every test a rank that records nothing
LAUNCHER_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "GROUP_RANK",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
)


# Hypothesis judges no example by the clock: on a busy 2-core machine an example may take
# seconds (its default 200 ms deadline and "too slow" health checks fail tests at random).
settings.register_profile(
    "warehouse",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("warehouse")


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No WAREHOUSE_* / AWS_* / launcher (rank) variables leak in or out; WAREHOUSE_HOME is a
    fresh tmp folder."""
    for key in list(os.environ):
        ours = key.startswith(("WAREHOUSE_", "AWS_")) and not key.startswith("WAREHOUSE_TEST_")
        if ours or key in LAUNCHER_VARIABLES or key.startswith("SLURM_"):
            monkeypatch.delenv(key, raising=False)
    home = tmp_path / "warehouse-home"
    monkeypatch.setenv("WAREHOUSE_HOME", str(home))
    monkeypatch.setenv("WAREHOUSE_CONSOLE", "0")
    return {"WAREHOUSE_HOME": str(home)}


@pytest.fixture
def home(env: dict[str, str]) -> Path:
    """The warehouse folder of this test."""
    return Path(env["WAREHOUSE_HOME"])
