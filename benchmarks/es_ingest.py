"""Bulk ingestion of sample documents into Elasticsearch: client-side encode rate, end to end.

1. **Encode** (no server): 1,000,000 sample rows (sample_id, 4 numbers, a boolean, label,
   prediction, output_uri) as Arrow record batches of 65,536 rows are turned into bulk
   request bodies exactly as ``ElasticStore.write_samples`` does (column-wise Arrow kernels,
   ``warehouse.stores.elastic_bulk.sample_items`` + chunking into request bodies), on one core.
   Beside it, the usual way for comparison: one dict per row + ``json.dumps`` per document
   and per action line (what ``helpers.bulk`` with the default serializer costs).
   Target: >= 200,000 docs/s, so that serialization is never the bottleneck.
2. **End to end**: ``ElasticStore.write_samples`` of ``--e2e-docs`` rows into a server, docs/s
   from the first request to the final refresh. By default against a ``noida-db`` started on a
   free port: **noida-db is not Elasticsearch** (a local server speaking part of its REST API,
   ~10k docs/s, linear scans) — the figure says how fast the test server takes them, not what
   Elasticsearch would do. ``--es-url`` measures a real cluster instead.

Medians over ``--repeats`` runs are printed.

    python benchmarks/es_ingest.py                       # 1M encode, 200k end to end (~1 min)
    python benchmarks/es_ingest.py --e2e-docs 1000000    # the full million against noida-db
    python benchmarks/es_ingest.py --es-url http://localhost:9200 --username elastic --password ...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pyarrow as pa

from warehouse.stores.elastic import ElasticStore
from warehouse.stores.elastic_bulk import MAX_CHUNK_BYTES, MAX_CHUNK_DOCS, _Items, sample_items

BATCH_ROWS = 65_536


def make_batches(rows: int, seed: int = 0) -> list[pa.RecordBatch]:
    """Synthetic per-sample results, as a segmentation/classification run would log them."""
    import numpy as np

    rng = np.random.default_rng(seed)
    batches = []
    for start in range(0, rows, BATCH_ROWS):
        n = min(BATCH_ROWS, rows - start)
        ids = np.arange(start, start + n)
        label = rng.integers(0, 10, n)
        prediction = np.where(rng.random(n) < 0.9, label, rng.integers(0, 10, n))
        batches.append(
            pa.record_batch(
                {
                    "sample_id": pa.array(ids.astype(str)),
                    "pixel_acc": rng.random(n),
                    "loss": rng.exponential(0.5, n),
                    "confidence": rng.random(n),
                    "iou": rng.random(n),
                    "correct": label == prediction,
                    "label": pa.array(np.char.add("class_", label.astype(str))),
                    "prediction": pa.array(np.char.add("class_", prediction.astype(str))),
                    "output_uri": pa.array(
                        np.char.add(
                            np.char.add("s3://bucket/exp/run/outputs/val/", ids.astype(str)), ".png"
                        )
                    ),
                }
            )
        )
    return batches


def encode_arrow(batches: list[pa.RecordBatch]) -> tuple[int, int]:
    """Docs and bytes of the bulk bodies the store builds (column-wise)."""
    docs = size = 0
    for batch in batches:
        items = _Items(
            sample_items(
                batch, "bench-samples", "r" * 32, "exp", "val", "2026-01-01T00:00:00Z", docs
            )
        )
        for start, end in items.chunks(MAX_CHUNK_DOCS, MAX_CHUNK_BYTES):
            size += len(items.body(start, end))
        docs += len(batch)
    return docs, size


def encode_dicts(batches: list[pa.RecordBatch]) -> tuple[int, int]:
    """The same bodies the usual way: a dict per row, json.dumps per document and action."""
    dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
    docs = size = 0
    for batch in batches:
        for row in batch.to_pylist():
            row.update(
                run_id="r" * 32, experiment="exp", split="val", recorded_at="2026-01-01T00:00:00Z"
            )
            head = dumps(
                {
                    "index": {
                        "_index": "bench-samples",
                        "_id": f"{row['run_id']}:val:{row['sample_id']}",
                    }
                }
            )
            size += len(head) + len(dumps(row)) + 2
            docs += 1
    return docs, size


def timed(fn: object, *args: object) -> tuple[float, tuple[int, int]]:
    started = time.perf_counter()
    result = fn(*args)  # type: ignore[operator]
    return time.perf_counter() - started, result


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def noida() -> Iterator[str]:
    """A noida-db on a free port in a temporary folder, stopped afterwards."""
    exe = shutil.which("noida-db")
    if exe is None:
        sys.exit("noida-db is not installed (pip install noida-db) — or pass --es-url")
    port = _free_port()
    with tempfile.TemporaryDirectory() as folder:
        process = subprocess.Popen(
            [
                exe,
                "start",
                "--only",
                "elasticsearch",
                "--elasticsearch-port",
                str(port),
                "--data-dir",
                folder,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(url, timeout=2):
                        break
                except OSError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        sys.exit("noida-db did not start")
                    time.sleep(0.1)
            yield url
        finally:  # noida-db's launcher runs the server as a child: stop the whole group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            process.wait(30)


def end_to_end(
    url: str, batches: list[pa.RecordBatch], repeats: int, options: dict[str, object]
) -> list[float]:
    rates = []
    prefix = f"bench{uuid.uuid4().hex[:8]}"
    with ElasticStore(url, prefix=prefix, client_options=options) as store:
        store.install()
        rows = sum(len(b) for b in batches)
        for repeat in range(repeats):
            started = time.perf_counter()
            written = store.write_samples(f"run{repeat}", "bench", "val", batches)
            elapsed = time.perf_counter() - started
            assert written == rows
            rates.append(rows / elapsed)
            print(
                f"  end to end, repeat {repeat + 1}: {rows:,} docs in {elapsed:.1f} s"
                f" = {rows / elapsed:,.0f} docs/s"
            )
        client = store.client
        for kind in ("samples", "runs"):
            with contextlib.suppress(Exception):
                client.indices.delete(index=f"{prefix}-{kind}-000001")
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1_000_000, help="rows for the encode figure")
    parser.add_argument("--e2e-docs", type=int, default=200_000, help="rows written to the server")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--es-url", help="a real Elasticsearch instead of a noida-db we start")
    parser.add_argument("--username")
    parser.add_argument("--password", default=os.environ.get("ES_PASSWORD"))
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the dict+json.dumps figure"
    )
    args = parser.parse_args()

    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if cores:
        os.sched_setaffinity(0, {min(cores)})  # encode on one core, as the target says
    batches = make_batches(args.docs)
    print(f"encode: {args.docs:,} sample rows, batches of {BATCH_ROWS:,}, one core")
    arrow_rates, dict_rates = [], []
    for repeat in range(args.repeats):
        elapsed, (docs, size) = timed(encode_arrow, batches)
        arrow_rates.append(docs / elapsed)
        print(
            f"  column-wise (the store), repeat {repeat + 1}: {docs / elapsed:,.0f} docs/s,"
            f" {size / docs:.0f} bytes/doc"
        )
        if not args.no_baseline:
            elapsed, (docs, _) = timed(encode_dicts, batches)
            dict_rates.append(docs / elapsed)
            print(f"  dict + json.dumps, repeat {repeat + 1}: {docs / elapsed:,.0f} docs/s")

    if cores:
        os.sched_setaffinity(0, cores)  # the server we start may use every core
    e2e_batches = make_batches(args.e2e_docs, seed=1)
    options: dict[str, object] = {}
    if args.username:
        options["basic_auth"] = (args.username, args.password or "")
    if args.es_url:
        print(f"end to end: {args.e2e_docs:,} docs into {args.es_url}")
        e2e = end_to_end(args.es_url, e2e_batches, args.repeats, options)
        server = "Elasticsearch at " + args.es_url
    else:
        with noida() as url:
            print(f"end to end: {args.e2e_docs:,} docs into noida-db at {url} (NOT Elasticsearch)")
            e2e = end_to_end(url, e2e_batches, args.repeats, options)
        server = "noida-db (the test server, not Elasticsearch)"

    print("\nmedians")
    print(
        f"  encode, column-wise (ElasticStore):   {statistics.median(arrow_rates):>12,.0f} docs/s"
        "  (target >= 200,000)"
    )
    if dict_rates:
        print(
            f"  encode, dict + json.dumps (baseline): {statistics.median(dict_rates):>12,.0f}"
            " docs/s"
        )
    print(f"  end to end into {server}: {statistics.median(e2e):,.0f} docs/s")


if __name__ == "__main__":
    main()
