"""`warehouse sync` of model outputs that waited in the outbox while S3 was down (issue 16).

    python benchmarks/sync_objects.py                  # 2,000 outputs of 10 KB, 3 repeats
    python benchmarks/sync_objects.py --outputs 4308 --repeats 1

Each repeat records one run with ``--outputs`` per-sample outputs (``run.log_output``) into a
fresh warehouse whose S3 endpoint is a closed port, so every object waits in the outbox.
Then a moto S3 server (a separate process, as a real server would be) is started and
``warehouse sync`` runs as a fresh process, the way a user types it. Printed: objects/s of
the whole command (median over the repeats), the objects found in the bucket afterwards
(checked: all of them), and the load average. The target is ≥ 300 objects/s against the
test server; peer in the same run: one-by-one ``put_object`` of the same files.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
from botocore.config import Config

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from s3_upload import _free_port, moto_server  # noqa: E402

BUCKET = "sync-bench"
RECORD = """
import os, sys
from warehouse.recording.recorder import start_run
run = start_run(experiment="sync-bench", config={})
size = int(sys.argv[2])
for i in range(int(sys.argv[1])):
    run.log_output("val", f"s{i}", os.urandom(size), "image/png")
run.end()
"""


def _env(home: Path, endpoint: str) -> dict[str, str]:
    return dict(
        os.environ,
        WAREHOUSE_HOME=str(home),
        WAREHOUSE_CONSOLE="0",
        WAREHOUSE_S3_URL=f"s3://{BUCKET}/wh",
        WAREHOUSE_S3_ENDPOINT=endpoint,
        WAREHOUSE_S3_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
    )


def _client(url: str) -> object:
    return boto3.session.Session().client(
        "s3",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(s3={"addressing_style": "path"}),
    )


def _count(client: object, prefix: str) -> int:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)  # type: ignore[attr-defined]
    return sum(page.get("KeyCount", 0) for page in pages)


def one_repeat(url: str, outputs: int, size: int, tmp: Path) -> tuple[float, float, int]:
    home = tmp / f"wh-{time.monotonic_ns()}"
    dead = f"http://127.0.0.1:{_free_port()}"
    subprocess.run(
        [sys.executable, "-c", RECORD, str(outputs), str(size)],
        env=_env(home, dead),
        check=True,
        capture_output=True,
    )
    client = _client(url)
    before = _count(client, "wh/")
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "warehouse", "sync"],
        env=_env(home, url),
        capture_output=True,
        text=True,
    )
    sync_s = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"warehouse sync failed ({proc.returncode}): {proc.stderr[-2000:]}")
    shipped = _count(client, "wh/") - before
    # the peer: the same number of objects put one by one with boto3
    files = [os.urandom(size) for _ in range(outputs)]
    started = time.perf_counter()
    for i, data in enumerate(files):
        client.put_object(Bucket=BUCKET, Key=f"peer/{home.name}/{i}.png", Body=data)  # type: ignore[attr-defined]
    peer_s = time.perf_counter() - started
    return sync_s, peer_s, shipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", type=int, default=2000)
    parser.add_argument("--size", type=int, default=10_240)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    syncs: list[float] = []
    peers: list[float] = []
    with moto_server() as url, tempfile.TemporaryDirectory(prefix="sync-bench-") as tmp:
        _client(url).create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
        for repeat in range(args.repeats):
            sync_s, peer_s, shipped = one_repeat(url, args.outputs, args.size, Path(tmp))
            if shipped < args.outputs:
                raise SystemExit(f"only {shipped} of {args.outputs} objects reached the bucket")
            syncs.append(sync_s)
            peers.append(peer_s)
            print(
                f"repeat {repeat + 1}/{args.repeats}: sync {args.outputs / sync_s:6.0f} objects/s "
                f"({sync_s:.2f} s, {shipped} objects in the bucket); "
                f"one-by-one put_object {args.outputs / peer_s:6.0f} objects/s"
            )
    sync_rate = args.outputs / statistics.median(syncs)
    peer_rate = args.outputs / statistics.median(peers)
    print(
        f"warehouse sync, whole process: {sync_rate:.0f} objects/s (target >= 300); "
        f"one-by-one put_object: {peer_rate:.0f} objects/s; ratio {sync_rate / peer_rate:.1f}x; "
        f"{args.outputs} x {args.size} B, {os.cpu_count()} CPUs, "
        f"load {load_before:.2f} -> {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
