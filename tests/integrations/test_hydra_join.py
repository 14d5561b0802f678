"""An integration inside a Hydra job that the warehouse callback records joins the job's run:
one run per job, never two (the real Hydra app in a subprocess)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integrations.frameworks import require, step_metrics, stored_runs
from tests.recording.test_hydra_callback import run_app as run_hydra_app

require("xgboost", "xgboost")

APP = Path(__file__).parent / "apps" / "boost" / "app.py"


def run_app(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_hydra_app(tmp_path, *args, app=APP)


@pytest.mark.slow
def test_an_integration_inside_a_hydra_job_adds_to_the_jobs_run(tmp_path: Path, home: Path) -> None:
    proc = run_app(tmp_path, "rounds=5")
    assert proc.returncode == 0, proc.stderr
    [run] = stored_runs(home)  # one run: the callback's, joined by the integration
    assert run["experiment"] == "boost-in-hydra"
    assert run["status"] == "completed"
    assert run["config"] == {"rounds": 5, "max_depth": 2}  # Hydra's config stays the config
    assert "rounds=5" in run["overrides"]
    evals = json.loads((tmp_path / "out" / "evals.json").read_text())
    assert step_metrics(home, run["run_id"]) == [
        (
            i,
            {
                "train-logloss": evals["train"]["logloss"][i],
                "eval-logloss": evals["eval"]["logloss"][i],
            },
        )
        for i in range(5)
    ]
    assert run["metrics"]["train"] == {"logloss": evals["train"]["logloss"][-1]}  # integration's
    assert run["metrics"]["val"] == {"logloss": evals["eval"]["logloss"][-1]}
    assert set(run["metrics"]["test"]) == {"acc"}  # the job's return value, recorded at its end


@pytest.mark.slow
def test_a_hydra_multirun_with_an_integration_records_one_run_per_job(
    tmp_path: Path, home: Path
) -> None:
    proc = run_app(tmp_path, "-m", "rounds=2,3")
    assert proc.returncode == 0, proc.stderr
    runs = sorted(stored_runs(home), key=lambda r: r["config"]["rounds"])
    assert [r["config"]["rounds"] for r in runs] == [2, 3]
    for r in runs:
        assert len(step_metrics(home, r["run_id"])) == r["config"]["rounds"]
        assert set(r["metrics"]) == {"train", "val", "test"}
