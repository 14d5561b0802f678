"""The Hydra callback end to end: a real Hydra app in a subprocess, single run and multirun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import HANG_S
from warehouse.stores.base import RunQuery
from warehouse.stores.local import LocalStore

APP = Path(__file__).parents[1] / "apps" / "tiny" / "app.py"


def run_app(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, app: Path = APP
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    flags = [a for a in args if a.startswith("-")]  # hydra flags go before the overrides
    overrides = [a for a in args if not a.startswith("-")]
    return subprocess.run(
        [
            sys.executable,
            str(app),
            *flags,
            f"hydra.run.dir={tmp_path}/out",
            f"hydra.sweep.dir={tmp_path}/multi",
            *overrides,
        ],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=tmp_path,
        timeout=HANG_S,
        check=False,
    )


def runs(home: Path) -> list[dict]:
    with LocalStore(home) as store:
        return store.search_runs(RunQuery(limit=None))


def test_a_single_run_is_recorded_with_config_metrics_and_redacted_secrets(
    tmp_path: Path, home: Path
) -> None:
    proc = run_app(tmp_path, "lr=0.2", "samples=true")
    assert proc.returncode == 0, proc.stderr
    [doc] = runs(home)
    assert doc["status"] == "completed"
    assert doc["experiment"] == "tiny"
    assert doc["metrics"]["val"]["acc"] == pytest.approx(0.8)
    assert doc["metrics"]["train"]["loss"] == pytest.approx(0.2)
    assert doc["config"]["lr"] == 0.2
    assert doc["params"]["lr"] == 0.2
    assert "lr=0.2" in doc["overrides"]
    assert doc["primary_metric"]["value"] == pytest.approx(0.8)
    assert doc["decomposition"]["variance"] == pytest.approx(0.01)
    assert doc["duration_s"] >= 0
    assert doc["sample_counts"] == {"val": 5}
    assert "hunter2-tiny-secret" not in json.dumps(doc)
    assert "hunter2-tiny-secret" not in proc.stdout + proc.stderr
    # the job's own working dir is not where records go: the warehouse home is
    assert not (tmp_path / "out" / ".warehouse").exists()


def test_flat_split_slash_metric_keys_are_split(tmp_path: Path, home: Path) -> None:
    assert run_app(tmp_path, "flat=true").returncode == 0
    [doc] = runs(home)
    assert doc["metrics"]["val"] == {"acc": pytest.approx(0.9)}
    assert doc["metrics"]["train"] == {"acc": pytest.approx(0.91)}
    assert doc["metrics"]["all"] == {"epochs": 3.0}


def test_a_returned_value_that_is_not_a_number_is_left_out_with_a_warning(
    tmp_path: Path, home: Path
) -> None:
    proc = run_app(tmp_path, "checkpoint=true")
    assert proc.returncode == 0, proc.stderr
    [doc] = runs(home)
    assert doc["status"] == "completed"
    assert doc["metrics"]["val"] == {"acc": pytest.approx(0.9)}
    assert doc["metrics"]["test"] == {"acc": pytest.approx(0.8)}
    assert "val.best_ckpt='/ckpt/e3.pt'" in proc.stderr + proc.stdout


def test_a_bare_number_returned_is_recorded_as_the_callbacks_primary_metric(
    tmp_path: Path, home: Path
) -> None:
    proc = run_app(
        tmp_path, "bare=true", "lr=0.25", "hydra.callbacks.warehouse.primary_metric=test.f1"
    )
    assert proc.returncode == 0, proc.stderr
    [doc] = runs(home)
    assert doc["status"] == "completed"
    assert doc["metrics"] == {"test": {"f1": pytest.approx(0.75)}}  # 1 - lr, as the app returns
    assert doc["primary_metric"]["name"] == "test.f1"
    assert doc["primary_metric"]["value"] == pytest.approx(0.75)
    assert "no final metrics recorded" not in proc.stderr + proc.stdout


def test_a_bare_number_without_a_primary_metric_goes_to_the_default_one(
    tmp_path: Path, home: Path
) -> None:
    assert run_app(tmp_path, "bare=true", "lr=0.4").returncode == 0
    [doc] = runs(home)
    assert doc["metrics"] == {"val": {"acc": pytest.approx(0.6)}}  # the setting: val.acc


def test_a_failing_task_is_recorded_as_failed_with_the_error(tmp_path: Path, home: Path) -> None:
    proc = run_app(tmp_path, "fail=true")
    assert proc.returncode != 0
    [doc] = runs(home)
    assert doc["status"] == "failed"
    assert doc["error"]["type"] == "RuntimeError"
    assert "boom at lr=0.1" in doc["error"]["message"]


@pytest.mark.slow
def test_a_multirun_records_one_run_per_job_sharing_the_sweep_id(
    tmp_path: Path, home: Path
) -> None:
    proc = run_app(tmp_path, "-m", "lr=0.1,0.2,0.3,0.4", "flat=false,true")
    assert proc.returncode == 0, proc.stderr
    docs = runs(home)
    assert len(docs) == 8
    assert len({d["run_id"] for d in docs}) == 8
    assert {d["status"] for d in docs} == {"completed"}
    assert len({d["hydra"]["sweep_id"] for d in docs}) == 1
    assert docs[0]["hydra"]["sweep_id"]
    assert sorted(d["hydra"]["job_num"] for d in docs) == list(range(8))


def test_a_broken_warehouse_warns_but_does_not_fail_the_experiment(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the warehouse folder should be")
    proc = run_app(tmp_path, env={"WAREHOUSE_HOME": str(blocker)})
    assert proc.returncode == 0, proc.stderr
    assert "warehouse: could not" in proc.stdout + proc.stderr


def test_strict_mode_fails_the_experiment_when_the_warehouse_fails(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the warehouse folder should be")
    proc = run_app(
        tmp_path, "hydra.callbacks.warehouse.strict=true", env={"WAREHOUSE_HOME": str(blocker)}
    )
    assert proc.returncode != 0
    assert "strict mode" in proc.stderr
