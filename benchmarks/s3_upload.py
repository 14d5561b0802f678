"""Uploading many small model outputs: ``S3ObjectStore.put_many`` against one-by-one put_object.

The workload of a run that stores one output per validation sample: 1,000 files of 10 KB.
Each repeat uploads them twice under fresh prefixes (so nothing is skipped as a duplicate):
once with a loop of plain boto3 ``put_object`` calls (the baseline), once with ``put_many``
(a thread pool over one shared client; one folder listing instead of a HEAD per new key).
Reported: files/s of each (median over the repeats) and their ratio; the issue's target is
at least 5x.

By default it starts moto's S3 server in a separate process on a free port (a separate
process, as a real server would be: in-process, client and server would share one GIL).
``--endpoint``/``--bucket`` measure a real MinIO/S3 instead (credentials from the AWS chain
or ``--access-key-id``/``--secret-access-key``).

    python benchmarks/s3_upload.py                      # 1,000 x 10 KB, 3 repeats, moto
    python benchmarks/s3_upload.py --files 200 --repeats 1
    python benchmarks/s3_upload.py --endpoint http://localhost:9000 --bucket bench
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from warehouse.objects.s3 import BATCH_CONCURRENCY, S3ObjectStore


@dataclass(frozen=True)
class Endpoint:
    url: str
    bucket: str
    region: str
    access_key_id: str | None
    secret_access_key: str | None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a moto S3 server in a child process, stopped at the end."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"moto server did not start on port {port}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def make_files(folder: Path, count: int, size: int) -> list[tuple[Path, str]]:
    """``count`` files of ``size`` random bytes, with their sha256."""
    files = []
    for i in range(count):
        data = os.urandom(size)
        path = folder / f"{i:05d}.png"
        path.write_bytes(data)
        files.append((path, hashlib.sha256(data).hexdigest()))
    return files


def one_by_one(client: Any, bucket: str, prefix: str, files: list[tuple[Path, str]]) -> float:
    """Seconds for a loop of plain put_object calls (content type and sha256 metadata set)."""
    started = time.perf_counter()
    for path, sha in files:
        client.put_object(
            Bucket=bucket,
            Key=f"{prefix}/exp/run/outputs/val/{path.name}",
            Body=path.read_bytes(),
            ContentType="image/png",
            Metadata={"sha256": sha},
        )
    return time.perf_counter() - started


def concurrent(store: S3ObjectStore, files: list[tuple[Path, str]], workers: int) -> float:
    """Seconds for one put_many of every file."""
    items = [(f"exp/run/outputs/val/{p.name}", p, "image/png", sha) for p, sha in files]
    started = time.perf_counter()
    store.put_many(items, concurrency=workers)
    return time.perf_counter() - started


def run(endpoint: Endpoint, args: argparse.Namespace) -> dict[str, Any]:
    client = boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint.url,
        region_name=endpoint.region,
        aws_access_key_id=endpoint.access_key_id,
        aws_secret_access_key=endpoint.secret_access_key,
        config=Config(
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )
    if args.create_bucket:
        client.create_bucket(Bucket=endpoint.bucket)
    run_tag = uuid.uuid4().hex[:8]
    serial_s: list[float] = []
    many_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="s3-bench-") as tmp:
        files = make_files(Path(tmp), args.files, args.size)
        for repeat in range(args.repeats):
            base = f"bench-{run_tag}-{repeat}"
            store = S3ObjectStore(
                endpoint.bucket,
                f"{base}/many",
                endpoint_url=endpoint.url,
                region=endpoint.region,
                access_key_id=endpoint.access_key_id,
                secret_access_key=endpoint.secret_access_key,
                batch_concurrency=args.concurrency,
            )
            with store:
                store.put("warmup", b"", content_type=None, sha256=hashlib.sha256().hexdigest())
                client.head_bucket(Bucket=endpoint.bucket)  # both clients connected: no setup timed
                # alternate the order so neither side always runs on a warmer server
                if repeat % 2 == 0:
                    serial_s.append(one_by_one(client, endpoint.bucket, f"{base}/serial", files))
                    many_s.append(concurrent(store, files, args.concurrency))
                else:
                    many_s.append(concurrent(store, files, args.concurrency))
                    serial_s.append(one_by_one(client, endpoint.bucket, f"{base}/serial", files))
            print(
                f"repeat {repeat + 1}/{args.repeats}: one-by-one {args.files / serial_s[-1]:.0f} "
                f"files/s, put_many {args.files / many_s[-1]:.0f} files/s",
                file=sys.stderr,
            )
    client.close()
    serial_rate = args.files / statistics.median(serial_s)
    many_rate = args.files / statistics.median(many_s)
    return {
        "files": args.files,
        "size_bytes": args.size,
        "repeats": args.repeats,
        "concurrency": args.concurrency,
        "server": "moto (child process)" if args.endpoint is None else endpoint.url,
        "cpus": os.cpu_count(),
        "one_by_one_files_per_s": round(serial_rate, 1),
        "put_many_files_per_s": round(many_rate, 1),
        "speedup": round(many_rate / serial_rate, 2),
        "target_speedup": 5.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--size", type=int, default=10 * 1024, help="bytes per file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=BATCH_CONCURRENCY)
    parser.add_argument("--endpoint", help="a real S3/MinIO endpoint instead of moto")
    parser.add_argument("--bucket", default="warehouse-bench")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--access-key-id")
    parser.add_argument("--secret-access-key")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)

    with contextlib.ExitStack() as stack:
        if args.endpoint is None:
            url = stack.enter_context(moto_server())
            args.create_bucket = True
            endpoint = Endpoint(url, args.bucket, args.region, "bench", "bench")
        else:
            args.create_bucket = False
            endpoint = Endpoint(
                args.endpoint, args.bucket, args.region, args.access_key_id, args.secret_access_key
            )
        result = run(endpoint, args)

    print(f"{'':<24}{'files/s':>10}")
    print(f"{'one-by-one put_object':<24}{result['one_by_one_files_per_s']:>10.0f}")
    print(f"{'put_many':<24}{result['put_many_files_per_s']:>10.0f}")
    print(
        f"speedup {result['speedup']:.2f}x (target >= 5x) on {result['cpus']} CPUs, "
        f"{result['files']} x {result['size_bytes']} B, median of {result['repeats']}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
