"""The recorder API: metrics policy, samples, outputs, artifacts, failures, bad input."""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path
from urllib.parse import urlparse

import pytest

import warehouse
from warehouse.errors import InvalidRecord
from warehouse.output import RUN_ID_WIDTH
from warehouse.settings import load
from warehouse.stores.base import RunQuery, SampleQuery
from warehouse.stores.local import LocalStore


def stored(home: Path, run_id: str) -> dict:
    with LocalStore(home) as store:
        [doc] = store.search_runs(RunQuery(filter=f'run_id:"{run_id}"'))
    return doc


def test_a_run_records_metrics_per_split_and_completes(home: Path) -> None:
    with warehouse.start_run(
        experiment="resnet", config={"lr": 0.1, "model": {"depth": 50}}
    ) as run:
        run.log_metrics("train", {"acc": 0.99, "loss": 0.05})
        run.log_metrics("val", {"acc": 0.93})
        run.log_metrics("test", {"acc": 0.91})
    doc = stored(home, run.run_id)
    assert doc["status"] == "completed"
    assert doc["metrics"] == {
        "train": {"acc": 0.99, "loss": 0.05},
        "val": {"acc": 0.93},
        "test": {"acc": 0.91},
    }
    assert doc["params"] == {"lr": 0.1, "model.depth": 50}
    assert doc["primary_metric"]["value"] == 0.93
    dec = doc["decomposition"]
    assert dec["avoidable_bias"] == pytest.approx(0.01)
    assert dec["variance"] == pytest.approx(0.06)
    assert dec["dev_overfit"] == pytest.approx(0.02)
    assert doc["schema_version"] == 1
    assert doc["environment"]["python"]


def test_the_run_is_visible_as_running_while_it_trains(home: Path) -> None:
    run = warehouse.start_run(experiment="e")
    assert stored(home, run.run_id)["status"] == "running"
    assert warehouse.current_run() is run
    run.end()
    assert warehouse.current_run() is None
    assert stored(home, run.run_id)["status"] == "completed"


def test_an_exception_in_the_block_records_failed_and_reraises(home: Path) -> None:
    with pytest.raises(ZeroDivisionError), warehouse.start_run(experiment="e") as run:
        1 / 0  # noqa: B018
    doc = stored(home, run.run_id)
    assert doc["status"] == "failed"
    assert doc["error"]["type"] == "ZeroDivisionError"
    assert "division by zero" in doc["error"]["message"]


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"]
)
def test_non_finite_metrics_are_listed_as_invalid_not_stored(
    home: Path, value: float, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING), warehouse.start_run(experiment="e") as run:
        run.log_metrics("val", {"acc": 0.5, "loss": value})
    doc = stored(home, run.run_id)
    assert doc["metrics"]["val"] == {"acc": 0.5}
    assert doc["invalid_metrics"] == ["val.loss"]
    assert "val.loss" in caplog.text


def test_a_non_numeric_metric_is_a_clear_error_naming_it(home: Path) -> None:
    with (
        warehouse.start_run(experiment="e") as run,
        pytest.raises(InvalidRecord, match=r"val\.acc.*'high'"),
    ):
        run.log_metrics("val", {"acc": "high"})


def test_numpy_scalars_and_bools_are_numbers(home: Path) -> None:
    import numpy as np

    with warehouse.start_run(experiment="e") as run:
        run.log_metrics("val", {"acc": np.float32(0.5), "n": np.int64(3), "ok": True})
    assert stored(home, run.run_id)["metrics"]["val"] == {"acc": 0.5, "n": 3.0, "ok": 1.0}


def test_metric_names_that_would_break_field_paths_are_normalised(home: Path) -> None:
    with warehouse.start_run(experiment="e") as run:
        run.log_metrics("val set", {"top-1 acc": 0.7, "f1.macro": 0.6, "iou/mean": 0.5})
    assert stored(home, run.run_id)["metrics"] == {
        "val_set": {"top-1_acc": 0.7, "f1_macro": 0.6, "iou_mean": 0.5}
    }


def test_a_config_with_10000_keys_records(home: Path) -> None:
    config = {f"group{g}": {f"key{k}": k * 0.5 for k in range(100)} for g in range(100)}
    with warehouse.start_run(experiment="huge", config=config) as run:
        run.log_metrics("val", {"acc": 1.0})
    doc = stored(home, run.run_id)
    assert len(doc["params"]) == 10_000
    assert doc["params"]["group99.key99"] == 49.5


def test_an_unresolvable_interpolation_records_the_raw_value_with_a_warning(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"a": 1, "b": "${missing.key}"})
    with caplog.at_level(logging.WARNING), warehouse.start_run(experiment="e", config=cfg) as run:
        pass
    doc = stored(home, run.run_id)
    assert doc["config"]["a"] == 1
    assert doc["config"]["b"] == "${missing.key}"
    assert "b" in caplog.text


def test_secrets_in_the_config_never_reach_the_store_or_logs(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cr3t-value-planted-here"
    config = {
        "db": {"password": secret, "url": f"postgres://u:{secret}@h/db"},
        "API_KEY": secret,
        "lr": 1,
    }
    with caplog.at_level(logging.DEBUG), warehouse.start_run(experiment="e", config=config) as run:
        run.log_metrics("val", {"acc": 1})
    for path in home.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in caplog.text


def test_a_secret_quoted_in_the_error_message_is_scrubbed(home: Path) -> None:
    secret = "pw-planted-in-an-error"
    config = {"db": {"password": secret, "user": "admin"}}
    with (
        pytest.raises(RuntimeError),
        warehouse.start_run(experiment="e", config=config) as run,
    ):
        raise RuntimeError(f"cannot reach postgres://admin:{secret}@db/x (password {secret})")
    doc = stored(home, run.run_id)
    assert doc["status"] == "failed"
    assert secret not in json.dumps(doc)
    assert doc["error"]["message"] == "cannot reach postgres://***@db/x (password ***)"
    assert "password ***" in doc["error"]["traceback"]


@pytest.mark.slow
def test_samples_stream_a_million_rows_without_holding_them(home: Path) -> None:
    def rows():
        for i in range(1_000_000):
            yield {"sample_id": i, "loss": i * 1e-6, "correct": i % 3 == 0}

    tracemalloc.start()
    with warehouse.start_run(experiment="big") as run:
        count = run.log_samples("val", rows())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == 1_000_000
    assert stored(home, run.run_id)["sample_counts"] == {"val": 1_000_000}
    assert peak < 150 * 2**20, f"peak Python allocation {peak / 2**20:.0f} MiB"
    with LocalStore(home) as store:
        worst = list(
            store.search_samples(
                SampleQuery(run_id=run.run_id, split="val", sort="loss", order="desc", limit=3)
            )
        )
    assert [r["sample_id"] for r in worst] == ["999999", "999998", "999997"]


def test_samples_from_a_dataframe_and_an_arrow_table(home: Path) -> None:
    import pandas as pd
    import pyarrow as pa

    with warehouse.start_run(experiment="e") as run:
        assert (
            run.log_samples("val", pd.DataFrame({"sample_id": ["a", "b"], "acc": [1.0, 0.0]})) == 2
        )
        assert (
            run.log_samples("test", pa.table({"sample_id": [1, 2, 3], "acc": [1.0, 0.5, 0.0]})) == 3
        )
    assert stored(home, run.run_id)["sample_counts"] == {"val": 2, "test": 3}


def test_samples_without_sample_id_are_refused_clearly(home: Path) -> None:
    with (
        warehouse.start_run(experiment="e") as run,
        pytest.raises(InvalidRecord, match="sample_id"),
    ):
        run.log_samples("val", [{"loss": 1.0}])


@pytest.mark.parametrize("order", ["outputs-first", "samples-first", "inline"])
def test_outputs_are_linked_from_their_samples(home: Path, order: str) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"fake-image-bytes"
    rows = [{"sample_id": 7, "correct": False}, {"sample_id": 8, "correct": True}]
    with warehouse.start_run(experiment="e") as run:
        if order == "outputs-first":
            run.log_output("val", 7, png, content_type="image/png")
            run.log_samples("val", rows)
        elif order == "samples-first":
            run.log_samples("val", rows)
            run.log_output("val", 7, png, content_type="image/png")
        else:
            run.log_samples(
                "val", [{**rows[0], "output": png, "output_content_type": "image/png"}, rows[1]]
            )
    with LocalStore(home) as store:
        got = {
            r["sample_id"]: r
            for r in store.search_samples(SampleQuery(run_id=run.run_id, split="val"))
        }
    assert got["8"]["output_uri"] is None
    uri = got["7"]["output_uri"]
    assert uri.endswith("/outputs/val/7.png")
    assert Path(urlparse(uri).path).read_bytes() == png


def test_artifacts_keep_uri_size_and_sha256(home: Path, tmp_path: Path) -> None:
    model = tmp_path / "model.bin"
    model.write_bytes(os.urandom(4096))
    with warehouse.start_run(experiment="e") as run:
        ref = run.log_artifact(model)
        run.log_artifact(b"{}", "metrics.json")
    assert ref.size_bytes == 4096
    assert ref.sha256 == hashlib.sha256(model.read_bytes()).hexdigest()
    doc = stored(home, run.run_id)
    assert {a["name"] for a in doc["artifacts"] if a["kind"] == "artifacts"} == {
        "model.bin",
        "metrics.json",
    }
    assert Path(urlparse(ref.uri).path).read_bytes() == model.read_bytes()


def test_recording_the_same_run_id_twice_replaces_it(home: Path) -> None:
    for acc in (0.1, 0.2):
        with warehouse.start_run(experiment="e", run_id="fixed-id") as run:
            run.log_metrics("val", {"acc": acc})
    with LocalStore(home) as store:
        docs = store.search_runs(RunQuery(limit=None))
    assert [(d["run_id"], d["metrics"]["val"]["acc"]) for d in docs] == [("fixed-id", 0.2)]


def test_a_run_killed_with_sigkill_stays_visible_as_running(tmp_path: Path, home: Path) -> None:
    script = tmp_path / "victim.py"
    script.write_text(
        textwrap.dedent("""
        import os, signal, sys, warehouse
        run = warehouse.start_run(experiment="killed")
        print(run.run_id, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == -signal.SIGKILL
    doc = stored(home, proc.stdout.strip())
    assert doc["status"] == "running"
    assert doc["ended_at"] is None


def _record_runs(home: str, worker: int) -> None:
    os.environ["WAREHOUSE_HOME"] = home
    for i in range(5):
        with warehouse.start_run(experiment=f"w{worker}", settings=load()) as run:
            run.log_metrics("val", {"acc": worker + i / 10})
            run.log_samples("val", [{"sample_id": j, "x": j} for j in range(50)])


@pytest.mark.slow
def test_eight_processes_recording_at_once_lose_nothing(home: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_record_runs, args=(str(home), w)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with LocalStore(home) as store:
        docs = store.search_runs(RunQuery(limit=None))
    assert len(docs) == 40
    assert {d["status"] for d in docs} == {"completed"}
    assert {d["sample_counts"]["val"] for d in docs} == {50}
    assert json.dumps(docs)  # every record parsed whole


@pytest.mark.parametrize("attempt", range(3))
def test_sigterm_while_the_run_is_being_saved_still_ends_the_process(
    tmp_path: Path, home: Path, attempt: int
) -> None:
    """SIGTERM lands inside save() (store locks held) about every time: the handler must not
    wait on those locks itself; the process records 'interrupted' and ends by the signal."""
    script = tmp_path / "busy.py"
    script.write_text(
        textwrap.dedent("""
        import warehouse
        run = warehouse.start_run(experiment="busy")
        print(run.run_id, flush=True)
        while True:
            run.heartbeat()
    """)
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    run_id = proc.stdout.readline().strip()
    import time

    time.sleep(0.3 + 0.1 * attempt)  # well into the heartbeat loop
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the process hung after SIGTERM (handler waiting on a held lock)")
    assert proc.returncode == -signal.SIGTERM, proc.stderr.read() if proc.stderr else ""
    assert stored(home, run_id)["status"] == "interrupted"


def test_a_metric_too_large_for_a_float_is_listed_as_invalid(home: Path) -> None:
    with warehouse.start_run(experiment="e") as run:
        run.log_metrics("val", {"acc": 0.5, "count": 10**400})
    doc = stored(home, run.run_id)
    assert doc["metrics"]["val"] == {"acc": 0.5}
    assert doc["invalid_metrics"] == ["val.count"]


def test_sigterm_records_the_run_as_interrupted_with_its_steps(tmp_path: Path, home: Path) -> None:
    script = tmp_path / "terminated.py"
    script.write_text(
        textwrap.dedent("""
        import os, signal, warehouse
        from warehouse.live.steps import StepOptions
        run = warehouse.start_run(experiment="terminated", steps=StepOptions(total_steps=100))
        for step in range(10):
            run.log_step(step, loss=1.0 / (step + 1))
        print(run.run_id, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        import time; time.sleep(30)
    """)
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    doc = stored(home, proc.stdout.strip())
    assert doc["status"] == "interrupted"
    assert doc["error"]["type"] == "_Terminated"
    from warehouse.stores.base import StepRange

    with LocalStore(home) as store:
        steps = [s for s in store.steps(StepRange(run_id=doc["run_id"])) if s.get("metrics")]
    assert [s["step"] for s in steps] == list(range(10))


def test_non_finite_sample_values_are_stored_as_missing(home: Path) -> None:
    rows = [
        {"sample_id": 1, "loss": float("nan")},
        {"sample_id": 2, "loss": float("inf")},
        {"sample_id": 3, "loss": 0.5},
    ]
    with warehouse.start_run(experiment="e") as run:
        run.log_samples("val", rows)
    with LocalStore(home) as store:
        got = {
            r["sample_id"]: r["loss"]
            for r in store.search_samples(SampleQuery(run_id=run.run_id, split="val"))
        }
    assert got == {"1": None, "2": None, "3": 0.5}


@pytest.mark.parametrize("name", ["../../../tmp/x", "/tmp/x", "a/../b", "exp\x00"])
def test_an_experiment_name_that_would_escape_the_warehouse_is_refused(
    home: Path, tmp_path: Path, name: str
) -> None:
    with pytest.raises(InvalidRecord, match="cannot be used"):
        warehouse.start_run(experiment=name)
    outside = [p for p in tmp_path.rglob("*") if home not in p.parents and p != home]
    assert not [p for p in outside if p.is_file()]


def test_a_resumed_run_appends_its_steps_after_the_first_attempts(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A preempted job restarted with its run id: both attempts' steps are kept, in order."""
    from warehouse.stores.base import StepRange

    monkeypatch.setenv("WAREHOUSE_SYSTEM_INTERVAL_S", "0")
    for first, last in ((0, 50), (50, 80)):
        with warehouse.start_run(experiment="resume", run_id="resumed-run-01") as run:
            for step in range(first, last):
                run.log_step(step, loss=1.0 / (step + 1))
    with LocalStore(home) as store:
        steps = [s for s in store.steps(StepRange(run_id="resumed-run-01")) if "metrics" in s]
    assert [s["step"] for s in steps] == list(range(80))


def test_a_recorded_run_says_where_it_went_on_stderr(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WAREHOUSE_CONSOLE", "1")
    monkeypatch.setenv("WAREHOUSE_SYSTEM_INTERVAL_S", "0")
    with warehouse.start_run(experiment="said") as run:
        run.log_metrics("val", {"acc": 0.9916})
    err = capsys.readouterr().err
    short = run.run_id[:RUN_ID_WIDTH]  # the width every table shows (issue 32, item 7)
    assert f"recorded {short} (val.acc 0.9916) in " in err
    assert f"-- warehouse query show {short}" in err
    assert str(home.name) in err


def test_the_line_is_quiet_with_the_console_off(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with warehouse.start_run(experiment="quiet") as run:  # the tests run with WAREHOUSE_CONSOLE=0
        run.log_metrics("val", {"acc": 0.5})
    assert "recorded" not in capsys.readouterr().err
