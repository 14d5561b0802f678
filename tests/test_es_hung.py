"""CLI commands against an Elasticsearch that accepts connections and never answers (issue 14,
item 13): one timeout (WAREHOUSE_ES_TIMEOUT_S), never retried, then exit 3 with the reason.

The hung server is a real socket server in a thread: it accepts every connection, reads what
comes, and never writes a byte. The tests count its connections (one attempt per command, no
retry after a time-out) instead of reading the clock.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from warehouse.errors import StoreUnavailable
from warehouse.models import Run
from warehouse.replication.outbox import Outbox
from warehouse.settings import load
from warehouse.stores.elastic import MAX_RETRIES, ElasticStore

TIMEOUT = "0.5"  # WAREHOUSE_ES_TIMEOUT_S in these tests


class HungServer:
    """Accepts TCP connections on 127.0.0.1 and never answers; counts the connections."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self.accepted = 0
        self._stop = threading.Event()
        self._listener.settimeout(0.05)  # accept() wakes up to see the stop flag
        self._thread = threading.Thread(target=self._serve, name="hung-es", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            with self._lock:
                self.accepted += 1
                self._open.append(conn)  # kept open, never answered

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._listener.close()
        with self._lock:
            for conn in self._open:
                conn.close()


@pytest.fixture
def hung_es(monkeypatch: pytest.MonkeyPatch) -> Iterator[HungServer]:
    server = HungServer()
    monkeypatch.setenv("WAREHOUSE_ES_URL", server.url)
    monkeypatch.setenv("WAREHOUSE_ES_TIMEOUT_S", TIMEOUT)
    try:
        yield server
    finally:
        server.close()


def warehouse(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warehouse", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,  # a safety net for a regression, not a measurement
        check=False,
    )


@pytest.mark.parametrize(
    "command",
    [("status",), ("init",), ("query", "runs"), ("query", "leaderboard"), ("query", "best")],
)
def test_a_command_against_a_hung_elasticsearch_tries_once_and_exits_3(
    hung_es: HungServer, tmp_path: Path, command: tuple[str, ...]
) -> None:
    proc = warehouse(*command, cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 3, output
    # `status` shows the reason in an 80-column table, which wraps it across lines
    flat = "".join(output.split())
    assert f"didnotanswerwithin{TIMEOUT}s" in flat
    assert "WAREHOUSE_ES_TIMEOUT_S" in flat
    assert hung_es.url.split("//")[1] in flat
    assert hung_es.accepted == 1  # the timed-out request was not sent again


def test_sync_against_a_hung_elasticsearch_tries_once_and_keeps_the_records(
    hung_es: HungServer, home: Path, tmp_path: Path
) -> None:
    outbox = Outbox(home / "outbox")
    for _ in range(3):
        outbox.add("run", {"doc": Run(experiment="hung").to_doc()})
    proc = warehouse("sync", "--quiet", cwd=tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert f"did not answer within {TIMEOUT} s" in output
    assert hung_es.accepted == 1  # found hung once: the other records were not tried
    assert outbox.count() == 3


def test_the_library_raises_store_unavailable_after_one_attempt(hung_es: HungServer) -> None:
    store = ElasticStore(hung_es.url, client_options={"request_timeout": 0.3})
    with pytest.raises(StoreUnavailable, match=r"did not answer within 0\.3 s"):
        store.server_info()
    assert hung_es.accepted == 1


def test_the_client_is_built_with_the_timeout_and_no_retry_after_a_timeout(
    es_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAREHOUSE_ES_URL", es_url)
    settings = load()
    with ElasticStore.from_settings(settings) as store:
        client = store.client  # connects to the test server
        assert client._request_timeout == settings.es_timeout_s
        assert client._retry_on_timeout is False
        assert client._max_retries == MAX_RETRIES
        backoff = sum(min(1.0, 0.25 * 2**n) for n in range(MAX_RETRIES))
        # against a hung server: one timeout; refused connections: the retries' pauses only
        assert settings.es_timeout_s + 1.0 <= 5.0  # room for the interpreter's start-up
        assert backoff < 1.0


def test_training_runs_of_one_process_wait_on_a_hung_server_once(
    hung_es: HungServer, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warehouse
    from warehouse.replication import remotes

    monkeypatch.setenv("WAREHOUSE_SYSTEM_INTERVAL_S", "0")
    try:
        for n in range(3):  # three jobs of a sweep, each with its own recorder
            with warehouse.start_run(experiment="hung") as run:
                run.log_metrics("val", {"acc": n / 10})
            assert run.record.status == "completed"
    finally:
        remotes.HUNG.pop(hung_es.url, None)
    assert hung_es.accepted == 1  # found hung by the first run; the others only queued
    assert Outbox(home / "outbox").count() >= 3
