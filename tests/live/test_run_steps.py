"""Through the recorder: a training script logging 10,000 steps with the sampler on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import HANG_S
from warehouse.live.step_docs import is_tick
from warehouse.stores.base import StepRange
from warehouse.stores.local import LocalStore

SCRIPT = textwrap.dedent(
    """
    import math
    import time
    import warehouse
    from warehouse.live.steps import StepOptions

    options = StepOptions(total_steps=10_000)
    with warehouse.start_run(experiment="steps", config={"lr": 3e-4}, steps=options) as run:
        for step in range(10_000):
            loss = 2.0 * math.exp(-step / 1000)
            warehouse.log_step(step, epoch=step // 1000, loss=loss, lr=3e-4, grad_norm=1.0)
            if step % 500 == 0:
                time.sleep(0.02)  # let the sampler tick between steps now and then
        run.log_metrics("val", {"acc": 0.9})
    print(run.run_id)
    """
)


@pytest.mark.slow
def test_ten_thousand_steps_with_the_sampler_on_are_all_recorded(
    tmp_path: Path, home: Path
) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {
        **os.environ,
        "WAREHOUSE_CONSOLE": "1",
        "WAREHOUSE_SYSTEM_INTERVAL_S": "0.05",
    }
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.strip()
    with LocalStore(home) as store:
        docs = list(store.steps(StepRange(run_id=run_id)))
    steps = [d for d in docs if not is_tick(d)]
    assert len(steps) == 10_000
    assert [d["step"] for d in steps] == list(range(10_000))
    assert [d["seq"] for d in docs] == list(range(len(docs)))
    sampled = [d for d in docs if "system" in d]
    assert sampled, "the sampler attached no sample"
    assert all(d["system"]["ram_total_bytes"] > 0 for d in sampled)
    assert steps[-1]["epoch"] == 9
    assert steps[-1]["flags"]["loss_trend"] == "down"
    # the console line and the summary went to stderr
    assert "/10000 (" in out.stderr
    assert "done: 10000 steps in" in out.stderr


@pytest.mark.slow
def test_with_elasticsearch_configured_every_step_reaches_the_steps_data_stream(
    tmp_path: Path, home: Path, es_env: dict[str, str]
) -> None:
    from warehouse.settings import load
    from warehouse.stores import open_store
    from warehouse.stores.elastic import init_elasticsearch

    init_elasticsearch(load())
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "WAREHOUSE_SYSTEM_INTERVAL_S": "0.05"}
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=HANG_S,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.strip()
    with LocalStore(home) as local:
        local_docs = list(local.steps(StepRange(run_id=run_id)))
    with open_store(load()) as store:
        es_docs = list(store.steps(StepRange(run_id=run_id)))
    assert len([d for d in es_docs if not is_tick(d)]) == 10_000
    assert [d["seq"] for d in es_docs] == [d["seq"] for d in local_docs]
    assert es_docs[-1]["metrics"] == local_docs[-1]["metrics"]
