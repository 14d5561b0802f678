"""Planted secrets (issue 28, item 4): fresh secrets of every shape, drawn at this run, are
planted in every place a run takes text from and recorded through the real paths — the Hydra
callback in a subprocess, ``start_run``, ``warehouse watch`` in a subprocess and
``warehouse runs note`` — then shipped to Elasticsearch (noida-db) and S3 (moto). Every byte
the warehouse wrote or served is then searched for them: the local folder (Parquet and Arrow
decoded), the Elasticsearch documents, the S3 objects and their keys (the git diff included),
the HTML report, the CLI's output and the UI's JSON answers, for the local store and for
Elasticsearch. The count of leaks must be 0.

The places (issue 28, item 2): config, overrides, params, tags, notes, experiment name, metric
and step names, error messages and tracebacks, ``watch``'s argv, the git diff, remote and
commit message, environment values whatever the variable's name (through ``${oc.env:...}``,
an error message and argv), per-sample text columns (a struct's text too), sample ids and
output file names, artifact names.
"""

from __future__ import annotations

import json
import os
import secrets
import string
import subprocess
import sys
import textwrap
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import git
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from elasticsearch import Elasticsearch
from typer.testing import CliRunner

from tests.capture.planted import Planted, fresh_secrets, innocent_environment
from tests.servers import S3Server
from warehouse.settings import Settings, load

pytestmark = pytest.mark.slow

ALNUM = string.ascii_letters + string.digits


def _word(n: int = 14) -> str:
    return "".join(secrets.choice(ALNUM) for _ in range(n))


class Secrets:
    """Everything planted in one test: the shapes, the key-named values, the environment."""

    def __init__(self) -> None:
        self.shapes = {p.kind: p for p in fresh_secrets()}
        self.keyed = {  # values of keys that name a secret: any value, random or not
            "session_token": _word(),
            "login_token": _word(),
            "admin_token": _word(),
            "db_password": _word(),
            "flag_password": _word(),
            "api_key_flag": _word(),
        }
        self.environment = innocent_environment()

    def text(self, kind: str) -> str:
        return self.shapes[kind].text

    def all(self) -> dict[str, str]:
        """Every secret that must appear nowhere, by a name saying what it is."""
        found = {f"shape {k}": p.secret for k, p in self.shapes.items()}
        found |= {f"key {k}": v for k, v in self.keyed.items()}
        found |= {f"env {k}": v for k, v in self.environment.items()}
        return found


def leaks_in(text: str, where: str, planted: dict[str, str], into: dict[str, list[str]]) -> None:
    for name, secret in planted.items():
        if secret in text:
            into.setdefault(name, []).append(where)


def files_text(folder: Path) -> Iterator[tuple[str, str]]:
    """Each file under ``folder`` as text: Parquet and Arrow files by their values."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if data[:4] == b"PAR1":
            text = json.dumps(pq.read_table(path).to_pylist(), default=str)
        elif data[:6] == b"ARROW1":
            text = json.dumps(pa.ipc.open_file(path).read_all().to_pylist(), default=str)
        else:
            text = data.decode("utf-8", errors="replace")
        yield str(path.relative_to(folder)), text


# --- the project: a git work tree with secrets in its changes, its remote and its history ---

APP = """
import json
from pathlib import Path

import hydra

import warehouse


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg):
    planted = json.loads(Path(cfg.planted_file).read_text())
    run = warehouse.current_run()
    rows = [
        {"sample_id": f"s{i}", "prompt": text, "correct": i % 2}
        for i, text in enumerate(planted["prompts"])
    ]
    for row, headers in zip(rows, planted.get("headers", [])):
        row["headers"] = headers
    run.log_samples("val", rows)
    if "sample_id" in planted:  # a sample id is replaced whole: one secret a split
        run.log_samples("test", [{"sample_id": planted["sample_id"], "correct": 1}])
    metrics = planted.get("metrics") or [planted["metric"]]
    run.log_metrics("val", {"acc": 0.5, **{name: 0.1 for name in metrics}})
    run.log_step(0, **{metrics[0]: 0.3, "loss": 1.0})
    raise RuntimeError(planted["error"])


if __name__ == "__main__":
    main()
"""


def init_repo(folder: Path) -> git.Repo:
    """A new git work tree in ``folder`` that commits without a signature."""
    folder.mkdir()
    repo = git.Repo.init(folder, initial_branch="main")
    with repo.config_writer() as config:
        config.set_value("user", "name", "Test")
        config.set_value("user", "email", "test@example.com")
        config.set_value("commit", "gpgsign", "false")
    return repo


def make_project(folder: Path, s: Secrets) -> Path:
    repo = init_repo(folder)
    gitlab = s.shapes["gitlab token"].text
    repo.create_remote("origin", f"https://oauth2:{gitlab}@gitlab.example.com/team/x.git")
    (folder / ".env").write_text("DEBUG=1\n")
    (folder / "settings.yaml").write_text("lr: 0.1\n")
    (folder / "deploy.py").write_text("HOOK = None\n")
    (folder / "app.py").write_text(APP)
    (folder / "conf").mkdir()
    (folder / "conf" / "config.yaml").write_text("lr: 0.1\n")
    repo.index.add([".env", "settings.yaml", "deploy.py", "app.py", "conf/config.yaml"])
    repo.index.commit(f"initial, deployed with {s.text('hugging face token')}")
    # uncommitted changes: a secret file, a session token, an Azure connection string, a hook
    (folder / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={s.keyed['db_password']}\nDEBUG=1\n")
    (folder / "settings.yaml").write_text(
        f"lr: 0.2\nsession_token: {s.keyed['session_token']}\n"
        f"storage: {s.text('azure connection string')}\n"
    )
    (folder / "deploy.py").write_text(f'HOOK = "{s.text("slack webhook")}"\n')
    repo.close()
    return folder


def hydra_config(s: Secrets, planted_file: Path) -> str:
    return textwrap.dedent(
        f"""\
        defaults:
          - _self_
          - override hydra/callbacks: warehouse
        lr: 0.1
        planted_file: {planted_file}
        auth:
          session_token: {s.keyed["session_token"]}
          login_token: {s.keyed["login_token"]}
        storage:
          connection: "{s.text("azure connection string")}"
        notify: "{s.text("slack webhook")}"
        registry: ${{oc.env:MODEL_REGISTRY_REF}}
        build: ${{oc.env:BUILD_HANDLE}}
        hydra:
          callbacks:
            warehouse:
              experiment: planted-hydra
              tags: ["{s.text("random token")}"]
        """
    )


def prompts(s: Secrets) -> list[str]:
    """Per-sample text: every shape inside a sentence, the private key block included."""
    return [f"Use this to log in: {p.text} (do not share)" for p in s.shapes.values()]


def error_text(s: Secrets) -> str:
    return (
        f"failed: password={s.keyed['db_password']}; Authorization: Token "
        f"{s.shapes['token header'].secret} at {s.text('url password')} "
        f"with ref {s.environment['BUILD_HANDLE']}"
    )


def run_in(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``cwd``, with this process's environment (servers, secrets)."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ),
        timeout=240,
        check=False,
    )


# --- the test -------------------------------------------------------------------------------


def test_fresh_secrets_planted_everywhere_appear_nowhere_stored_or_served(
    servers: dict[str, str],
    s3_server: S3Server,
    s3_bucket: str,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    import warehouse
    from warehouse.cli import app
    from warehouse.stores.elastic import init_elasticsearch

    s = Secrets()
    planted = s.all()
    for key, value in {**servers, **s.environment, "WAREHOUSE_SYSTEM_INTERVAL_S": "0"}.items():
        monkeypatch.setenv(key, value)
    project = make_project(tmp_path / "project", s)
    monkeypatch.chdir(project)
    settings = load()
    init_elasticsearch(settings)
    console: list[tuple[str, str]] = []

    # 1. the Hydra callback, in a subprocess: config, overrides, tags, samples, names, error
    planted_file = tmp_path / "planted.json"
    planted_file.write_text(
        json.dumps(
            {"prompts": prompts(s), "metric": f"acc_{s.text('npm token')}", "error": error_text(s)}
        )
    )
    (project / "conf" / "config.yaml").write_text(hydra_config(s, planted_file))
    hydra_run = run_in(
        project,
        "app.py",
        f"hydra.run.dir={tmp_path}/hydra-out",
        f"+deploy.admin_token={s.keyed['admin_token']}",
        f"+model.ref={s.text('pypi token')}",
        f"+notes.key={s.text('openai project key')}",
    )
    assert hydra_run.returncode != 0  # the app raises: the run is recorded as failed
    # Hydra's own report of the task's error comes last (the overrides and the exception as
    # the user's program raised them): Hydra's output, not the warehouse's
    hydra_output, hydra_report, _ = (hydra_run.stdout + hydra_run.stderr).partition(
        "Error executing job with overrides"
    )
    assert hydra_report
    console.append(("hydra app", hydra_output))

    # 2. start_run in this process: every shape under innocent keys, in names and samples
    config = {
        "values": {kind: p.text for kind, p in s.shapes.items()},
        "auth": {"login_token": s.keyed["login_token"]},
        "registry": s.environment["MODEL_REGISTRY_REF"],
    }
    run = warehouse.start_run(
        experiment=f"planted-{s.text('hugging face token')}",
        config=config,
        settings=settings,
        cwd=project,
        tags=[s.text("random token"), f"ref={s.text('npm token')}"],
    )
    run.log_metrics("val", {"acc": 0.5, f"f1_{s.text('github token')}": 0.4})
    run.log_step(1, **{f"loss_{s.text('sendgrid key')}": 0.2})
    run.log_output("val", f"id-{s.text('twilio api key')}", b"output bytes", "text/plain")
    run.log_artifact(b"weights", name=f"weights-{s.text('stripe live key')}.bin")
    rows = [
        {"sample_id": f"s{i}", "prompt": text, "extra": {"text": text}, "correct": 1}
        for i, text in enumerate(prompts(s))
    ]
    run.log_samples("val", rows)
    try:
        raise ValueError(error_text(s))
    except ValueError as exc:
        run.end("failed", exc)
    record = run.record

    # 3. warehouse watch, in a subprocess: secrets on the command line, one from the environment
    child = tmp_path / "child.py"
    child.write_text("print('val_acc: 0.5')\n")
    watch_run = run_in(
        project,
        "-m",
        "warehouse",
        "watch",
        "--",
        sys.executable,
        str(child),
        "--password",
        s.keyed["flag_password"],
        f"--api-key={s.keyed['api_key_flag']}",
        s.text("anthropic key"),
        s.environment["MODEL_REGISTRY_REF"],
    )
    assert watch_run.returncode == 0, watch_run.stderr
    console.append(("watch", watch_run.stdout + watch_run.stderr))

    # 4. a note and a new experiment name, through the CLI; then ship what waits
    cli = CliRunner()
    for args in (
        ["runs", "note", record.run_id, f"deploy key: {s.text('google api key')}"],
        ["runs", "rename-experiment", "planted-hydra", f"hydra-{s.text('jwt')}"],
        ["sync"],
    ):
        result = cli.invoke(app, args)
        assert result.exit_code == 0, result.output
        console.append((" ".join(args[:2]), result.output))

    leaks: dict[str, list[str]] = {}
    # the local folder, outbox and objects included
    for name, text in files_text(home):
        leaks_in(text, f"local {name}", planted, leaks)
    # Elasticsearch: every document under the prefix (runs, samples, the steps data stream)
    prefix = servers["WAREHOUSE_INDEX_PREFIX"]
    with Elasticsearch(servers["WAREHOUSE_ES_URL"]) as client:
        client.indices.refresh(index=f"{prefix}-*")
        hits = client.search(
            index=f"{prefix}-*", query={"match_all": {}}, size=5000, expand_wildcards="all"
        ).body["hits"]["hits"]
    es_text = json.dumps([h["_source"] for h in hits])
    leaks_in(es_text, "elasticsearch", planted, leaks)
    # S3: every object, its key too
    s3 = s3_server.client()
    contents = s3.list_objects_v2(Bucket=s3_bucket).get("Contents", [])
    keys = [o["Key"] for o in contents]
    for key in keys:
        body = s3.get_object(Bucket=s3_bucket, Key=key)["Body"].read()
        leaks_in(f"{key}\n{body.decode('utf-8', 'replace')}", f"s3 {key}", planted, leaks)

    # what is served: CLI, report and UI, from the local store and from Elasticsearch
    local = settings.model_copy(update={"es_url": None, "store": "local"})
    for store_name, served in (("local", local), ("elasticsearch", settings)):
        for where, text in served_texts(served, record.run_id, tmp_path / store_name, cli):
            leaks_in(text, f"{store_name} {where}", planted, leaks)
    out, err = capfd.readouterr()
    console.append(("this process", out + err))
    for where, text in console:
        leaks_in(text, f"console {where}", planted, leaks)

    assert leaks == {}

    # and the test saw what it meant to: four runs, everywhere, with what was redacted
    indices = [h["_index"] for h in hits]
    assert len([i for i in indices if i.startswith(f"{prefix}-runs")]) == 3
    assert any("samples" in i for i in indices)
    assert any("steps" in i for i in indices)
    assert any(k.endswith("git.diff") for k in keys)
    assert "***" in es_text
    redacted = set(record.redacted)
    assert {"config.values", "samples.val.prompt", "samples.val.extra", "tags"} <= {
        place.rsplit(".", 1)[0] if place.startswith("config.values") else place
        for place in redacted
    }
    assert {"error.message", "git.diff", "metrics.val", "steps", "experiment"} <= redacted


def served_texts(
    settings: Settings, run_id: str, folder: Path, cli: CliRunner
) -> Iterator[tuple[str, str]]:
    """What the warehouse serves from ``settings``' store: the CLI's answers (tables and
    JSON), an export, the HTML report and the UI's JSON."""
    from warehouse.cli import app

    env = {"WAREHOUSE_STORE": settings.store_engine}
    if settings.store_engine == "local":
        env["WAREHOUSE_ES_URL"] = ""
    commands = [
        ["query", "runs", "--format", "json", "--limit", "0"],
        ["query", "runs"],
        ["query", "show", run_id, "--format", "json"],
        ["query", "show", run_id],
        ["query", "samples", "--run", run_id, "--format", "json"],
        ["query", "samples", "--run", run_id],
        ["query", "steps", run_id, "--format", "json"],
        ["query", "leaderboard"],
        ["report", "--out", str(folder / "report.html")],
        ["export", str(folder / "export"), "--format", "jsonl", "--quiet"],
    ]
    for args in commands:
        result = cli.invoke(app, args, env=env)
        assert result.exit_code == 0, (args, result.output)
        yield " ".join(args[:2]), result.output
    yield "report", (folder / "report.html").read_text()
    for name, text in files_text(folder / "export"):
        yield f"export {name}", text
    yield from ui_answers(settings, run_id)


def ui_answers(settings: Settings, run_id: str) -> Iterator[tuple[str, str]]:
    """The UI server's JSON answers, and the git diff it serves, over real HTTP."""
    from warehouse.ui.server import close, serve_in_thread

    server, _ = serve_in_thread(settings)
    try:
        base = server.url.rstrip("/")
        run_doc: dict[str, Any] = {}
        for path in (
            "/api/overview",
            "/api/metrics",
            "/api/runs?size=100",
            f"/api/run?id={run_id}",
            f"/api/samples?id={run_id}&limit=100",
            f"/api/steps?id={run_id}",
            f"/api/compare?ids={run_id}",
        ):
            try:
                with urllib.request.urlopen(base + path, timeout=30) as answer:
                    text = answer.read().decode()
            except urllib.error.HTTPError as exc:  # an error answer is served too
                text, code = exc.read().decode(), exc.code
            else:
                code = 200
            assert code < 500, (path, text)
            assert code == 200 or not path.startswith(("/api/run?", "/api/samples")), text
            if path.startswith("/api/run?"):
                run_doc = json.loads(text)
                assert run_id in text
            if path.startswith("/api/samples"):
                assert "***" in text  # the samples are there, redacted
            yield f"ui {path.split('?')[0]}", text
        diff_uri = (run_doc.get("run") or run_doc).get("git", {}).get("diff_uri")
        if diff_uri and not str(diff_uri).startswith("s3://"):
            query = urllib.parse.urlencode({"uri": diff_uri})
            with urllib.request.urlopen(f"{base}/api/object?{query}", timeout=30) as answer:
                yield "ui /api/object (git diff)", answer.read().decode("utf-8", "replace")
    finally:
        close(server)


def test_the_planted_secrets_are_fresh_at_every_run() -> None:
    """No literal to tune to: two draws share no secret."""
    first, second = Secrets().all(), Secrets().all()
    assert set(first.values()).isdisjoint(second.values())
    assert all(isinstance(p, Planted) for p in fresh_secrets())
