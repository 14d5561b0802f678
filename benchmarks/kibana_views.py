"""The Kibana views at a team's shape and 100k runs — on the ES-API TEST SERVER, checked.

    python benchmarks/kibana_views.py                      # 12,000 and 100,000 runs
    python benchmarks/kibana_views.py --runs 100000 --shape sweep

Starts a noida-db (the ES-API test server the tests use) behind the tests' checking layer
(``tests/strict_es.py``: what Elasticsearch 9 refuses is refused, ``search.max_buckets``
included), bulk-loads ``tests/kibana/team_shape.py``'s data (300 experiments, sweeps of 300
configs, 50 slice labels; ``--shape sweep``: a pure hyper-parameter sweep, every run its own
config), then sends each overview view's request exactly as Kibana builds it (an empty query
bar, the last 90 days, the automatic interval) and prints per view: whether Elasticsearch's
limits hold (``refused``), the answer's buckets (against the 65,536 of
``search.max_buckets``), hits and bytes, the median time of ``--repeat`` calls after one
warm-up, and the rows the panel draws. For comparison it times the CLI's ``leaderboard`` on the
same store.

Times are the test server's, NOT Elasticsearch's: noida-db scans linearly and is far slower;
use them to compare the requests with each other and across sizes. The buckets, hits and
bytes are the answer's own and hold for Elasticsearch too. The machine's load average
(``os.getloadavg()``) is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VIEWS = ("experiments_ranked", "bias_variance", "best_over_time", "slices", "seeds")


def _median_ms(call: Any, repeat: int) -> float:
    call()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(es_url: str, runs: int, repeat: int, sweep: bool) -> dict[str, Any]:
    from elasticsearch import ApiError, Elasticsearch

    from tests.kibana.drawn import drawn
    from tests.kibana.team_shape import bulk_samples, team_data
    from tests.servers import es_settings
    from tests.strict_es import MAX_BUCKETS, count_buckets
    from warehouse.dashboards.kibana import OVERVIEW_PANELS, panel_pixels
    from warehouse.dashboards.vega import kibana_request, slices_spec_for_kibana, spec_for_kibana
    from warehouse.query import views
    from warehouse.stores import open_store
    from warehouse.stores.elastic import init_elasticsearch

    # the test server answers 100k-run writes and scans in seconds, not milliseconds
    settings = es_settings(es_url, "kb", es_timeout_s=600)
    init_elasticsearch(settings)
    data = team_data(runs, sweep_only=sweep)
    start = time.perf_counter()
    with open_store(settings) as store:
        for begin in range(0, len(data.runs), 5_000):
            store.write_runs(data.runs[begin : begin + 5_000])
    client = Elasticsearch(es_url, request_timeout=600)
    bulk_samples(client, f"{settings.index_prefix}-samples", data.samples)
    out: dict[str, Any] = {
        "runs": len(data.runs),
        "shape": "sweep" if sweep else "team",
        "experiments": len({r["experiment"] for r in data.runs}),
        "configs": len({r["config_hash_noseed"] for r in data.runs}),
        "samples": len(data.samples),
        "bulk_load_s": round(time.perf_counter() - start, 1),
        "max_buckets": MAX_BUCKETS,
        "views": {},
    }
    for view in VIEWS:
        if view == "slices":
            spec = slices_spec_for_kibana(settings.index_prefix)
        else:
            spec = spec_for_kibana("seed_replicates" if view == "seeds" else view,
                                   settings.index_prefix)  # fmt: skip
        index, body = kibana_request(spec["data"]["url"], *data.window)
        try:
            answer = client.search(index=index, body=body).body
        except ApiError as exc:
            out["views"][view] = {"refused": f"{exc.status_code} {exc.message}"}
            continue
        filled = {**spec, "data": {"values": answer, "format": spec["data"]["format"]}}
        picture = drawn(filled, panel_pixels(*OVERVIEW_PANELS[view][2:]))
        out["views"][view] = {
            "refused": None,
            "buckets": count_buckets(answer.get("aggregations")),
            "hits": len(answer["hits"]["hits"]),
            "answer_bytes": len(json.dumps(answer)),
            "median_ms": round(
                _median_ms(lambda i=index, b=body: client.search(index=i, body=b), repeat), 1
            ),
            "rows_drawn": None if view == "best_over_time" else len(picture.row_labels()),
            "legend_entries": len(picture.legend_labels()),
            "note": next((t for t in picture.mark_texts() if " shown" in t), None),
        }
    with open_store(settings) as store:
        out["cli_leaderboard_ms"] = round(
            _median_ms(lambda: views.leaderboard(store, "val.acc"), repeat), 1
        )
    client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[12_000, 100_000])
    parser.add_argument("--shape", choices=("team", "sweep"), default="team")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from tests.servers import NoidaServer, free_port
    from tests.strict_es import StrictProxy

    print("ES-API TEST SERVER (noida-db) figures, behind the checking layer — not Elasticsearch's.")
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        server = NoidaServer(port=free_port(), data_dir=Path(tmp) / "data")
        server.start()
        proxy = StrictProxy(server.url)
        proxy.start()
        try:
            for runs in args.runs:
                result = measure(proxy.url, runs, args.repeat, args.shape == "sweep")
                print(json.dumps(result, indent=2), flush=True)
        finally:
            proxy.stop()
            server.stop()
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
