"""Planted secrets: each kind, put where a user would put it, appears nowhere the warehouse
writes — the local folder (outbox included), Elasticsearch, S3 and the console.

The run is recorded while Elasticsearch and S3 are unreachable, so every record waits in the
outbox (and is searched there), then shipped to the real test servers and searched again.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import git
import pyarrow.parquet as pq
import pytest
from elasticsearch import Elasticsearch
from typer.testing import CliRunner

from tests.servers import S3Server, free_port
from warehouse.replication import open_recording
from warehouse.settings import load
from warehouse.stores.elastic import init_elasticsearch

AWS_SECRET = "Pl4ntedXyzUvwKey/abcdefghijKLMNOP+qrstuv"
assert len(AWS_SECRET) == 40
PLANTED = {
    # kind: (the text planted, the secret part that must never be seen)
    "bearer": ("Bearer PlantedBearer0123456789xyz", "PlantedBearer0123456789xyz"),
    "connection string": (
        "Server=db;Database=x;User Id=u;Password=PlantedConnPw77;",
        "PlantedConnPw77",
    ),
    "stripe": ("sk_live_PlantedStripe0123456789", "PlantedStripe0123456789"),
    "hugging face": ("hf_PlantedHuggingFace0123456789ab", "PlantedHuggingFace0123456789ab"),
    "github": ("ghp_PlantedGitHub0123456789abcdefghijk", "PlantedGitHub0123456789abcdefghijk"),
    "aws key id": ("AKIAPLANTED012345678", "AKIAPLANTED012345678"),
    "aws secret": (AWS_SECRET, AWS_SECRET),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.PlantedJwtSignature42",
        "eyJzdWIiOiJwbGFudGVkIn0",
    ),
    "cookie": ("Cookie: sessionid=PlantedCookie12345; theme=dark", "PlantedCookie12345"),
    "private key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAPlantedPemBody99\n"
        "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAPlantedPemBody99",
    ),
}
ENV_SECRET = "PlantedEnvDbPass99"  # DB_PASS: an environment secret quoted in an error
TAG_SECRET = "PlantedTagToken123"
FLAG_SECRETS = ("PlantedFlagPassword1", "PlantedFlagApiKey2")
DIFF_SECRETS = ("PlantedDotenvOld", "PlantedDotenvNew", "PlantedYamlOld1", "PlantedYamlNew2")
EVERY_SECRET = [
    *(secret for _, secret in PLANTED.values()),
    ENV_SECRET,
    TAG_SECRET,
    *FLAG_SECRETS,
    *DIFF_SECRETS,
]


def make_project(folder: Path) -> Path:
    """A git project whose tracked ``.env`` and ``config.yaml`` get new secrets, uncommitted."""
    folder.mkdir()
    repo = git.Repo.init(folder, initial_branch="main")
    with repo.config_writer() as config:
        config.set_value("user", "name", "Test")
        config.set_value("user", "email", "test@example.com")
        config.set_value("commit", "gpgsign", "false")
    (folder / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={DIFF_SECRETS[0]}\nDEBUG=1\n")
    (folder / "config.yaml").write_text(f"lr: 0.1\ndb:\n  password: {DIFF_SECRETS[2]}\n")
    (folder / "train.py").write_text("print('train')\n")
    repo.index.add([".env", "config.yaml", "train.py"])
    repo.index.commit("initial")
    (folder / ".env").write_text(f"AWS_SECRET_ACCESS_KEY={DIFF_SECRETS[1]}\nDEBUG=1\n")
    (folder / "config.yaml").write_text(f"lr: 0.2\ndb:\n  password: {DIFF_SECRETS[3]}\n")
    (folder / "train.py").write_text("print('train')\nprint('more')\n")
    repo.close()
    return folder


def found_in_folder(folder: Path) -> dict[str, list[str]]:
    """Secret -> the files under ``folder`` holding it (Parquet read as its values)."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix == ".parquet":
            text = json.dumps(pq.read_table(path).to_pylist(), default=str)
        else:
            text = path.read_bytes().decode("utf-8", errors="replace")
        for secret in EVERY_SECRET:
            if secret in text:
                found.setdefault(secret, []).append(str(path.relative_to(folder)))
    return found


@pytest.fixture
def servers(
    es_url: str, es_prefix: str, s3_server: S3Server, s3_bucket: str, home: Path
) -> dict[str, Any]:
    env = s3_server.settings_env(s3_bucket)
    s3 = {k.removeprefix("WAREHOUSE_").lower(): v for k, v in env.items()}
    return {"es_url": es_url, "index_prefix": es_prefix, **s3}


def test_no_planted_secret_reaches_any_store_or_the_console(
    servers: dict[str, Any],
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    import warehouse
    from warehouse.watch import watch

    monkeypatch.setenv("DB_PASS", ENV_SECRET)
    project = make_project(tmp_path / "project")
    monkeypatch.chdir(project)
    down = load(
        cli={
            **servers,
            "es_url": f"http://127.0.0.1:{free_port()}",
            "s3_endpoint": f"http://127.0.0.1:{free_port()}",
            "system_interval_s": 0,
            "console": True,
        }
    )
    config = {
        "headers": {"x": PLANTED["bearer"][0]},
        "dsn": PLANTED["connection string"][0],
        "keys": [PLANTED["stripe"][0], PLANTED["hugging face"][0], PLANTED["github"][0]],
        "aws": {"id": PLANTED["aws key id"][0], "other": AWS_SECRET},
        "jwt": PLANTED["jwt"][0],
        "request": PLANTED["cookie"][0],
        "deploy": PLANTED["private key"][0],
    }
    run = warehouse.start_run(
        experiment="planted",
        config=config,
        settings=down,
        cwd=project,
        tags=[f"token={TAG_SECRET}", PLANTED["hugging face"][0]],
    )
    run.log_metrics("val", {"acc": 0.5})
    run.set_tags(PLANTED["github"][0])
    try:
        raise RuntimeError(
            f"cannot connect with {ENV_SECRET} as {PLANTED['jwt'][0]} "
            f"({PLANTED['connection string'][0]})"
        )
    except RuntimeError as exc:
        run.end("failed", exc)
    code = watch(
        [
            sys.executable,
            "-c",
            "print('val_acc: 0.5')",
            "--password",
            FLAG_SECRETS[0],
            f"--api-key={FLAG_SECRETS[1]}",
        ],
        settings=down,
    )
    assert code == 0
    record = run.record
    assert record.git.dirty is True
    assert record.git.redacted_files == [".env", "config.yaml"]  # both recorded as redacted
    assert record.error is not None
    assert "***" in record.error.message
    outbox = open_recording(down)
    assert outbox.shipper.outbox.count() > 0  # everything waits: searched there below
    outbox.close()
    assert found_in_folder(home) == {}

    up = load(cli={**servers, "system_interval_s": 0})
    init_elasticsearch(up)
    recording = open_recording(up)
    report = recording.shipper.drain()
    recording.close()
    assert report is not None
    assert report.complete
    with Elasticsearch(servers["es_url"]) as client:
        client.indices.refresh(index=f"{servers['index_prefix']}-*")
        hits = client.search(
            index=f"{servers['index_prefix']}-*", query={"match_all": {}}, size=1000
        ).body["hits"]["hits"]
    es_text = json.dumps([h["_source"] for h in hits])
    assert '"planted"' in es_text  # the runs are there ...
    assert [s for s in EVERY_SECRET if s in es_text] == []  # ... and no secret

    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=servers["s3_endpoint"],
        region_name=servers["s3_region"],
        aws_access_key_id=servers["s3_access_key_id"],
        aws_secret_access_key=servers["s3_secret_access_key"],
    )
    bucket = servers["s3_url"].removeprefix("s3://").split("/", 1)[0]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert any(k.endswith("git.diff") for k in keys)
    s3_text = "".join(
        s3.get_object(Bucket=bucket, Key=k)["Body"].read().decode("utf-8", "replace") for k in keys
    )
    assert [s for s in EVERY_SECRET if s in s3_text] == []

    from warehouse.cli import app

    shown = CliRunner().invoke(app, ["query", "show", record.run_id, "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert record.run_id in shown.output
    out, err = capfd.readouterr()
    console = out + err + shown.output
    assert [s for s in EVERY_SECRET if s in console] == []
    assert found_in_folder(home) == {}
