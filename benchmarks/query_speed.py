"""Query speed of the embedded store, with MLflow 3.x beside it on the same 10,000 runs.

    python benchmarks/query_speed.py                     # everything (< 5 min, data cached)
    python benchmarks/query_speed.py --mlflow-python /path/to/venv/bin/python
    python benchmarks/query_speed.py --no-mlflow

What it does, in one run:

1. Generates the synthetic warehouse once (``benchmarks/synthetic.py``: 10,000 runs in 50
   experiments, 100 runs x 100,000 validation samples = 10M sample rows) under
   ``benchmarks/.cache/``, and reuses it afterwards.
2. Times the query views in-process on a warm ``LocalStore`` (median of ``--repeat`` calls
   after one warm-up) and once cold (a fresh store: catalog and sample file read from disk).
3. Times whole processes: ``warehouse --help`` and ``warehouse query leaderboard``
   (``benchmarks/cli_start.py``).
4. MLflow: loads the same 10,000 runs (params, final metrics, tags, times) into an MLflow
   sqlite tracking store, cached as ``benchmarks/.cache/mlflow-*/mlflow.db``, then times
   ``mlflow.search_runs`` over all experiments + a pandas groupby for the best run per
   experiment — the MLflow way to answer the leaderboard question. MLflow runs in a child
   process (this interpreter, or ``--mlflow-python``), so its pinned dependencies never mix
   with ours; "not installed" is printed when it cannot be imported there.

Loading 10,000 runs through MLflow's client API costs ~50 ms a run here (over 8 minutes),
so the cache is filled with MLflow's own SQLAlchemy models in one transaction: the same
tables and rows ``log_batch`` would write (runs, params, tags, metrics, latest_metrics).
The timed part — ``search_runs`` — is MLflow's public API, unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"

TARGETS_MS = {  # the team's targets (the issue's, in brackets, are looser: 20, 150, 800, 300)
    "leaderboard": 5.0,
    "best per experiment": 5.0,
    "samples --best --split val --sort pixel_acc --asc --limit 100": 10.0,
    "warehouse query leaderboard (process)": 800.0,
    "warehouse --help (process)": 200.0,
}


RUNS_FILTER = "experiment:vit-01 AND metrics.val.acc:>=0.7"


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def once_ms(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def warehouse_timings(home: Path, repeat: int) -> tuple[dict[str, float], dict[str, float]]:
    """(warm medians, cold first calls) in ms for each view over the synthetic warehouse."""
    from warehouse.query import views
    from warehouse.stores.local import LocalStore

    cases: dict[str, Callable[[Any], Any]] = {
        "leaderboard": lambda s: views.leaderboard(s, "val.acc", "max"),
        "best per experiment": lambda s: views.best(s, "val.acc", "max", per_experiment=True),
        "best run": lambda s: views.best(s, "val.acc", "max"),
        "decomposition": lambda s: views.decomposition(s, "val.acc", "max"),
        "samples --best --split val --sort pixel_acc --asc --limit 100": lambda s: list(
            views.samples(s, best=True, split="val", sort="pixel_acc", order="asc", limit=100)
        ),
        "runs -q 'experiment:vit-01 AND metrics.val.acc:>=0.7' -s metrics.val.acc -n 20": (
            lambda s: views.runs(s, RUNS_FILTER, ["metrics.val.acc"], 20)
        ),
        "over-time (10k runs, per run)": lambda s: views.over_time(s, "val.acc", "max"),
    }
    warm: dict[str, float] = {}
    cold: dict[str, float] = {}
    for name, case in cases.items():
        with LocalStore(home) as fresh:
            cold[name] = once_ms(lambda: case(fresh))  # noqa: B023
        with LocalStore(home) as store:
            runs = max(3, repeat // 5) if "over-time" in name else repeat
            warm[name] = median_ms(lambda: case(store), runs)  # noqa: B023
    return warm, cold


def csv_export(home: Path, run_id: str) -> dict[str, tuple[float, float]]:
    """(seconds, peak RSS MiB) of exporting 100 and all 100,000 samples of a run as CSV."""
    from cli_start import warehouse_command

    probe = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)\n"
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    env = {**os.environ, "WAREHOUSE_HOME": str(home), "PYTHONWARNINGS": "ignore"}
    out = {}
    for limit in ("100", "0"):
        argv = [
            *warehouse_command(),
            "query",
            "samples",
            "--run",
            run_id,
            "--split",
            "val",
            "--limit",
            limit,
            "--format",
            "csv",
        ]
        proc = subprocess.run(
            [sys.executable, "-c", probe, *argv],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        seconds, rss_kib = proc.stdout.split()
        out["all 100,000" if limit == "0" else "100"] = (float(seconds), int(rss_kib) / 1024)
    return out


# --- MLflow -----------------------------------------------------------------------------


def export_runs(home: Path, path: Path) -> None:
    """The synthetic runs as JSON lines, the input of the MLflow worker."""
    from warehouse.query import views
    from warehouse.stores.local import LocalStore

    with LocalStore(home) as store, path.open("w") as out:
        for doc in views.runs(store, limit=None):
            out.write(
                json.dumps(
                    {
                        k: doc.get(k)
                        for k in (
                            "run_id",
                            "experiment",
                            "status",
                            "started_at",
                            "ended_at",
                            "user",
                            "tags",
                            "params",
                            "metrics",
                        )
                    }
                )
                + "\n"
            )


def mlflow_timings(home: Path, slug: str, python: str, repeat: int) -> dict[str, Any]:
    """Run the MLflow side in a child interpreter; its JSON answer, or why there is none."""
    check = subprocess.run(
        [python, "-c", "import mlflow, pandas; print(mlflow.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    if check.returncode != 0:
        return {"error": "not installed"}
    folder = CACHE / f"mlflow-{slug}"
    folder.mkdir(parents=True, exist_ok=True)
    runs_file = folder / "runs.jsonl"
    if not (folder / "mlflow.db.ready").is_file():
        export_runs(home, runs_file)
    proc = subprocess.run(
        [python, __file__, "--mlflow-worker", str(folder), "--repeat", str(repeat)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore", "MLFLOW_TRACKING_URI": ""},
    )
    if proc.returncode != 0:
        return {"error": f"MLflow worker failed: {proc.stderr.strip()[-2000:]}"}
    answer: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    answer["version"] = check.stdout.strip()
    # whole process, like `warehouse query leaderboard`: start, import, one leaderboard, exit
    seconds = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run(
            [python, __file__, "--mlflow-worker", str(folder), "--repeat", "0"],
            capture_output=True,
            check=False,
            env={**os.environ, "PYTHONWARNINGS": "ignore", "MLFLOW_TRACKING_URI": ""},
        )
        seconds.append(time.perf_counter() - start)
    answer["process_s"] = statistics.median(seconds)
    return answer


def duckdb_best(home: Path) -> dict[str, Any]:
    """The independent answer: the best run per experiment by DuckDB over the store's own
    catalog Parquet (ties: earlier end, then smaller id), and the timing of that query."""
    try:
        import duckdb
    except ImportError:
        return {"error": "duckdb not installed (pip install -e '.[bench]')"}
    catalog = home / "catalog" / "runs.parquet"
    sql = f"""SELECT experiment, first(run_id ORDER BY "metrics.val.acc" DESC, ended_at, run_id),
        max("metrics.val.acc") FROM '{catalog}' WHERE isfinite("metrics.val.acc")
        GROUP BY experiment ORDER BY 3 DESC"""
    con = duckdb.connect()
    start = time.perf_counter()
    rows = con.execute(sql).fetchall()
    cold_ms = (time.perf_counter() - start) * 1000
    warm_ms = median_ms(lambda: con.execute(sql).fetchall(), 10)
    return {
        "bests": {str(e): str(r) for e, r, _ in rows},
        "best_run_id": str(rows[0][1]),
        "warm_ms": warm_ms,
        "cold_ms": cold_ms,
    }


def mlflow_worker(folder: Path, repeat: int) -> None:
    """(child process) Build the MLflow sqlite store once, then time search_runs + groupby."""
    import logging

    logging.disable(logging.WARNING)
    import mlflow

    db = folder / "mlflow.db"
    uri = f"sqlite:///{db}"
    ready = folder / "mlflow.db.ready"
    load_s = None
    if not ready.is_file():
        db.unlink(missing_ok=True)
        start = time.perf_counter()
        _load_mlflow(uri, folder / "runs.jsonl", folder / "artifacts")
        load_s = time.perf_counter() - start
        ready.write_text(json.dumps({"load_s": load_s}))
    mlflow.set_tracking_uri(uri)
    client = mlflow.MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments() if e.name != "Default"]

    def leaderboard() -> Any:
        df = mlflow.search_runs(experiment_ids=ids, max_results=50_000)
        scored = df.dropna(subset=["metrics.val_acc"])
        best = scored.loc[scored.groupby("experiment_id")["metrics.val_acc"].idxmax()]
        counts = df.groupby("experiment_id").size()
        return best.assign(run_count=best["experiment_id"].map(counts)).sort_values(
            "metrics.val_acc", ascending=False
        )

    first = time.perf_counter()
    board = leaderboard()
    first_ms = (time.perf_counter() - first) * 1000
    if repeat == 0:  # the whole-process measure: one answer, then exit
        return
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        leaderboard()
        times.append(time.perf_counter() - start)
    total = len(mlflow.search_runs(experiment_ids=ids, max_results=50_000))
    print(
        json.dumps(
            {
                "leaderboard_ms": statistics.median(times) * 1000,
                "first_ms": first_ms,
                "repeat": repeat,
                "runs": total,
                "experiments": len(ids),
                "best_run_id": board.iloc[0]["run_id"],
                "best_score": float(board.iloc[0]["metrics.val_acc"]),
                "load_s": load_s if load_s is not None else json.loads(ready.read_text())["load_s"],
            }
        )
    )


def _millis(stamp: str | None) -> int | None:
    if not stamp:
        return None
    from datetime import datetime

    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


def _load_mlflow(uri: str, runs_file: Path, artifacts: Path) -> None:
    """The runs written with MLflow's own tables and models, in one transaction."""
    from mlflow.store.tracking.dbmodels.models import (
        SqlLatestMetric,
        SqlMetric,
        SqlParam,
        SqlRun,
        SqlTag,
    )
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from sqlalchemy import insert

    store = SqlAlchemyStore(uri, artifacts.as_uri())  # type: ignore[no-untyped-call]
    docs = [json.loads(line) for line in runs_file.open()]
    experiments: dict[str, str] = {}
    for doc in docs:
        if doc["experiment"] not in experiments:
            name = doc["experiment"]
            experiments[name] = store.create_experiment(name)  # type: ignore[no-untyped-call]
    status = {
        "completed": "FINISHED",
        "failed": "FAILED",
        "running": "RUNNING",
        "interrupted": "KILLED",
    }
    runs, params, tags, metrics = [], [], [], []
    for doc in docs:
        run_id, exp = doc["run_id"], experiments[doc["experiment"]]
        start, end = _millis(doc["started_at"]), _millis(doc["ended_at"])
        runs.append(
            {
                "run_uuid": run_id,
                "name": run_id[:8],
                "source_type": "LOCAL",
                "source_name": "",
                "entry_point_name": "",
                "user_id": doc.get("user"),
                "status": status[doc["status"]],
                "start_time": start,
                "end_time": end,
                "source_version": "",
                "lifecycle_stage": "active",
                "artifact_uri": f"{artifacts.as_uri()}/{exp}/{run_id}",
                "experiment_id": int(exp),
            }
        )
        params += [
            {"key": k, "value": str(v), "run_uuid": run_id}
            for k, v in (doc.get("params") or {}).items()
        ]
        tags += [
            {"key": "mlflow.runName", "value": run_id[:8], "run_uuid": run_id},
            {"key": "mlflow.user", "value": doc.get("user") or "", "run_uuid": run_id},
            *(
                {"key": f"tag.{t}", "value": "true", "run_uuid": run_id}
                for t in doc.get("tags") or []
            ),
        ]
        for split, values in (doc.get("metrics") or {}).items():
            for name, value in values.items():
                metrics.append(
                    {
                        "key": f"{split}_{name}",
                        "value": value,
                        "timestamp": end or start,
                        "step": 0,
                        "is_nan": False,
                        "run_uuid": run_id,
                    }
                )
    with store.ManagedSessionMaker() as session:
        session.execute(insert(SqlRun.__table__), runs)
        session.execute(insert(SqlParam.__table__), params)
        session.execute(insert(SqlTag.__table__), tags)
        session.execute(insert(SqlMetric.__table__), metrics)
        session.execute(insert(SqlLatestMetric.__table__), metrics)


# --- report -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30, help="timed calls per measure")
    parser.add_argument(
        "--mlflow-python",
        default=sys.executable,
        help="interpreter with mlflow + pandas installed (default: this one)",
    )
    parser.add_argument("--no-mlflow", action="store_true", help="skip the MLflow side")
    parser.add_argument("--mlflow-worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mlflow_worker is not None:
        mlflow_worker(args.mlflow_worker, min(args.repeat, 5))
        return
    from warehouse.query import views
    from warehouse.stores.local import LocalStore

    sys.path.insert(0, str(HERE))
    from cli_start import measure
    from synthetic import Shape, generate

    began = time.perf_counter()
    shape = Shape()
    home = CACHE / "warehouse-full"
    summary = generate(home, shape)
    print(
        f"data: {summary['runs']:,} runs in {shape.experiments} experiments, "
        f"{summary['sample_rows']:,} sample rows  ({home})"
    )

    warm, cold = warehouse_timings(home, args.repeat)
    process = measure(home, repeat=5)
    export = csv_export(home, summary["best_run_id"])
    ml: dict[str, Any] = (
        {"error": "skipped (--no-mlflow)"}
        if args.no_mlflow
        else mlflow_timings(home, shape.slug(), args.mlflow_python, args.repeat)
    )

    print(
        f"\nwarehouse, in-process on a warm LocalStore (median of {args.repeat}; cold = "
        "first call on a fresh store)"
    )
    print(f"  {'query':<80} {'warm ms':>9} {'cold ms':>9} {'target':>8}")
    for name, ms in warm.items():
        target = TARGETS_MS.get(name)
        flag = "" if target is None else f"<= {target:.0f}"
        print(f"  {name:<80} {ms:9.2f} {cold[name]:9.1f} {flag:>8}")
    print("\nwhole process (median of 5)")
    for name, seconds in process.items():
        target = TARGETS_MS.get(f"{name} (process)")
        flag = "" if target is None else f"<= {target:.0f}"
        print(f"  {name:<80} {seconds * 1000:9.0f} {'':>9} {flag:>8}")
    print("\nstreamed CSV: warehouse query samples --run BEST --split val --format csv")
    for rows, (seconds, rss) in export.items():
        print(
            f"  --limit {'0' if rows.startswith('all') else rows:<5} ({rows} rows): "
            f"{seconds:.2f} s, peak RSS {rss:.0f} MiB"
        )

    print(f"\nbest per experiment over the same runs, load {os.getloadavg()[0]:.1f}")
    duck = duckdb_best(home)
    with LocalStore(home) as store:
        mine = {
            str(r["experiment"]): str(r["run_id"])
            for r in views.best(store, "val.acc", "max", per_experiment=True)
        }
    ours = warm["best per experiment"]
    if "error" in duck:
        print(f"  DuckDB: {duck['error']}; the warehouse's answer is not checked")
    else:
        print(
            f"  DuckDB over the same Parquet: warm {duck['warm_ms']:.2f} ms, cold "
            f"{duck['cold_ms']:.1f} ms; warehouse warm {ours:.2f} ms, cold "
            f"{cold['best per experiment']:.1f} ms"
        )
        print(f"  warehouse's answer equals DuckDB's: {'yes' if mine == duck['bests'] else 'NO'}")
    if "error" in ml:
        print(f"  MLflow: {ml['error']}")
    else:
        print(
            "  like with like (MLflow in-process figures are its own warm/first calls):\n"
            f"    warm  {ml['leaderboard_ms']:9.0f} ms vs {ours:8.2f} ms"
            f" -> {ml['leaderboard_ms'] / ours:,.0f}x\n"
            f"    cold  {ml['first_ms']:9.0f} ms vs {cold['best per experiment']:8.1f} ms"
            f" -> {ml['first_ms'] / cold['best per experiment']:,.0f}x\n"
            f"    whole process {ml['process_s']:.2f} s vs "
            f"{process['warehouse query leaderboard']:.2f} s"
            f" -> {ml['process_s'] / process['warehouse query leaderboard']:,.1f}x"
        )
        if "error" not in duck:
            print(
                "  MLflow's best run equals DuckDB's: "
                f"{'yes' if ml['best_run_id'] == duck['best_run_id'] else 'NO'}"
            )
        print(
            f"  MLflow {ml['version']} (sqlite): search_runs + pandas groupby: "
            f"{ml['leaderboard_ms']:.0f} ms (median of {ml['repeat']}; first call "
            f"{ml['first_ms']:.0f} ms; {ml['runs']:,} runs, {ml['experiments']} experiments; "
            f"store filled once in {ml['load_s']:.0f} s)"
        )
        same = ml["best_run_id"] == summary["best_run_id"]
        print(
            f"  MLflow's best run equals the generator's: {'yes' if same else 'NO'} "
            f"({ml['best_run_id']}, {ml['best_score']:.4f})"
        )
    print(f"\ntotal {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
