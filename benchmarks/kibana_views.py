"""Cost of the Kibana views' requests at 10k and 100k runs — on the ES-API TEST SERVER.

    python benchmarks/kibana_views.py                    # 10,000 runs
    python benchmarks/kibana_views.py --runs 10000 100000

Starts a noida-db (the ES-API test server the tests use), bulk-loads synthetic runs
(``tests/kibana/test_scale.py``'s generator: old experiments plus late runs that beat them),
then times each view's request exactly as Kibana builds it (``%context%`` with a Lucene query
bar, a 90-day ``%timefield%`` range, the automatic interval): the median of ``--repeat`` calls
after one warm-up, with the answer's size (buckets, bytes) — the O(experiments)/O(buckets)
part. For comparison it also times the CLI's ``leaderboard`` and ``over-time`` on the same
store (the latter pages through every run).

These are the test server's figures, NOT Elasticsearch's: noida-db scans linearly and is far
slower than Elasticsearch; use them to compare the requests with each other and across sizes.
The machine's load average (``os.getloadavg()``) is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VIEWS = ("experiments_ranked", "bias_variance", "best_over_time")


def _median_ms(call: Any, repeat: int) -> float:
    call()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(es_url: str, runs: int, repeat: int) -> dict[str, Any]:
    from elasticsearch import Elasticsearch

    from tests.kibana.test_scale import CONTEXT, NOW, SPAN, cli_filter, make_runs
    from warehouse.dashboards.vega import kibana_request, spec_for_kibana
    from warehouse.query import views
    from warehouse.settings import load
    from warehouse.stores import open_store
    from warehouse.stores.elastic import init_elasticsearch

    settings = load(
        cli={
            "store": "elasticsearch",
            "es_url": es_url,
            "index_prefix": f"kb{uuid.uuid4().hex[:8]}",
            "console": False,
            # the test server answers 100k-run writes and scans in seconds, not milliseconds
            "es_timeout_s": 600,
        }
    )
    init_elasticsearch(settings)
    docs = make_runs(runs)
    start = time.perf_counter()
    with open_store(settings) as store:
        for begin in range(0, len(docs), 5_000):
            store.write_runs(docs[begin : begin + 5_000])
    load_s = time.perf_counter() - start
    client = Elasticsearch(es_url, request_timeout=600)
    out: dict[str, Any] = {"runs": runs, "bulk_load_s": round(load_s, 1), "views": {}}
    for view in VIEWS:
        spec = spec_for_kibana(view, settings.index_prefix)
        index, body = kibana_request(spec["data"]["url"], NOW - SPAN, NOW, CONTEXT)
        answer = client.search(index=index, body=body).body
        agg = next(iter(answer["aggregations"].values()))
        out["views"][view] = {
            "median_ms": round(
                _median_ms(lambda i=index, b=body: client.search(index=i, body=b), repeat), 1
            ),
            "buckets": len(agg["buckets"]),
            "answer_bytes": len(json.dumps(answer)),
        }
    with open_store(settings) as store:
        out["cli_leaderboard_ms"] = round(
            _median_ms(
                lambda: views.leaderboard(store, "val.acc", filter=cli_filter("started_at")),
                repeat,
            ),
            1,
        )
        out["cli_over_time_ms"] = round(
            _median_ms(lambda: views.over_time(store, "val.acc", filter=cli_filter("ended_at")), 1),
            1,
        )
    client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[10_000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from tests.servers import NoidaServer, free_port

    print("ES-API TEST SERVER (noida-db) figures — not Elasticsearch's.")
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        server = NoidaServer(port=free_port(), data_dir=Path(tmp) / "data")
        server.start()
        try:
            for runs in args.runs:
                print(json.dumps(measure(server.url, runs, args.repeat), indent=2))
        finally:
            server.stop()
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
