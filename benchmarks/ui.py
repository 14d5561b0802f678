"""Speed of ``warehouse ui`` on 10,000 runs: the first page in headless Chromium and the views'
API calls warm. Targets (issue 20): first page ready <= 1 s, a view API call <= 50 ms warm.

    python benchmarks/ui.py                 # 10,000 runs (generated once, cached)
    python benchmarks/ui.py --runs 2000 --repeat 10

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
    args = parser.parse_args(argv)

    from synthetic import Shape, generate

    shape = Shape(runs=args.runs, sample_runs=10, samples=5_000)
    home = HERE / ".cache" / f"ui-{shape.slug()}"
    summary = generate(home, shape)
    os.environ["WAREHOUSE_HOME"] = str(home)
    os.environ["WAREHOUSE_CONSOLE"] = "0"
    from warehouse.settings import load
    from warehouse.ui.server import close, serve_in_thread

    server, _ = serve_in_thread(load(cli={"store": "local"}))
    base = server.url.rstrip("/")
    best = summary["best_run_id"]
    try:
        results: dict[str, Any] = {"runs": summary["runs"], "load_before": os.getloadavg()}
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
    print(f"  first page ready: {results['first_page']}")
    for name, row in results["api"].items():
        print(
            f"  {name:<24} warm median {row['warm_median_ms']:>7.1f} ms  (cold {row['cold_ms']} ms)"
        )
    print(f"  load avg after: {results['load_after'][0]:.2f}")


if __name__ == "__main__":
    main()
