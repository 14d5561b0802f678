"""The line a run prints when it ends says where the run really is (issue 32, item 3).

With Elasticsearch configured but unreachable, the run is in the local store and *queued* for
Elasticsearch: the line says so, with the reason, and never "in Elasticsearch".
"""

from __future__ import annotations

from pathlib import Path

import pytest

import warehouse
from tests.recording.test_hydra_callback import run_app
from tests.servers import free_port
from warehouse.output import RUN_ID_WIDTH
from warehouse.settings import load
from warehouse.stores.elastic import init_elasticsearch


def ended_line(err: str) -> str:
    [line] = [line for line in err.splitlines() if line.startswith("recorded ")]
    return line


@pytest.fixture
def console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAREHOUSE_CONSOLE", "1")


def test_a_run_elasticsearch_cannot_take_is_said_queued_with_the_reason(
    console: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv("WAREHOUSE_ES_URL", url)
    with warehouse.start_run(experiment="offline") as run:
        run.log_metrics("val", {"acc": 0.9})
    line = ended_line(capsys.readouterr().err)
    assert "queued for Elasticsearch" in line
    assert url in line
    assert "connection refused" in line
    assert "in Elasticsearch" not in line
    assert "warehouse sync" in line


def test_a_run_elasticsearch_refuses_is_said_queued_with_its_answer(
    console: None, es_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The server answers, but has no indices yet (no ``warehouse init``): still queued."""
    with warehouse.start_run(experiment="refused") as run:
        run.log_metrics("val", {"acc": 0.9})
    line = ended_line(capsys.readouterr().err)
    assert "queued for Elasticsearch (" in line
    assert "index templates not installed" in line
    assert "in Elasticsearch" not in line
    assert f"warehouse query show {run.run_id[:RUN_ID_WIDTH]}" in line


def test_a_run_elasticsearch_took_is_said_recorded_there(
    console: None, es_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    init_elasticsearch(load())
    with warehouse.start_run(experiment="online") as run:
        run.log_metrics("val", {"acc": 0.9})
    line = ended_line(capsys.readouterr().err)
    assert f"in Elasticsearch {es_env['WAREHOUSE_ES_URL']}" in line
    assert "queued" not in line
    assert f"recorded {run.run_id[:RUN_ID_WIDTH]} (val.acc 0.9)" in line


def test_a_hydra_job_with_elasticsearch_down_says_its_run_is_queued(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    proc = run_app(tmp_path, env={"WAREHOUSE_CONSOLE": "1", "WAREHOUSE_ES_URL": url})
    assert proc.returncode == 0, proc.stderr
    line = ended_line(proc.stderr)
    assert f"queued for Elasticsearch (cannot reach Elasticsearch at {url}" in line
    assert "in Elasticsearch" not in line
