"""Fresh secrets of 100+ shapes, planted in every place a run takes text from, found nowhere.

The attack a reviewer makes, made first: ``fresh_secrets`` draws a new secret of every shape
for every place from a seed chosen at this run (``WAREHOUSE_TEST_SECRET_SEED`` replays one),
the real paths record them (the Hydra callback in a subprocess, ``start_run``, ``warehouse
watch`` in a subprocess, ``runs note``/``tag``/``rename-experiment``, ``sync`` to
Elasticsearch and S3), and every byte stored or served is scanned for any 12-character run of
any secret's random part: the local folder (Parquet and Arrow decoded), the Elasticsearch
documents, the S3 objects and their keys, the CLI's answers in every format, the report, the
export and the UI's JSON. A failure prints the leaks by shape and by place, and the seed.

Known limits, left out of the plantings: a URL with credentials mangled into a file name or an
experiment name (its "/" made "_"; such a name holds no "//"), and a bare ``-p PASSWORD`` in a
list that names no tool: a password a person picks has no shape, and only a key name, a URL's
userinfo or a known tool's flag gives it away.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tests.capture.fresh_secrets import Secret, secret_key_name
from tests.capture.leak_scan import Plantings, files_text
from tests.capture.test_planted_secrets import APP, init_repo
from tests.servers import S3Server

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("WAREHOUSE_TEST_SECRET_SEED") or random.SystemRandom().randrange(2**32))
FULL = os.environ.get("WAREHOUSE_TEST_SECRET_FULL") == "1"  # every shape in every place


def _quote_override(text: str) -> str | None:
    for quote in ("'", '"'):
        if quote not in text and "\\" not in text:
            return f"{quote}{text}{quote}"
    return None


CHILD = """
import json, sys
planted = json.load(open(sys.argv[1]))
for i, line in enumerate(planted["lines"]):
    print(f"step {i + 1} loss={0.5 / (i + 1):.4f}")
    print(line)
for name in planted["metrics"]:
    print(json.dumps({"step": 99, name: 0.25}))
print("val_acc: 0.5")
"""

NOTEBOOK_CELL = {
    "cell_type": "code",
    "execution_count": 1,
    "metadata": {},
    "outputs": [{"name": "stdout", "output_type": "stream", "text": []}],
    "source": ["import os\n"],
}


def make_project(folder: Path, p: Plantings) -> Path:
    """A git work tree whose history, remote, branch and uncommitted changes hold secrets."""
    repo = init_repo(folder)
    remote = p.secret("git.remote", "github-classic").text
    repo.create_remote("origin", f"https://x-access-token:{remote}@github.com/ml/x.git")
    removed = p.each("git.diff-removed", single_line=True)
    (folder / "train.py").write_text(
        "".join(f"OLD_{i} = {json.dumps(s.text)}\n" for i, s in enumerate(removed))
    )
    (folder / ".env").write_text("DEBUG=1\n")
    (folder / "notebook.ipynb").write_text(json.dumps({"cells": [NOTEBOOK_CELL]}, indent=1))
    (folder / "app.py").write_text(APP)
    (folder / "conf").mkdir()
    (folder / "conf" / "config.yaml").write_text("lr: 0.1\n")
    repo.index.add(["train.py", ".env", "notebook.ipynb", "app.py", "conf/config.yaml"])
    message = p.secret("git.commit-message", "huggingface").text
    repo.index.commit(f"initial, pushed with {message}")
    branch = p.secret("git.branch", "gitlab-pat").text
    repo.git.checkout("-b", f"fix/{branch}")
    added = p.each("git.diff-added")
    (folder / "train.py").write_text(
        "".join(f"value_{i} = {json.dumps(s.text)}\n" for i, s in enumerate(added))
        + "".join(f"# {s.text}\n" for s in p.each("git.diff-comment", single_line=True))
    )
    dotenv = p.some("git.diff-dotenv", 4)
    (folder / ".env").write_text("".join(f"V{i}={s.text}\n" for i, s in enumerate(dotenv)))
    cell = dict(NOTEBOOK_CELL)
    cell["outputs"] = [
        {
            "name": "stdout",
            "output_type": "stream",
            "text": [f"{s.text}\n" for s in p.each("git.diff-notebook")],
        }
    ]
    (folder / "notebook.ipynb").write_text(json.dumps({"cells": [cell]}, indent=1))
    repo.close()
    return folder


def hydra_config(p: Plantings, planted_file: Path) -> str:
    config: dict[str, Any] = {
        "defaults": ["_self_", {"override hydra/callbacks": "warehouse"}],
        "lr": 0.1,
        "planted_file": str(planted_file),
        "values": {f"v{i}": s.text for i, s in enumerate(p.each("hydra.config"))},
        "svc": {name: p.password("hydra.config-keyname").text for name in key_names(p, 32)},
        "cmd": ["--password", p.password("hydra.config-list").text],
        "hydra": {
            "callbacks": {
                "warehouse": {
                    "experiment": f"hydra-{p.secret('hydra.experiment', 'npm').text}",
                    "tags": [s.text for s in p.some("hydra.tags", 3)],
                }
            }
        },
    }
    return yaml.safe_dump(config, sort_keys=False)


def run_in(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=240,
        check=False,
    )


def keyed_headers(p: Plantings, place: str) -> dict[str, str]:
    """A request's headers in a sample: passwords a person picks under secret names, and a
    token under ``token`` (in a sample row a field named only ``token`` is a piece of text,
    judged by its value)."""
    # a dotted name is a path in Elasticsearch: two rows' "a.b" and "a.b.c" collide there
    drawn = [n for n in key_names(p, 4, dots=False) if n.lower() not in ("token", "tokens")]
    headers = {name: p.password(place).text for name in ("Authorization", "X-Api-Key", *drawn[:2])}
    headers["token"] = p.some(place, 1)[0].text
    return headers


def key_names(p: Plantings, n: int, *, dots: bool = True) -> list[str]:
    """``n`` fresh secret key names (:func:`~tests.capture.fresh_secrets.secret_key_name`)."""
    names = (secret_key_name(p.rng) for _ in range(n))
    return list(dict.fromkeys(name if dots else name.replace(".", "_") for name in names))


def _userinfo(s: Secret) -> bool:
    """Whether ``s`` holds a URL with credentials: in a name its "/" go, and with them the URL
    and the only sign of its password (one a person picks; see the module docstring)."""
    return re.search(r"://[^/\s]*@", s.text) is not None


def file_names(p: Plantings, place: str, n: int) -> list[tuple[Secret, str]]:
    """``n`` fresh secrets as parts of file names ("/" made "_"), URLs with credentials left
    out (:func:`_userinfo`), and texts too long for a file name (255 bytes)."""
    secrets = [s for s in p.some(place, 3 * n) if not _userinfo(s) and len(s.text) < 160]
    return [(s, s.text.replace("/", "_")) for s in secrets[:n]]


def metric_name(s: Secret) -> str:
    return f"f1_{s.text}"


def test_fresh_secrets_of_every_shape_are_stored_and_served_nowhere(
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
    from warehouse.settings import load
    from warehouse.stores.elastic import init_elasticsearch

    p = Plantings(SEED)
    innocent_env = {f"BUILD_REF_{i}": s.text for i, s in enumerate(p.some("env.innocent-name", 4))}
    secret_env = {"SERVICE_PASSWORD": p.password("env.secret-name").text}
    for key, value in {**servers, **innocent_env, **secret_env}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("WAREHOUSE_SYSTEM_INTERVAL_S", "0")
    project = make_project(tmp_path / "project", p)
    monkeypatch.chdir(project)
    settings = load()
    init_elasticsearch(settings)
    console: list[tuple[str, str]] = []

    # 1. the Hydra callback in a subprocess
    planted_file = tmp_path / "planted.json"
    planted_file.write_text(
        json.dumps(
            {
                "prompts": [f"Log in with {s.text} please" for s in p.each("hydra.samples")],
                "metrics": [
                    metric_name(s)
                    for s in p.each("hydra.metric-name", single_line=True, spaces=False)
                ],
                "error": "; ".join(s.text for s in p.some("hydra.error", 6)),
                "headers": [keyed_headers(p, "hydra.sample-struct-keyed") for _ in range(6)],
                "sample_id": f"s0-{p.some('hydra.sample-id', 1)[0].text}",
            }
        )
    )
    (project / "conf" / "config.yaml").write_text(hydra_config(p, planted_file))
    overrides = []
    for i, s in enumerate(p.each("hydra.override", single_line=True)):
        quoted = _quote_override(s.text)
        if quoted is None:
            p.all.remove(next(x for x in p.all if x.secret is s))
            continue
        overrides.append(f"+ov.v{i}={quoted}")
    env_refs = {f"ref{i}": f"${{oc.env:{name}}}" for i, name in enumerate(innocent_env)}
    overrides += [f"+env.{k}='{v}'" for k, v in env_refs.items()]
    run_dir = f"{tmp_path}/hydra-out/{p.secret('hydra.run-dir', 'github-app').text}"
    job_name = f"job-{p.secret('hydra.job-name', 'replicate').text}"
    hydra_run = run_in(
        project, "app.py", f"hydra.run.dir={run_dir}", f"hydra.job.name={job_name}", *overrides
    )
    assert "Error executing job" in hydra_run.stderr, hydra_run.stderr[-3000:]
    hydra_output = (hydra_run.stdout + hydra_run.stderr).partition("Error executing job")[0]
    console.append(("hydra app", hydra_output))

    # 2. start_run in this process
    config = {
        "values": {f"v{i}": s.text for i, s in enumerate(p.each("api.config"))},
        "keys": {s.text: 0.1 for s in p.each("api.config-key", single_line=True)},
        "svc": {name: p.password("api.config-keyname").text for name in key_names(p, 32)},
        "args": [
            "--password",
            p.password("api.config-list").text,
            "--api-key",
            p.password("api.config-list").text,
        ],
        "nested": [{"url": s.text} for s in p.some("api.config-nested-list", 6)],
        "registry": innocent_env["BUILD_REF_0"],
    }
    tags = [s.text for s in p.each("api.tags", single_line=True, spaces=False)]
    run = warehouse.start_run(
        experiment=f"api-{p.secret('api.experiment', 'openai-project').text}",
        config=config,
        settings=settings,
        cwd=project,
        tags=tags,
    )
    run.log_metrics(
        "val",
        {
            "acc": 0.5,
            **{
                metric_name(s): 0.4
                for s in p.each("api.metric-name", single_line=True, spaces=False)
            },
        },
    )
    run.log_step(
        1, **{metric_name(s): 0.2 for s in p.each("api.step-name", single_line=True, spaces=False)}
    )
    for _, name in file_names(p, "api.output-id", 5):
        run.log_output("val", f"id-{name}", b"output bytes", "text/plain")
    for _, name in file_names(p, "api.artifact-name", 5):
        run.log_artifact(b"weights", name=f"weights-{name}.bin")
    artifact_dir = tmp_path / "artifacts"
    artifact_dir.mkdir()
    for _, name in file_names(p, "api.artifact-file", 4):
        path = artifact_dir / f"ckpt-{name}.pt"
        path.write_bytes(b"ckpt")
        run.log_artifact(path)
    sample_texts = p.each("api.sample-text")
    struct_texts = p.each("api.sample-struct")
    list_texts = p.each("api.sample-list")
    rows = [
        {
            "sample_id": f"s{i}",
            "prompt": f"Use {text.text} to log in",
            "extra": {"text": struct_texts[i].text},
            "refs": [list_texts[i].text, "ok"],
            "correct": i % 2,
        }
        for i, text in enumerate(sample_texts)
    ]
    for row in rows[:6]:
        row["headers"] = keyed_headers(p, "api.sample-struct-keyed")
    run.log_samples("val", rows)
    # a sample id is replaced whole, so only one can hold a secret per split
    run.log_samples(
        "test", [{"sample_id": f"s0-{p.some('api.sample-id', 1)[0].text}", "correct": 1}]
    )
    message = " | ".join(s.text for s in p.each("api.error-message"))
    message += f" | failed for {secret_env['SERVICE_PASSWORD']}"
    try:
        raise ValueError(message)
    except ValueError as exc:
        run.end("failed", exc)
    record = run.record

    # experiment names, one run each
    for s in p.some("api.experiment-name", 16 if not FULL else 200):
        if "//" in s.text or "\\" in s.text:  # a name holds no empty folder, no backslash
            continue
        name = f"exp-{s.text}"
        with warehouse.start_run(experiment=name, settings=settings, cwd=project):
            pass

    # a traceback whose source lines hold hard-coded secrets
    module = tmp_path / "client_code.py"
    hard = p.some("api.traceback-source", 5)
    module.write_text(
        "def connect():\n"
        + "".join(f"    key_{i} = {json.dumps(s.text)}\n" for i, s in enumerate(hard))
        + "    raise ConnectionError('refused') from None\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import client_code  # type: ignore[import-not-found]

        with (
            pytest.raises(ConnectionError),
            warehouse.start_run(experiment="traceback", settings=settings, cwd=project),
        ):
            client_code.connect()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("client_code", None)
    # a long message: the secret sits where a cut would fall
    long_secret = p.secret("api.error-long", "github-classic")
    pem = p.secret("api.error-long", "pem-rsa")
    with (
        pytest.raises(RuntimeError),
        warehouse.start_run(experiment="long-error", settings=settings, cwd=project),
    ):
        raise RuntimeError("x" * 3990 + long_secret.text + " " + pem.text + "y" * 30_000)

    # 3. warehouse watch in a subprocess
    child_plan = tmp_path / "child.json"
    child_plan.write_text(
        json.dumps(
            {
                "lines": [f"INFO using {s.text}" for s in p.each("watch.output")],
                "metrics": [s.text for s in p.some("watch.output-metric", 6)],
            }
        )
    )
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    argv = [s.text for s in p.each("watch.argv", single_line=True)]
    argv += ["--password", p.password("watch.argv-flag").text]
    argv += [f"--db-password={p.password('watch.argv-flag').text}"]
    argv += ["mysql", "-u", "root", f"-p{p.password('watch.argv-flag').text}"]
    watch_experiment = p.secret("watch.experiment", "slack-bot").text
    watch_run = run_in(
        project,
        "-m",
        "warehouse",
        "watch",
        "-e",
        f"watched-{watch_experiment}",
        "--",
        sys.executable,
        str(child),
        str(child_plan),
        *argv,
    )
    assert watch_run.returncode == 0, watch_run.stderr[-3000:]
    console.append(("watch", watch_run.stderr))  # stdout is the child's own, passed through

    # 4. the CLI's history commands; then ship what waits
    cli = CliRunner()
    note = " ".join(s.text for s in p.some("cli.note", 6, single_line=False))
    tag_args = [f"+{s.text}" for s in p.some("cli.tag", 4) if " " not in s.text]
    new_name = p.secret("cli.rename-experiment", "anthropic").text
    for tag in tag_args:  # a tag that looks like a secret may be refused: its answer is read
        result = cli.invoke(app, ["runs", "tag", record.run_id, tag])
        console.append(("runs tag", result.output + repr(result.exception)))
    for args in (
        ["runs", "note", record.run_id, f"deploy with {note}"],
        ["runs", "rename-experiment", record.experiment, f"renamed-{new_name}"],
        ["sync"],
    ):
        result = cli.invoke(app, args)
        assert result.exit_code == 0, result.output
        console.append((" ".join(args[:2]), result.output))

    # every byte stored
    for name, text in files_text(home):
        p.scan(f"local {name.split('/')[0]}", text)
    es_text = _es_documents(servers)
    p.scan("elasticsearch", es_text)
    s3 = s3_server.client()
    for obj in s3.list_objects_v2(Bucket=s3_bucket).get("Contents", []):
        body = s3.get_object(Bucket=s3_bucket, Key=obj["Key"])["Body"].read()
        p.scan("s3", obj["Key"] + "\n" + body.decode("utf-8", "replace"))
    # every byte served
    from tests.capture.test_planted_secrets import served_texts

    local = settings.model_copy(update={"es_url": None, "store": "local"})
    for store_name, served in (("local", local), ("elasticsearch", settings)):
        for where, text in served_texts(served, record.run_id, tmp_path / store_name, cli):
            p.scan(f"served {where}", text)
        for where, text in _more_cli(served, record.run_id, cli):
            p.scan(f"served {where}", text)
    out, err = capfd.readouterr()
    console.append(("this process", out + err))
    for where, text in console:
        p.scan(f"console {where}", text)

    print(p.report())
    assert not p.leaks, p.report()


def _es_documents(servers: dict[str, str]) -> str:
    from elasticsearch import Elasticsearch

    prefix = servers["WAREHOUSE_INDEX_PREFIX"]
    with Elasticsearch(servers["WAREHOUSE_ES_URL"]) as client:
        client.indices.refresh(index=f"{prefix}-*")
        hits = client.search(
            index=f"{prefix}-*", query={"match_all": {}}, size=10_000, expand_wildcards="all"
        ).body["hits"]["hits"]
    assert hits
    return json.dumps([h["_source"] for h in hits], ensure_ascii=False)


def _more_cli(settings: Any, run_id: str, cli: CliRunner) -> Any:
    from warehouse.cli import app

    env = {"WAREHOUSE_STORE": settings.store_engine}
    if settings.store_engine == "local":
        env["WAREHOUSE_ES_URL"] = ""
    for args in (
        ["query", "runs", "--format", "csv", "--limit", "0"],
        ["query", "show", run_id, "--format", "csv"],
        ["query", "samples", "--run", run_id, "--format", "csv"],
        ["query", "compare", run_id, run_id, "--format", "json"],
        ["query", "best", "--format", "json"],
        ["query", "leaderboard", "--format", "json"],
    ):
        result = cli.invoke(app, args, env=env)
        yield " ".join(args[:2]) + " " + args[-1], result.output


def _leaves(node: Any, path: str = "") -> Any:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, f"{path}[{index}]")
    else:
        yield path, node


def test_ordinary_values_of_a_run_are_kept_as_given(home: Path, tmp_path: Path) -> None:
    """The other error: nothing ordinary is redacted (hyper-parameters named after tokens,
    digests, ids, paths, model names, image data, prose about passwords)."""
    import pyarrow.parquet as pq

    import warehouse
    from tests.capture.fresh_secrets import ordinary_config, ordinary_texts
    from warehouse.settings import load

    rng = random.Random(SEED)
    config = ordinary_config(rng)
    texts = ordinary_texts(rng)
    tags = ["llama-3.1", "lr=3e-4", "sft", f"data-{config['data']['md5']}"]  # type: ignore[index]
    metrics = {"acc": 0.5, "tokens_per_second": 1200.0, "max_tokens": 3.0, "auth_rate": 0.2}
    rows = [
        {
            "sample_id": f"s{i}",
            "prompt": text,
            "token": text.split()[0],
            "tokens": text.split()[:4],
            "detail": {"token": text.split()[-1], "logprob": -0.5},
            "correct": i % 2,
        }
        for i, text in enumerate(texts)
    ]
    error = f"CUDA out of memory with max_tokens=4096 at commit {config['run']['commit']}"  # type: ignore[index]
    run = warehouse.start_run(
        experiment="llama3-8b-sft", config=config, settings=load(), cwd=tmp_path, tags=tags
    )
    run.log_metrics("val", metrics)
    run.log_samples("val", rows)
    try:
        raise ValueError(error)
    except ValueError as exc:
        record = run.end("failed", exc)

    changed = [
        (path, value, stored)
        for (path, value), (_, stored) in zip(_leaves(config), _leaves(record.config), strict=True)
        if value != stored
    ]
    stored_rows = pq.read_table(home / "samples" / record.run_id / "val.parquet").to_pylist()
    for row, stored_row in zip(rows, stored_rows, strict=True):
        changed += [
            (f"samples.{key}", value, stored_row[key])
            for key, value in row.items()
            if value != stored_row[key]
        ]
    changed += [("tags", tags, record.tags)] if sorted(tags) != record.tags else []
    changed += (
        [("metrics", metrics, record.metrics["val"])] if metrics != record.metrics["val"] else []
    )
    assert record.error is not None
    changed += [("error", error, record.error.message)] if record.error.message != error else []
    total = len(list(_leaves(config))) + len(rows) * (len(rows[0]) - 1) + 3
    print(f"false positives: {len(changed)} of {total} ordinary values changed")
    for item in changed:
        print("  FP", repr(item)[:240])
    assert changed == [], changed
