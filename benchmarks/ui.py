"""Speed of ``warehouse ui`` on 10,000 runs: the overview's first request on a fresh server, its
refreshes, the first page in headless Chromium and the views' API calls warm. Targets: the
overview's first request <= 1 s on an idle machine (issue 29), first page ready <= 1 s, a view
API call <= 50 ms warm (issue 20).

    python benchmarks/ui.py                 # 10,000 runs (generated once, cached)
    python benchmarks/ui.py --runs 2000 --repeat 10
    python benchmarks/ui.py --no-browser    # the server's side only

The overview's first request is timed on ``--repeat`` fresh servers (a new store each: the
catalog mapped again; the operating system's file cache warm), beside two peers measured on the
same data in the same run: the CLI's leaderboard through the same front door
(``warehouse.query.api``, a fresh store each), and the overview as the report reads it (with
the slice heat map and the seed groups, which the UI overview used to compute and not show).
A refresh is timed with no run recorded since (the page asks every 5 s: no store read) and right
after one run was recorded. The catalog is compacted first, as the background compaction
leaves it after every 500 writes.

The warehouse is ``benchmarks/synthetic.py``'s (runs in 50 experiments; a few runs with
validation samples), cached under ``benchmarks/.cache/``. The server runs in this process
(a thread); each API call is a fresh HTTP request over a real socket. "Warm" = the median of
``--repeat`` calls after one warm-up call. The first page is timed from ``driver.get`` to the
page saying it has drawn its three charts (``body[data-ready=overview]``), with the server's
overview cache cold for the first load and warm for the others. Medians are printed with the
machine's load average (noise), as JSON too with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def timed_get(url: str) -> float:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as res:
        res.read()
        assert res.status == 200, url
    return (time.perf_counter() - began) * 1000


def api_medians(base: str, paths: dict[str, str], repeat: int) -> dict[str, dict[str, float]]:
    out = {}
    for name, path in paths.items():
        cold = timed_get(base + path)
        warm = [timed_get(base + path) for _ in range(repeat)]
        out[name] = {"cold_ms": round(cold, 1), "warm_median_ms": round(statistics.median(warm), 1)}
    return out


def _median(values: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(values), 1),
        "min_ms": round(min(values), 1),
        "max_ms": round(max(values), 1),
    }


def overview_first_requests(settings: Any, repeat: int) -> dict[str, Any]:
    """The first ``/api/overview`` of fresh servers, refreshes, and the peers (see above)."""
    from warehouse.query import api
    from warehouse.ui.server import close, serve_in_thread

    first = []
    for _ in range(repeat):
        server, _ = serve_in_thread(settings)
        try:
            first.append(timed_get(server.url + "api/overview"))
        finally:
            close(server)
    leaderboard, report = [], []
    for _ in range(repeat):
        began = time.perf_counter()
        api.leaderboard(settings=settings)
        leaderboard.append((time.perf_counter() - began) * 1000)
    for _ in range(max(1, repeat // 3)):
        began = time.perf_counter()
        api.overview(slices=True, replicates=True, settings=settings)
        report.append((time.perf_counter() - began) * 1000)
    server, _ = serve_in_thread(settings)
    try:
        url = server.url + "api/overview"
        timed_get(url)
        unchanged = [timed_get(url) for _ in range(repeat)]
        after_write, recorded = [], []
        for i in range(max(1, repeat // 3)):
            recorded.append(_record_one(settings, i))
            after_write.append(timed_get(url))
    finally:
        close(server)
    with api.connect(settings) as store:
        store.delete_runs(recorded)  # the cached data set stays as generated
    return {
        "first_request": _median(first),
        "refresh_unchanged": _median(unchanged),
        "refresh_after_a_run": _median(after_write),
        "peer_cli_leaderboard_fresh_store": _median(leaderboard),
        "peer_report_overview_fresh_store": _median(report),
    }


def _record_one(settings: Any, i: int) -> str:
    import warehouse

    with warehouse.start_run("bench-ui", {"seed": i}, settings=settings) as run:
        run.log_metrics("val", {"acc": 0.5})
    return run.run_id


def first_page(url: str, repeat: int) -> dict[str, Any]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        return {"skipped": "chromium/chromedriver not installed"}
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.support.ui import WebDriverWait
    except ImportError:
        return {"skipped": "selenium not installed (pip install selenium)"}
    options = Options()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1400"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    times = []
    try:
        for _ in range(repeat):
            driver.get("about:blank")
            began = time.perf_counter()
            driver.get(url)
            WebDriverWait(driver, 60).until(
                lambda d: d.execute_script("return document.body.dataset.ready") == "overview"
            )
            times.append((time.perf_counter() - began) * 1000)
    finally:
        driver.quit()
    return {
        "first_load_ms": round(times[0], 1),
        "warm_median_ms": round(statistics.median(times[1:] or times), 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--no-browser", action="store_true", help="leave out Chromium's page")
    args = parser.parse_args(argv)

    from synthetic import Shape, generate

    shape = Shape(runs=args.runs, sample_runs=10, samples=5_000)
    home = HERE / ".cache" / f"ui-{shape.slug()}"
    summary = generate(home, shape)
    os.environ["WAREHOUSE_HOME"] = str(home)
    os.environ["WAREHOUSE_CONSOLE"] = "0"
    from warehouse.settings import load
    from warehouse.stores.local import LocalStore
    from warehouse.ui.server import close, serve_in_thread

    with LocalStore(home) as store:
        store.compact()
    settings = load(cli={"store": "local", "capture_git_diff": False, "system_interval_s": 0})
    results: dict[str, Any] = {"runs": summary["runs"], "load_before": os.getloadavg()}
    results["overview"] = overview_first_requests(settings, args.repeat)
    server, _ = serve_in_thread(settings)
    base = server.url.rstrip("/")
    best = summary["best_run_id"]
    try:
        if not args.no_browser:
            results["first_page"] = first_page(server.url, max(3, args.repeat // 4))
        results["api"] = api_medians(
            base,
            {
                "overview": "/api/overview",
                "runs page": "/api/runs?metrics=val.acc",
                "runs filtered": "/api/runs?q=metrics.val.acc%3A%3E%3D0.9&sort=metrics.val.acc",
                "runs deep page": "/api/runs?sort=started_at%3Adesc&after="
                + urllib.request.quote(json.dumps(["2025-01-07T00:00:00Z", "f" + "0" * 31])),
                "run": f"/api/run?id={best}",
                "samples (worst first)": f"/api/samples?id={best}",
            },
            args.repeat,
        )
        results["load_after"] = os.getloadavg()
    finally:
        close(server)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"warehouse ui over {results['runs']:,} runs (load avg {results['load_before'][0]:.2f})")
    for name, row in results["overview"].items():
        print(
            f"  {name:<36} median {row['median_ms']:>8.1f} ms"
            f"  (min {row['min_ms']}, max {row['max_ms']})"
        )
    if "first_page" in results:
        print(f"  first page ready: {results['first_page']}")
    for name, row in results["api"].items():
        print(
            f"  {name:<24} warm median {row['warm_median_ms']:>7.1f} ms  (cold {row['cold_ms']} ms)"
        )
    print(f"  load avg after: {results['load_after'][0]:.2f}")


if __name__ == "__main__":
    main()
