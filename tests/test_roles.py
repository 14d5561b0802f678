"""Least privilege (issue 14, item 19): `warehouse init --create-roles` and the MinIO user.

The Elasticsearch-API test server (noida-db) has no security API (``/_security/*`` answers
"no handler found"), so the roles are checked as documents and as requests the 9.x client
accepts (its signature of ``security.put_role``/``put_user`` is the API specification), and
`init --create-roles` is checked to stop with a clear error there. Against a real
Elasticsearch with security (WAREHOUSE_TEST_ES_URL with credentials) the same test creates
the roles and reads them back. The MinIO policy in docker-compose.yml is applied to the
test S3 server with its IAM enforcement on, and exercised with real requests.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest
from elasticsearch import Elasticsearch
from elasticsearch._sync.client.security import SecurityClient

from tests.servers import S3Server
from warehouse.objects.s3 import S3ObjectStore
from warehouse.stores.elastic_admin import reader_role, role_names, writer_role

REPO = Path(__file__).resolve().parents[1]
# what may never be granted to a client of the warehouse
FORBIDDEN_INDEX = {"all", "manage", "delete_index", "manage_ilm", "manage_data_stream_lifecycle"}


def test_the_writer_writes_and_creates_the_stream_but_cannot_delete_indices() -> None:
    role = writer_role("team-a")
    [grant] = role["indices"]
    assert grant["names"] == ["team-a-*"]  # the runs/samples aliases and indices, the stream
    privileges = set(grant["privileges"])
    assert {"write", "read"} <= privileges
    assert privileges & {"create_index", "auto_configure"}  # the steps data stream
    assert not privileges & FORBIDDEN_INDEX
    assert role["cluster"] == ["monitor"]  # no templates, no security, no settings
    assert "applications" not in role


def test_the_reader_only_reads_the_indices_and_the_kibana_space() -> None:
    role = reader_role("team-a", "ml")
    [grant] = role["indices"]
    assert grant["names"] == ["team-a-*"]
    assert set(grant["privileges"]) == {"read", "view_index_metadata"}
    [kibana] = role["applications"]
    assert kibana == {
        "application": "kibana-.kibana",
        "privileges": ["space_read"],
        "resources": ["space:ml"],
    }
    assert reader_role("p")["applications"][0]["resources"] == ["space:default"]
    assert not {p for c in role["cluster"] for p in [c] if c.startswith("manage")}


@pytest.mark.parametrize("kind", ["writer", "reader"])
def test_the_role_documents_are_requests_the_9x_client_accepts(kind: str) -> None:
    body = writer_role("p") if kind == "writer" else reader_role("p")
    # raises TypeError on a key the put-role API does not have
    inspect.signature(SecurityClient.put_role).bind(None, name=role_names("p")[kind], **body)
    inspect.signature(SecurityClient.put_user).bind(
        None, username="p-writer", password="secret-pw", roles=["p-writer"], full_name="x"
    )


def warehouse(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warehouse", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def _security_api(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_security/_authenticate", timeout=10) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def test_init_create_roles(
    es_url: str, es_env: dict[str, str], es_prefix: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("WAREHOUSE_ES_WRITER_PASSWORD", "writer-pw-1")
    monkeypatch.setenv("WAREHOUSE_ES_READER_PASSWORD", "reader-pw-1")
    proc = warehouse("init", "--create-roles", cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert "writer-pw-1" not in output
    if not _security_api(es_url):  # noida-db: no security API
        assert proc.returncode == 2, output
        assert "has no security API" in proc.stderr
        assert "xpack.security.enabled=true" in proc.stderr
        assert f"{es_prefix}-runs" in proc.stdout  # the templates step ran and was reported
        return
    assert proc.returncode == 0, output
    with Elasticsearch(es_url) as client:
        for kind, name in role_names(es_prefix).items():
            role = client.security.get_role(name=name).body[name]
            wanted = writer_role(es_prefix) if kind == "writer" else reader_role(es_prefix)
            assert role["indices"][0]["privileges"] == wanted["indices"][0]["privileges"]
            assert client.security.get_user(username=name).body[name]["roles"] == [name]
            client.security.delete_user(username=name)
            client.security.delete_role(name=name)


def test_a_short_password_is_refused_before_anything_is_sent(
    es_url: str, es_env: dict[str, str], es_prefix: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("WAREHOUSE_ES_WRITER_PASSWORD", "abc")
    proc = warehouse("init", "--create-roles", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "writer password is shorter than 6 characters" in proc.stderr
    with Elasticsearch(es_url) as client:  # not even the templates were installed
        assert not client.indices.exists_index_template(name=f"{es_prefix}-runs").body


def test_create_roles_needs_elasticsearch(tmp_path: Path) -> None:
    proc = warehouse("init", "--create-roles", cwd=tmp_path)
    assert proc.returncode == 2
    assert "set WAREHOUSE_ES_URL" in proc.stderr


# MinIO: the bucket-scoped policy of docker-compose.yml's setup-bucket service ------------------
def compose_policy(bucket: str) -> dict[str, Any]:
    """The policy document the setup-bucket service writes, for ``bucket``."""
    text = (REPO / "docker-compose.yml").read_text()
    match = re.search(r"printf '(\{\"Version\".*?\})'", text)
    assert match, "the setup-bucket service no longer writes the policy with printf"
    document: dict[str, Any] = json.loads(match.group(1).replace("%s", bucket))
    return document


@pytest.fixture
def bucket_user(s3_server: S3Server, s3_bucket: str) -> Iterator[tuple[str, str, str]]:
    """An IAM user holding only the compose policy for ``s3_bucket``; the server checks
    credentials and policies while the test runs (moto's IAM enforcement)."""
    if not s3_server.moto:
        pytest.fail("this test needs the moto S3 server (IAM enforcement)", pytrace=False)
    import boto3

    iam = boto3.session.Session().client(
        "iam",
        endpoint_url=s3_server.url,
        region_name=s3_server.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    user = f"wh-writer-{uuid.uuid4().hex[:12]}"
    iam.create_user(UserName=user)
    policy = compose_policy(s3_bucket)
    # moto checks a HEAD of the bucket as "s3:HeadBucket"; AWS and MinIO check s3:ListBucket,
    # which the policy grants (MinIO refuses a policy naming s3:HeadBucket, so it is not there)
    policy["Statement"].append(
        {"Effect": "Allow", "Action": "s3:HeadBucket", "Resource": f"arn:aws:s3:::{s3_bucket}"}
    )
    iam.put_user_policy(
        UserName=user, PolicyName="warehouse-bucket", PolicyDocument=json.dumps(policy)
    )
    key = iam.create_access_key(UserName=user)["AccessKey"]

    def set_auth(count: str) -> None:
        request = urllib.request.Request(
            f"{s3_server.url}/moto-api/reset-auth",
            data=count.encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200

    other = f"wh-other-{uuid.uuid4().hex[:12]}"
    s3_server.admin.create_bucket(Bucket=other)
    set_auth("0")
    try:
        yield key["AccessKeyId"], key["SecretAccessKey"], other
    finally:
        set_auth("inf")
        s3_server.admin.delete_bucket(Bucket=other)
        iam.close()


def test_the_minio_user_reads_and_writes_its_bucket_only(
    s3_server: S3Server, s3_bucket: str, bucket_user: tuple[str, str, str]
) -> None:
    import hashlib

    key_id, secret, other = bucket_user
    store = S3ObjectStore(
        s3_bucket,
        "warehouse",
        endpoint_url=s3_server.url,
        region=s3_server.region,
        access_key_id=key_id,
        secret_access_key=secret,
    )
    with store:
        assert store.ensure_bucket() is False  # exists: a HEAD is allowed, no CreateBucket
        digest = hashlib.sha256(b"weights").hexdigest()
        uri = store.put("exp/run/artifacts/model.bin", b"weights", content_type=None, sha256=digest)
        assert store.get(uri) == b"weights"
        assert store.exists(uri)
    client = s3_server.client(access_key_id=key_id, secret_access_key=secret)
    denied = []
    for attempt in (
        lambda: client.delete_object(Bucket=s3_bucket, Key="warehouse/exp/run/artifacts/model.bin"),
        lambda: client.list_objects_v2(Bucket=other),
        lambda: client.put_object(Bucket=other, Key="x", Body=b"x"),
        lambda: client.list_buckets(),
        lambda: client.delete_bucket(Bucket=s3_bucket),
    ):
        try:
            attempt()
        except botocore.exceptions.ClientError as exc:
            denied.append(exc.response["Error"]["Code"])
    assert denied == ["AccessDenied"] * 5
    client.close()
