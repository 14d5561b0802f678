"""Randomized crashes (issue 25): recorders, a shipper and `sync` run together while SIGKILL
lands at seeded moments and Elasticsearch and S3 go down and up. Used by
``tests/test_random_crashes.py`` (CI size) and ``benchmarks/random_crashes.py`` (larger).

The servers are real (noida-db, moto's S3 server); each sits behind a :class:`Gate`, a TCP
forwarder the schedule closes (connection refused, open connections cut) and opens again,
which is what a server going down looks like to a client, without the seconds a restart
costs. Every random choice (how long a recorder lives before its SIGKILL, when a gate flips,
when `sync` runs and whether it is killed too) comes from one seeded ``random.Random``: the
same seed gives the same schedule. What each kill interrupts depends on the machine's speed;
the assertions hold for every interruption.

Afterwards (:func:`settle` then :func:`compare`): every remote record is also local; after
`sync` the two sides hold the same content (run documents by digest, sample rows by digest,
step seqs, object bytes); no record twice; and `sync --verify` finds nothing to repair.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

RECORDER = r"""
import os, sys, warehouse
slot = sys.argv[1]
n = 0
while True:
    n += 1
    with warehouse.start_run(f"chaos-{slot}", {"slot": slot, "n": n}) as run:
        print("started", run.run_id, flush=True)
        rows = [{"sample_id": str(i), "loss": i / 7, "ok": i % 3 == 0} for i in range(60)]
        rows[0]["output"] = f"output of {run.run_id}".encode()
        run.log_samples("val", rows)
        for step in range(15):
            run.log_step(step, loss=1.0 / (step + 1))
        run.log_artifact(os.urandom(64), name="model.bin")
        for k in range(40):  # a new version of the run each time, as heartbeats write it
            run.log_metrics("val", {"acc": k / 40})
            run.save()
"""

SAVER = r"""
import sys, warehouse
with warehouse.start_run(f"chaos-{sys.argv[1]}") as run:
    print("started", run.run_id, flush=True)
    for k in range(10_000):  # nothing but new versions of the run: kills land in writes
        run.log_metrics("val", {"acc": k / 10_000})
        run.save()
"""


class Gate:
    """A TCP forwarder in front of ``upstream`` (host, port) that can be closed and opened."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.port = _free_port()
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.open()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def open(self) -> None:
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(128)
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def close(self) -> None:
        """Down: new connections are refused, open ones cut."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    @property
    def is_open(self) -> bool:
        return self._listener is not None

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # closed meanwhile
                    client.close()
                    server.close()
                    return
                self._conns.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Chaos:
    """One randomized run: ``kills`` SIGKILLs of recorders in ``slots`` concurrent slots."""

    home: Path
    env: dict[str, str]  # the WAREHOUSE_* settings every process gets (through the gates)
    gates: list[Gate]
    seed: int
    slots: int = 3
    kills: int = 40
    life_s: tuple[float, float] = (0.05, 1.2)  # how long a recorder records before its kill
    repo: Path = REPO  # the code the processes run (another checkout: to compare versions)

    def run(self) -> dict[str, int]:
        """The schedule, until ``kills`` recorders were killed; what happened, counted."""
        rng = random.Random(self.seed)
        plans = [random.Random(rng.random()) for _ in range(self.slots + 2)]
        done = threading.Event()
        counts = {"kills": 0, "crashed": 0, "outages": 0, "syncs": 0, "syncs_killed": 0}
        lock = threading.Lock()

        def recorder_slot(slot: int, plan: random.Random) -> None:
            while not done.is_set():
                proc = self._spawn([sys.executable, "-c", RECORDER, str(slot)])
                assert proc.stdout is not None
                started = proc.stdout.readline()  # the first run opened: past the imports
                if started.startswith("started"):
                    time.sleep(plan.uniform(*self.life_s))
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
                proc.stdout.close()
                with lock:
                    if proc.returncode == -signal.SIGKILL and started:
                        counts["kills"] += 1
                    else:  # died by itself: a bug the test reports (stderr in the log)
                        counts["crashed"] += 1
                    if counts["kills"] >= self.kills or counts["crashed"] > 3:
                        done.set()

        def outages(plan: random.Random) -> None:
            while not done.wait(plan.uniform(0.3, 1.5)):
                gate = self.gates[plan.randrange(len(self.gates))]
                if gate.is_open:
                    gate.close()
                    counts["outages"] += 1
                else:
                    gate.open()

        def syncs(plan: random.Random) -> None:
            while not done.wait(plan.uniform(3.0, 8.0)):
                proc = self._spawn([sys.executable, "-m", "warehouse", "sync", "-q"])
                if plan.random() < 0.3:  # killed mid-drain now and then
                    time.sleep(plan.uniform(0.1, 0.6))
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)
                    counts["syncs_killed"] += 1
                proc.communicate()
                counts["syncs"] += 1

        threads = [
            threading.Thread(target=recorder_slot, args=(slot, plans[slot]), daemon=True)
            for slot in range(self.slots)
        ]
        threads.append(threading.Thread(target=outages, args=(plans[-2],), daemon=True))
        threads.append(threading.Thread(target=syncs, args=(plans[-1],), daemon=True))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for gate in self.gates:
            gate.open()
        return counts

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "warehouse", *args],
            env=self._env(),
            cwd=self.home.parent,  # not this checkout: PYTHONPATH picks the code
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    def _spawn(self, argv: list[str]) -> subprocess.Popen[str]:
        with open(self.home.parent / "chaos-stderr.log", "a") as errors:
            return subprocess.Popen(
                argv,
                env=self._env(),
                cwd=self.home.parent,
                stdout=subprocess.PIPE,
                stderr=errors,
                stdin=subprocess.DEVNULL,
                text=True,
            )

    def _env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.home.parent),
            "PYTHONPATH": str(self.repo),
            "WAREHOUSE_HOME": str(self.home),
            "WAREHOUSE_CONSOLE": "0",
            "WAREHOUSE_SYSTEM_INTERVAL_S": "0",
            **self.env,
        }


def kill_until_ahead(chaos: Chaos, limit: int = 200) -> tuple[str, str, int]:
    """SIGKILL recorders at the schedule's moments until one dies with an outbox entry of a
    run version its local copy lacks (killed between the entry and the local write); that
    run's id and version, and how many kills it took."""
    import json

    rng = random.Random(chaos.seed)
    for kills in range(1, limit + 1):
        proc = chaos._spawn([sys.executable, "-c", SAVER, "0"])
        assert proc.stdout is not None
        proc.stdout.readline()
        time.sleep(rng.uniform(*chaos.life_s))
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        for path in sorted((chaos.home / "outbox").glob("[0-9]*")):  # entries, no tmp file
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if entry.get("kind") != "run":
                continue
            doc = entry["payload"]["doc"]
            run_file = chaos.home / "runs" / f"{doc['run_id']}.json"
            local = json.loads(run_file.read_text())["updated_at"] if run_file.exists() else ""
            if local < doc["updated_at"]:
                return doc["run_id"], doc["updated_at"], kills
    raise AssertionError(f"no kill of {limit} landed between an entry and its local write")


def settle(chaos: Chaos) -> tuple[subprocess.CompletedProcess[str], ...]:
    """Every server up: `sync` (until it ships everything), then `sync --verify`."""
    synced = chaos.cli("sync", "-q")
    for _ in range(3):
        if synced.returncode == 0:
            break
        synced = chaos.cli("sync", "-q")  # a server just back may still refuse a first try
    return synced, chaos.cli("sync", "--verify")


def compare(home: Path, es_url: str, prefix: str, s3: Any, bucket: str) -> dict[str, Any]:
    """Local against remote, by content: what each side holds that the other lacks or holds
    differently, and any record held twice."""
    from warehouse.objects.local import LocalObjectStore, sha256_of
    from warehouse.stores import doc_digest
    from warehouse.stores.base import RunQuery, StepRange
    from warehouse.stores.elastic import ElasticStore
    from warehouse.stores.local import LocalStore
    from warehouse.stores.local_samples import split_digests
    from warehouse.stores.row_digest import RowDigest

    out: dict[str, Any] = {"remote_only": [], "local_only": [], "divergent": [], "twice": []}
    local = LocalStore(home)
    objects = LocalObjectStore(home / "objects")
    remote = ElasticStore(es_url, prefix=prefix)
    try:
        mine = {d["run_id"]: d for d in local.search_runs(RunQuery(limit=None))}
        theirs = remote.search_runs(RunQuery(limit=None))
        ids = [d["run_id"] for d in theirs]
        out["twice"] += sorted({r for r in ids if ids.count(r) > 1})
        theirs_by_id = {d["run_id"]: d for d in theirs}
        out["remote_only"] += [f"run {r}" for r in sorted(set(theirs_by_id) - set(mine))]
        out["local_only"] += [f"run {r}" for r in sorted(set(mine) - set(theirs_by_id))]
        for run_id in sorted(set(mine) & set(theirs_by_id)):
            if doc_digest.digest(mine[run_id]) != doc_digest.digest(theirs_by_id[run_id]):
                out["divergent"].append(f"run {run_id}: document")
                out.setdefault("documents", []).append((mine[run_id], theirs_by_id[run_id]))
            for split in sorted(mine[run_id].get("sample_counts") or {}):
                path = home / "samples" / run_id / f"{split}.parquet"
                _, here, _ = split_digests(path)
                there = RowDigest().update(remote.sample_batches(run_id, split))
                if here.hexdigest() != there.hexdigest():
                    out["divergent"].append(f"run {run_id}: samples {split}")
                if remote.count_records("samples", run_id=run_id, split=split) != here.rows:
                    out["twice"].append(f"run {run_id}: samples {split}")
            steps_here = [s["seq"] for s in local.steps(StepRange(run_id=run_id))]
            steps_there = [s["seq"] for s in remote.steps(StepRange(run_id=run_id))]
            if sorted(steps_here) != sorted(steps_there):
                out["divergent"].append(f"run {run_id}: steps")
            if len(steps_there) != len(set(steps_there)):
                out["twice"].append(f"run {run_id}: steps")
        keys_here = set()
        for run_id, doc in mine.items():
            keys_here.update(objects.keys(f"{doc['experiment']}/{run_id}/"))
        listed = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="warehouse/")
        keys_there = {
            o["Key"].removeprefix("warehouse/") for page in listed for o in page.get("Contents", ())
        }
        out["remote_only"] += [f"object {k}" for k in sorted(keys_there - keys_here)]
        out["local_only"] += [f"object {k}" for k in sorted(keys_here - keys_there)]
        for key in sorted(keys_here & keys_there):
            body = s3.get_object(Bucket=bucket, Key=f"warehouse/{key}")["Body"].read()
            if hashlib.sha256(body).hexdigest() != sha256_of(objects.path_of(key)):
                out["divergent"].append(f"object {key}")
        out["runs"] = len(mine)
    finally:
        local.close()
        remote.close()
    return out


__all__ = ["Chaos", "Gate", "compare", "settle"]
