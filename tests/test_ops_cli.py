"""`warehouse init`, `status`, `sync`, `export-templates`, and the docker-compose stack file."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.servers import free_port
from warehouse.cli import main
from warehouse.models import Run
from warehouse.replication.outbox import Outbox
from warehouse.stores.elastic_templates import export

REPO = Path(__file__).resolve().parents[1]


def run_main(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of the real console entry point."""
    monkeypatch.setattr(sys, "argv", ["warehouse", *argv])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_init_creates_then_keeps_and_status_reports_it(
    es_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main(["init", "-f", "json"], monkeypatch, capsys)
    assert code == 0
    rows = json.loads(out)
    prefix = es_env["WAREHOUSE_INDEX_PREFIX"]
    assert {r["name"]: r["outcome"] for r in rows}[f"{prefix}-runs"] == "created"
    code, out, _ = run_main(["init", "-f", "json"], monkeypatch, capsys)
    assert code == 0
    assert {r["outcome"] for r in json.loads(out) if "template" in r["what"]} == {"kept"}
    code, out, _ = run_main(["status", "-f", "json"], monkeypatch, capsys)
    (facts,) = json.loads(out)
    assert code == 0
    assert facts["reachable"] is True
    assert facts["templates"] == "installed"
    assert facts["store"] == "elasticsearch"
    assert facts["outbox pending"] == 0
    assert re.match(r"\d+\.\d+", facts["server version"])
    assert facts["s3"] is None  # not configured: null for scripts, not a dash


def test_init_against_an_unreachable_server_exits_3(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WAREHOUSE_ES_URL", f"http://127.0.0.1:{free_port()}")
    code, _, err = run_main(["init"], monkeypatch, capsys)
    assert code == 3
    assert "cannot reach Elasticsearch" in err


def test_status_never_shows_credentials_and_exits_3_when_unreachable(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WAREHOUSE_ES_URL", f"http://bob:pa55word@127.0.0.1:{free_port()}")
    monkeypatch.setenv("WAREHOUSE_ES_API_KEY", "secret-api-key")
    code, out, err = run_main(["status"], monkeypatch, capsys)
    assert code == 3
    assert "pa55word" not in out + err
    assert "secret-api-key" not in out + err
    assert "reachable" in out
    assert "no" in out


def test_sync_ships_the_outbox_then_has_nothing_to_do(
    es_env: dict[str, str],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_main(["init", "-q"], monkeypatch, capsys)[0] == 0
    outbox = Outbox(home / "outbox")
    for _ in range(3):
        outbox.add("run", {"doc": Run(experiment="x").to_doc()})
    code, _, err = run_main(["sync"], monkeypatch, capsys)
    assert code == 0
    assert "shipped 3" in err
    code, _, err = run_main(["sync"], monkeypatch, capsys)
    assert code == 0
    assert "empty" in err


def test_a_second_sync_says_who_holds_the_lock_and_waits_or_not(
    es_env: dict[str, str],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 14 item 14: a second sync waited minutes on the lock without a word."""
    import socket

    assert run_main(["init", "-q"], monkeypatch, capsys)[0] == 0
    outbox = Outbox(home / "outbox")
    for _ in range(2):
        outbox.add("run", {"doc": Run(experiment="x").to_doc()})
    with outbox.locked(wait=True) as mine:  # another sync is draining (this process)
        assert mine
        code, _, err = run_main(["sync", "--no-wait"], monkeypatch, capsys)
        assert code == 5
        assert f"pid {os.getpid()} on {socket.gethostname()} since" in err
        assert outbox.count() == 2  # nothing shipped, nothing lost
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        waiting = subprocess.Popen(
            [sys.executable, "-m", "warehouse", "sync"],
            env=env,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        assert waiting.stderr is not None
        first = waiting.stderr.readline()  # said before it waits, while the lock is held
        assert "waiting for the 'warehouse sync' of pid" in first, first
        assert waiting.poll() is None  # still waiting
    rest = waiting.communicate(timeout=60)[1]
    assert waiting.returncode == 0, rest
    assert "shipped 2" in rest
    assert outbox.count() == 0


def test_sync_with_a_rejected_record_exits_5_naming_it(
    es_env: dict[str, str],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_main(["init", "-q"], monkeypatch, capsys)[0] == 0
    bad: dict[str, Any] = {**Run(experiment="x").to_doc(), "started_at": "not a date"}
    Outbox(home / "outbox").add("run", {"doc": bad})
    code, _, err = run_main(["sync"], monkeypatch, capsys)
    assert code == 5
    assert bad["run_id"] in err
    assert "started_at" in err
    assert Outbox(home / "outbox").count() == 1


def test_export_templates_writes_the_committed_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, _ = run_main(["export-templates", "--out-dir", str(tmp_path)], monkeypatch, capsys)
    assert code == 0
    written = sorted(p.name for p in tmp_path.glob("*.json"))
    assert written == sorted(p.name for p in (REPO / "index_templates").glob("*.json"))
    assert written == sorted(p.name for p in export(tmp_path / "again"))


# docker-compose.yml -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    return data


def test_compose_runs_es_kibana_and_minio_with_healthchecks(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"elasticsearch", "kibana", "minio", "setup", "setup-bucket"} <= set(services)
    for name in ("elasticsearch", "kibana", "minio"):
        assert services[name]["healthcheck"]["test"], name
        assert services[name].get("mem_limit"), name
        assert all(str(p).startswith("127.0.0.1:") for p in services[name]["ports"]), name
    assert services["kibana"]["depends_on"]["setup"]["condition"] == (
        "service_completed_successfully"
    )
    assert services["setup"]["depends_on"]["elasticsearch"]["condition"] == "service_healthy"
    assert services["setup-bucket"]["depends_on"]["minio"]["condition"] == "service_healthy"
    assert {"esdata", "kibanadata", "miniodata"} <= set(compose["volumes"])


def test_compose_runs_one_9x_stack_version_with_security_on(compose: dict[str, Any]) -> None:
    services = compose["services"]
    es_image = services["elasticsearch"]["image"]
    kibana_image = services["kibana"]["image"]
    assert es_image.split(":", 1)[1] == kibana_image.split(":", 1)[1]
    default = re.search(r"STACK_VERSION:-(\d+)\.", es_image)
    assert default
    assert int(default.group(1)) >= 9
    env = services["elasticsearch"]["environment"]
    assert "xpack.security.enabled=true" in env
    assert any(e.startswith("ELASTIC_PASSWORD=${ELASTIC_PASSWORD") for e in env)
    assert "ELASTICSEARCH_USERNAME=kibana_system" in services["kibana"]["environment"]
    assert "kibana_system/_password" in " ".join(services["setup"]["command"])
    assert "mc mb" in " ".join(services["setup-bucket"]["entrypoint"])


def test_every_variable_the_compose_file_needs_is_in_env_example(compose: dict[str, Any]) -> None:
    text = (REPO / "docker-compose.yml").read_text()
    used = set(re.findall(r"(?<!\$)\$\{([A-Z0-9_]+)", text))
    example = (REPO / ".env.example").read_text()
    documented = set(re.findall(r"^([A-Z0-9_]+)=", example, re.M))
    assert used <= documented, f"add to .env.example: {sorted(used - documented)}"
    assert "STACK_VERSION=9." in example


# the same answers on both stores ----------------------------------------------------------------
def _same(local: Any, remote: Any, path: str = "$") -> list[str]:
    """Differences between two JSON answers; floats within 1e-9 (noida-db rounds the last
    digit of some doubles it stores; Elasticsearch returns them verbatim)."""
    if isinstance(local, float) or isinstance(remote, float):
        numbers = all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in (local, remote)
        )
        if numbers and math.isclose(local, remote, rel_tol=1e-9, abs_tol=1e-12):
            return []
        return [f"{path}: {local!r} != {remote!r}"]
    if isinstance(local, dict) and isinstance(remote, dict):
        if set(local) != set(remote):
            return [f"{path}: keys {sorted(set(local) ^ set(remote))} differ"]
        return [d for k in local for d in _same(local[k], remote[k], f"{path}.{k}")]
    if isinstance(local, list) and isinstance(remote, list):
        if len(local) != len(remote):
            return [f"{path}: {len(local)} != {len(remote)} items"]
        return [
            d
            for i, (a, b) in enumerate(zip(local, remote, strict=True))
            for d in _same(a, b, f"{path}[{i}]")
        ]
    return [] if local == remote else [f"{path}: {local!r} != {remote!r}"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_every_query_answers_the_same_on_elasticsearch_and_local_after_the_demo(
    es_env: dict[str, str],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # no `warehouse init` first: the demo sets up the templates itself
    demo = subprocess.run(
        [sys.executable, "-m", "warehouse", "demo"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=280,
        check=False,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert Outbox(home / "outbox").count() == 0, "every record reached Elasticsearch"

    def answer(store: str, *args: str) -> Any:
        monkeypatch.setenv("WAREHOUSE_STORE", store)
        code, out, err = run_main(["query", *args, "--format", "json"], monkeypatch, capsys)
        assert code == 0, err
        return json.loads(out)

    runs = answer("local", "runs", "--limit", "2")
    first, second = runs[0]["run_id"], runs[1]["run_id"]
    questions = [
        ["runs"],
        ["runs", "--sort", "metrics.val.acc", "--limit", "5"],
        ["runs", "-q", "experiment:digits-svm OR metrics.val.acc:>=0.97"],
        ["best"],
        ["best", "--per-experiment"],
        ["leaderboard"],
        ["over-time"],
        ["decomposition"],
        ["samples", "--best", "--split", "val", "--sort", "confidence", "--asc", "--limit", "20"],
        ["samples", "--run", first, "--limit", "1000"],
        ["show", first],
        ["compare", first, second],
        ["steps", first],
    ]
    for question in questions:
        local = answer("local", *question)
        remote = answer("elasticsearch", *question)
        assert local or question[0] == "steps", question  # the demo logs no steps
        assert _same(local, remote) == [], question


def test_status_of_the_local_store_counts_its_runs(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import warehouse

    for _ in range(3):
        with warehouse.start_run(experiment="e") as run:
            run.log_metrics("val", {"acc": 0.5})
    code, out, _ = run_main(["status", "-f", "json"], monkeypatch, capsys)
    (facts,) = json.loads(out)
    assert code == 0
    assert facts["store"] == "local"
    assert facts["runs"] == 3
    assert facts["kibana"] is None


def test_sync_stores_steps_kept_while_the_local_steps_store_was_down(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import warehouse
    from warehouse.stores.base import StepRange
    from warehouse.stores.local import LocalStore

    monkeypatch.setenv("WAREHOUSE_SYSTEM_INTERVAL_S", "0")
    home.mkdir(parents=True, exist_ok=True)
    (home / "steps").write_text("")  # the steps folder cannot be made: every step write fails
    with warehouse.start_run(experiment="spilled") as run:
        for step in range(100):
            run.log_step(step, loss=1.0 / (step + 1))
    waiting = [e for e in Outbox(home / "outbox").pending(staged=True) if e.kind == "steps"]
    assert sum(len(e.payload["steps"]) for e in waiting) >= 100  # the outbox holds them
    code, out, _ = run_main(["status", "-f", "json"], monkeypatch, capsys)
    facts = json.loads(out)[0]
    assert facts["outbox pending"] == len(waiting)
    assert "append steps" in facts["outbox last error"]
    (home / "steps").unlink()  # the fault is fixed
    for _ in range(2):  # twice: nothing is stored twice
        code, _, err = run_main(["sync"], monkeypatch, capsys)
        assert code == 0, err
    with LocalStore(home) as store:
        steps = [s for s in store.steps(StepRange(run_id=run.run_id)) if "metrics" in s]
    assert [s["step"] for s in steps] == list(range(100))
    assert Outbox(home / "outbox").count() == 0


def test_a_lost_journal_hides_no_run_and_compact_never_drops_one(
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 14 item 9: deleting catalog/journal hid 10 of 30 runs from every query and from
    status, and a plain 'warehouse compact' made the loss permanent."""
    from warehouse.stores.base import RunQuery
    from warehouse.stores.local import LocalStore

    with LocalStore(home) as store:
        store.write_runs([Run(run_id=f"r{i:02d}", experiment="e").to_doc() for i in range(20)])
        store.compact()  # catalog written; the next runs are only journaled
        for i in range(20, 30):
            store.write_runs([Run(run_id=f"r{i:02d}", experiment="e").to_doc()])
    expected = sorted(f"r{i:02d}" for i in range(30))
    hour_ago = time.time() - 3600
    for path in (home / "runs").iterdir():  # recorded a while ago (not being journaled now)
        os.utime(path, (hour_ago, hour_ago))
    (home / "catalog" / "journal").unlink()  # the journal is lost
    with LocalStore(home) as store:
        assert sorted(r["run_id"] for r in store.search_runs(RunQuery(limit=None))) == expected
    assert "10 run file(s) it lacked were added" in caplog.text
    code, out, _ = run_main(["status", "-f", "json"], monkeypatch, capsys)
    assert code == 0
    assert json.loads(out)[0]["runs"] == 30
    (home / "catalog" / "journal").unlink(missing_ok=True)
    code, _, err = run_main(["compact"], monkeypatch, capsys)
    assert code == 0
    assert "compacted the run catalog: 30 run(s)" in err
    (home / "runs" / "r05.json").unlink()  # a run file removed by hand leaves the answers too
    with LocalStore(home) as store:
        found = sorted(r["run_id"] for r in store.search_runs(RunQuery(limit=None)))
    assert found == [r for r in expected if r != "r05"]
    code, _, err = run_main(["compact", "--rebuild"], monkeypatch, capsys)
    assert code == 0
    assert "rebuilt the run catalog: 29 run(s)" in err
