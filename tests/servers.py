"""Real servers for the tests: an Elasticsearch-API server and an S3 server (session fixtures).

Each server is started once per session on a free loopback port and stopped at the end.
"""

from __future__ import annotations

# ==== Elasticsearch-API server =================================================================
# A noida-db process (``noida-db start --only elasticsearch``) on a free 127.0.0.1 port for the
# whole session, or a real cluster when WAREHOUSE_TEST_ES_URL is set, always behind the checking
# layer of ``tests/strict_es.py`` (what Elasticsearch 9 refuses is refused). Each test gets its own
# index prefix (``es_prefix``) whose indices, stream and templates are deleted after it. A server
# that cannot start fails the run with its stderr, never skips. noida-db is not Elasticsearch:
# it is a local server speaking a subset of the Elasticsearch REST API (see test-servers.md).
import contextlib
import dataclasses
import functools
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.strict_es import StrictProxy

ES_START_TIMEOUT_S = 60.0


def free_port() -> int:
    """A TCP port nothing listens on right now (127.0.0.1)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def noida_executable() -> str | None:
    """The ``noida-db`` of the Python running the tests: beside ``sys.executable`` (a venv's
    ``bin/``, found even when the venv is not activated), else on ``PATH``."""
    import sys

    beside = Path(sys.executable).parent / "noida-db"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("noida-db")


@dataclasses.dataclass
class NoidaServer:
    """A noida-db Elasticsearch-API server the test controls: start, stop, start again."""

    port: int
    data_dir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it (same port and data) and wait until it answers; fail the test if not."""
        exe = noida_executable()
        if exe is None:
            pytest.fail(
                "noida-db is not installed: pip install 'results-warehouse[test]' (or set "
                "WAREHOUSE_TEST_ES_URL to a real Elasticsearch 9.x)",
                pytrace=False,
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir.parent / f"{self.data_dir.name}.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                exe,
                "start",
                "--only",
                "elasticsearch",
                "--elasticsearch-port",
                str(self.port),
                "--data-dir",
                str(self.data_dir),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + ES_START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                pytest.fail(
                    f"noida-db exited with {self.process.returncode} on port {self.port}: "
                    f"{self.log_tail()}",
                    pytrace=False,
                )
            if es_answers(self.url):
                return
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(
                    f"noida-db did not answer on {self.url} within {ES_START_TIMEOUT_S:.0f} s: "
                    f"{self.log_tail()}",
                    pytrace=False,
                )
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 10 s); the data directory stays.

        ``noida-db`` is a Python launcher that runs the server binary as its child: the
        signal goes to the whole process group (its own session), or the binary outlives it.
        """
        process, self.process = self.process, None
        if process is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(10)
                if not _group_alive(process.pid):
                    return
                time.sleep(0.2)
                if not _group_alive(process.pid):
                    return
            except subprocess.TimeoutExpired:
                continue

    def log_tail(self) -> str:
        path = self.data_dir.parent / f"{self.data_dir.name}.log"
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no output)"
        useful = [line for line in lines if "GLIBC_2.39" not in line]
        return " | ".join(useful[-15:]) or "(no output)"


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def es_answers(url: str) -> bool:
    """Whether an Elasticsearch-API server answers ``GET /`` at ``url``."""
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture(scope="session")
def strict_es(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StrictProxy]:
    """The checking layer of ``tests/strict_es.py`` in front of the session's Elasticsearch-API
    server (WAREHOUSE_TEST_ES_URL, else a noida-db we start): it refuses what Elasticsearch 9
    refuses and the test server lets through; ``.refused`` lists what it refused."""
    real = os.environ.get("WAREHOUSE_TEST_ES_URL")
    server = None
    if real:
        if not es_answers(real):
            pytest.fail(f"WAREHOUSE_TEST_ES_URL={real} does not answer GET /", pytrace=False)
        upstream = real.rstrip("/")
    else:
        server = NoidaServer(free_port(), tmp_path_factory.mktemp("noida") / "data")
        server.start()
        upstream = server.url
    proxy = StrictProxy(upstream)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
        if server is not None:
            server.stop()


@pytest.fixture(scope="session")
def es_url(strict_es: StrictProxy) -> str:
    """The session's Elasticsearch-API URL, always through the checking layer."""
    return strict_es.url


@pytest.fixture
def es_prefix(es_url: str) -> Iterator[str]:
    """A fresh index prefix for one test; its indices, stream and templates go afterwards."""
    prefix = f"t{uuid.uuid4().hex[:12]}"
    yield prefix
    wipe_prefix(es_url, prefix)


@pytest.fixture
def es_env(es_url: str, es_prefix: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """WAREHOUSE_ES_URL / WAREHOUSE_INDEX_PREFIX set for this test (store: elasticsearch)."""
    values = {"WAREHOUSE_ES_URL": es_url, "WAREHOUSE_INDEX_PREFIX": es_prefix}
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return values


@pytest.fixture
def private_es(tmp_path: Path) -> Iterator[NoidaServer]:
    """A noida-db of this test alone, NOT started: the test starts and stops it (outages)."""
    server = NoidaServer(free_port(), tmp_path / "private-noida")
    try:
        yield server
    finally:
        server.stop()


def es_settings(es_url: str, tag: str, **cli: Any) -> Any:
    """Settings for the Elasticsearch store at ``es_url`` under a fresh index prefix starting
    with ``tag`` (no console; ``cli`` adds or overrides settings)."""
    from warehouse.settings import load

    prefix = f"{tag}{uuid.uuid4().hex[:10]}"
    return load(
        cli={
            "store": "elasticsearch",
            "es_url": es_url,
            "index_prefix": prefix,
            "console": False,
            **cli,
        }
    )


def wipe_prefix(url: str, prefix: str) -> None:
    """Delete everything a test made under ``prefix`` (indices, data stream, templates)."""
    from elasticsearch import ApiError, Elasticsearch

    from warehouse.stores.elastic_templates import templates

    with Elasticsearch(url, request_timeout=60) as client:
        with contextlib.suppress(ApiError):
            client.indices.delete_data_stream(name=f"{prefix}-steps")
        with contextlib.suppress(ApiError):
            names = list(client.indices.get(index=f"{prefix}-*", expand_wildcards="all").body)
            for name in names:
                with contextlib.suppress(ApiError):
                    client.indices.delete(index=name)
        for template in reversed(templates(prefix)):
            with contextlib.suppress(ApiError):
                if template.kind == "index":
                    client.indices.delete_index_template(name=template.name)
                else:
                    client.cluster.delete_component_template(name=template.name)


# ==== S3 server ================================================================================
# A moto S3 server in a thread on a free 127.0.0.1 port for the whole session, or a real
# endpoint when WAREHOUSE_TEST_S3_URL is set (credentials from WAREHOUSE_TEST_S3_ACCESS_KEY_ID /
# WAREHOUSE_TEST_S3_SECRET_ACCESS_KEY). A server that cannot start fails the run, never skips.

_S3_START_TIMEOUT_S = 30.0


@dataclasses.dataclass(frozen=True)
class S3Server:
    """Where the test S3 server listens and the credentials it accepts."""

    url: str
    access_key_id: str
    secret_access_key: str
    region: str
    moto: bool  # our own moto server, whose IAM enforcement the tests can switch on

    @functools.cached_property
    def admin(self) -> Any:
        """One shared plain boto3 client with the server's credentials (fixtures, checks)."""
        return self.client()

    def client(self, **credentials: str) -> Any:
        """A new plain boto3 S3 client for checks from the outside (never used by the code)."""
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.url,
            region_name=self.region,
            aws_access_key_id=credentials.get("access_key_id", self.access_key_id),
            aws_secret_access_key=credentials.get("secret_access_key", self.secret_access_key),
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    def settings_env(self, bucket: str, prefix: str = "warehouse") -> dict[str, str]:
        """The WAREHOUSE_S3_* variables that point the warehouse at ``bucket``."""
        return {
            "WAREHOUSE_S3_URL": f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}",
            "WAREHOUSE_S3_ENDPOINT": self.url,
            "WAREHOUSE_S3_REGION": self.region,
            "WAREHOUSE_S3_ACCESS_KEY_ID": self.access_key_id,
            "WAREHOUSE_S3_SECRET_ACCESS_KEY": self.secret_access_key,
        }


def _start_moto() -> tuple[Any, str]:
    """A ThreadedMotoServer on a free port (port 0: the OS picks it, so no race)."""
    import logging
    import threading

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    failure: list[BaseException] = []

    def start() -> None:
        try:
            server.start()
        except BaseException as exc:  # reported below, in the test run
            failure.append(exc)

    starter = threading.Thread(target=start, daemon=True)
    starter.start()
    starter.join(_S3_START_TIMEOUT_S)
    if starter.is_alive() or failure:
        pytest.fail(
            f"the moto S3 server did not start within {_S3_START_TIMEOUT_S:.0f} s: "
            f"{failure[0] if failure else 'timed out'}",
            pytrace=False,
        )
    host, port = server.get_host_and_port()
    return server, f"http://{host}:{port}"


def _wait_s3_ready(server: S3Server) -> None:
    import time

    deadline = time.monotonic() + _S3_START_TIMEOUT_S
    client = server.admin
    while True:
        try:
            client.list_buckets()
            return
        except Exception as exc:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the S3 server at {server.url} does not answer ListBuckets: {exc}",
                    pytrace=False,
                )
            time.sleep(0.2)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """The S3 endpoint of the session (moto in a thread, or WAREHOUSE_TEST_S3_URL)."""
    real = os.environ.get("WAREHOUSE_TEST_S3_URL")
    moto = None
    if real:
        server = S3Server(
            url=real.rstrip("/"),
            access_key_id=os.environ.get("WAREHOUSE_TEST_S3_ACCESS_KEY_ID", ""),
            secret_access_key=os.environ.get("WAREHOUSE_TEST_S3_SECRET_ACCESS_KEY", ""),
            region=os.environ.get("WAREHOUSE_TEST_S3_REGION", "us-east-1"),
            moto=False,
        )
    else:
        moto, url = _start_moto()
        server = S3Server(url, "testing", "testing", "us-east-1", moto=True)
    try:
        _wait_s3_ready(server)
        yield server
    finally:
        if "admin" in vars(server):
            server.admin.close()
        if moto is not None:
            moto.stop()


@pytest.fixture(scope="session")
def s3_server_url(s3_server: S3Server) -> str:
    """``http://127.0.0.1:PORT`` of the session's S3 server."""
    return s3_server.url


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> Iterator[str]:
    """A fresh, empty bucket for one test; emptied and deleted afterwards."""
    name = f"wh-test-{uuid.uuid4().hex[:16]}"
    client = s3_server.admin
    client.create_bucket(Bucket=name)
    try:
        yield name
    finally:
        paginator = client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=name):
            keys = [{"Key": obj["Key"]} for obj in page.get("Contents", ())]
            if keys:
                client.delete_objects(Bucket=name, Delete={"Objects": keys})
        client.delete_bucket(Bucket=name)


@pytest.fixture
def s3_env(
    s3_server: S3Server, s3_bucket: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """WAREHOUSE_S3_* set for this test, pointing at a fresh bucket (prefix ``warehouse``)."""
    values = s3_server.settings_env(s3_bucket)
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return values


@dataclasses.dataclass(frozen=True)
class S3Credentials:
    """A key pair the S3 server accepts while it checks credentials."""

    access_key_id: str
    secret_access_key: str


@pytest.fixture
def s3_strict_auth(s3_server: S3Server, s3_bucket: str) -> Iterator[S3Credentials]:
    """The server checks credentials for this test; yields a key pair it accepts.

    moto accepts any key by default: here it turns on its IAM enforcement (``/moto-api/
    reset-auth``) after creating an IAM user with full S3 rights, and turns it off again after
    the test (before ``s3_bucket``, which it depends on, is deleted with the admin key). A real
    endpoint checks credentials anyway and yields the configured pair.
    """
    if not s3_server.moto:
        yield S3Credentials(s3_server.access_key_id, s3_server.secret_access_key)
        return
    full = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
    }
    with moto_user(s3_server, full) as credentials:
        yield credentials


@contextlib.contextmanager
def moto_user(
    s3_server: S3Server, policy: dict[str, Any], prefix: str = "wh-test"
) -> Iterator[S3Credentials]:
    """An IAM user of moto's with ``policy``, and moto's IAM enforcement on while it is used
    (every request then needs credentials moto knows; off again afterwards)."""
    import json
    import urllib.request

    import boto3

    iam = boto3.session.Session().client(
        "iam",
        endpoint_url=s3_server.url,
        region_name=s3_server.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    user = f"{prefix}-{uuid.uuid4().hex[:12]}"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="test", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=user)["AccessKey"]

    def set_auth(count: str) -> None:
        request = urllib.request.Request(
            f"{s3_server.url}/moto-api/reset-auth",
            data=count.encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},  # moto reads the body only then
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200, response.read()

    set_auth("0")  # every request from now on is authenticated
    try:
        yield S3Credentials(key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        set_auth("inf")
        iam.close()
        iam.close()
