"""Issue 14 item 16: every outbox entry that waits says its own reason — never the error of
another run's S3 object, and never "cannot reach Elasticsearch" for an entry no server could
take (an unknown kind)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import S3Credentials, S3Server, free_port, moto_user
from warehouse.models import Run
from warehouse.replication import open_recording
from warehouse.settings import Settings, load


def _s3_settings(server: S3Server, bucket: str, **cli: str) -> Settings:
    env = server.settings_env(bucket)
    values = {k.removeprefix("WAREHOUSE_").lower(): v for k, v in env.items()}
    return load(cli={**values, **cli})


def _put_two_objects(settings: Settings, tmp_path: Path) -> dict[str, str]:
    """An object of run-a and one of run-b, waiting in the outbox: key per run."""
    rec = open_recording(settings)
    keys = {}
    for run in ("run-a", "run-b"):
        payload = f"weights of {run}".encode()
        source = tmp_path / f"{run}.bin"
        source.write_bytes(payload)
        keys[run] = key = f"exp/{run}/artifacts/model.bin"
        rec.shipper.outbox.add(
            "object",
            {"key": key, "content_type": None, "sha256": hashlib.sha256(payload).hexdigest()},
        )
        rec.shipper.local_objects.put(
            key, source, content_type=None, sha256=hashlib.sha256(payload).hexdigest()
        )
    rec.close()
    return keys


def _reasons(settings: Settings) -> dict[str, str]:
    rec = open_recording(settings)
    report = rec.shipper.drain()
    rec.close()
    assert report is not None
    return {str(e.payload.get("key")): reason for e, reason in report.failed}


def test_with_s3_down_each_object_waits_with_a_reason_about_itself(
    home: Path, s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    down = _s3_settings(s3_server, s3_bucket, s3_endpoint=f"http://127.0.0.1:{free_port()}")
    keys = _put_two_objects(down, tmp_path)
    reasons = _reasons(down)
    assert sorted(reasons) == sorted(keys.values())
    for run, key in keys.items():
        other = "run-b" if run == "run-a" else "run-a"
        assert run in reasons[key], reasons[key]
        assert other not in reasons[key], reasons[key]


@pytest.fixture
def denied_for_run_b(s3_server: S3Server, s3_bucket: str) -> Iterator[S3Credentials]:
    """Credentials S3 accepts for every object but run-b's (a per-object refusal): an IAM
    user of moto's, with moto's IAM enforcement on for this test (as ``s3_strict_auth``)."""
    if not s3_server.moto:
        pytest.fail("this test needs the moto S3 server's IAM enforcement")
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
            {
                "Effect": "Deny",
                "Action": "s3:PutObject",
                "Resource": f"arn:aws:s3:::{s3_bucket}/warehouse/exp/run-b/*",
            },
        ],
    }
    with moto_user(s3_server, policy) as credentials:
        yield credentials


def test_an_object_s3_refuses_does_not_lend_its_error_to_another_runs_object(
    home: Path,
    s3_server: S3Server,
    s3_bucket: str,
    denied_for_run_b: S3Credentials,
    tmp_path: Path,
) -> None:
    settings = _s3_settings(
        s3_server,
        s3_bucket,
        s3_access_key_id=denied_for_run_b.access_key_id,
        s3_secret_access_key=denied_for_run_b.secret_access_key,
    )
    keys = _put_two_objects(settings, tmp_path)
    reasons = _reasons(settings)
    assert list(reasons) == [keys["run-b"]]  # run-a's object shipped; only run-b's waits
    assert "run-b" in reasons[keys["run-b"]]
    reader = s3_server.client(
        access_key_id=denied_for_run_b.access_key_id,
        secret_access_key=denied_for_run_b.secret_access_key,
    )
    body = reader.get_object(Bucket=s3_bucket, Key=f"warehouse/{keys['run-a']}")
    assert body["Body"].read() == b"weights of run-a"


def test_an_entry_of_unknown_kind_is_reported_as_such_even_with_elasticsearch_down(
    home: Path,
) -> None:
    settings = load(cli={"es_url": f"http://127.0.0.1:{free_port()}", "index_prefix": "wh"})
    rec = open_recording(settings)
    rec.shipper.outbox.add("run", {"doc": Run(experiment="x").to_doc()})  # finds ES down
    folder = rec.shipper.outbox.folder
    entry = {"version": 2, "kind": "frobnicate", "created_ns": 9, "payload": {"x": 1}}
    unknown = folder / "99999999999999999999-1-cafecafe.json"  # the newest: shipped last
    unknown.write_text(json.dumps(entry) + "\n")
    before = unknown.read_bytes()
    report = rec.shipper.drain()
    rec.close()
    assert report is not None
    reasons = {e.path.name: reason for e, reason in report.failed}
    assert "unknown kind 'frobnicate'" in reasons[unknown.name]
    assert "reach" not in reasons[unknown.name]
    (run_entry,) = [r for name, r in reasons.items() if name != unknown.name]
    assert "127.0.0.1" in run_entry  # the run entry: Elasticsearch really is down
    assert unknown.read_bytes() == before  # never rewritten: the newer version can ship it
