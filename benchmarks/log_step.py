"""What logging a training step costs: ours next to tensorboardX, MLflow and a JSON print.

    python benchmarks/log_step.py            # everything (about a minute)
    python benchmarks/log_step.py --quick    # fewer repeats

Three measurements, in one process, on the same machine, side by side:

1. **Per-call cost on the training thread** — median over blocks of calls of
   ``log_step(step, loss=...)``: our ``StepLogger`` directly, ``run.log_step`` and
   ``warehouse.log_step`` through the recorder (local store, background flush running), then
   tensorboardX ``add_scalar``, MLflow ``log_metric`` (sync and async; sqlite and file
   stores) and ``print(json.dumps(...))`` to a file. Targets (issue 6): ours <= 2 us; anchors
   measured there: tensorboardX 74 us, MLflow 5.2 ms sync / 0.95 ms async, JSON print 3.5 us.
2. **Background CPU** of our threads (flush, ship, sampler) at 1,000 steps/s, in % of one
   core, read per thread from the OS (psutil). Target <= 2 %.
3. **``warehouse watch`` overhead** on a child printing 100k lines: the child's wall time
   alone vs under ``warehouse watch`` (stdout to /dev/null in both), and the child's own
   elapsed printing time in both (the throughput cost, without our process start).
   Target <= 5 %.

mlflow and tensorboardX come from the ``bench`` extra (``pip install -e '.[bench]'``); a
missing one prints "not installed" and the rest runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Result = dict[str, Any]


# ---------------------------------------------------------------------------------------------
# 1. per-call cost
# ---------------------------------------------------------------------------------------------
def per_call_ns(call: Callable[[int], None], block: int, blocks: int) -> tuple[float, float]:
    """(median of per-block mean ns/call, overall mean ns/call) after one warm-up block."""
    for i in range(block):
        call(i)
    means = []
    total_ns = 0
    step = block
    for _ in range(blocks):
        start = time.perf_counter_ns()
        for _ in range(block):
            call(step)
            step += 1
        took = time.perf_counter_ns() - start
        total_ns += took
        means.append(took / block)
    return statistics.median(means), total_ns / (block * blocks)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence chatty libraries (MLflow's run links and deprecation notes) while timing."""
    saved = logging.root.manager.disable
    logging.disable(logging.WARNING)
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            yield
        finally:
            logging.disable(saved)


def bench_ours(tmp: Path, scale: int) -> list[Result]:
    import warehouse
    from warehouse.live.steps import StepLogger, StepOptions
    from warehouse.settings import Settings

    rows: list[Result] = []
    logger = StepLogger("bench", "bench", lambda docs: None, StepOptions(console=False))
    med, mean = per_call_ns(lambda i: logger.log_step(i, loss=0.5), 1000, 200 * scale)
    logger.close()
    rows.append(
        {"what": "warehouse StepLogger.log_step", "median_us": med / 1e3, "mean_us": mean / 1e3}
    )

    settings = Settings(home=tmp / "home", console=False)
    with warehouse.start_run(experiment="bench", settings=settings) as run:
        med, mean = per_call_ns(lambda i: run.log_step(i, loss=0.5), 1000, 200 * scale)
        rows.append(
            {
                "what": "warehouse run.log_step (local store)",
                "median_us": med / 1e3,
                "mean_us": mean / 1e3,
            }
        )
        log_step = warehouse.log_step
        med, mean = per_call_ns(lambda i: log_step(i, loss=0.5), 1000, 200 * scale)
        rows.append(
            {
                "what": "warehouse.log_step (current run)",
                "median_us": med / 1e3,
                "mean_us": mean / 1e3,
            }
        )
    return rows


def bench_json_print(tmp: Path, scale: int) -> Result:
    with open(tmp / "lines.jsonl", "w") as out:
        med, mean = per_call_ns(
            lambda i: print(json.dumps({"step": i, "loss": 0.5}), file=out), 1000, 100 * scale
        )
    return {
        "what": "print(json.dumps(...)) to a file",
        "median_us": med / 1e3,
        "mean_us": mean / 1e3,
    }


def bench_tensorboardx(tmp: Path, scale: int) -> Result:
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        return {"what": "tensorboardX add_scalar", "note": "not installed"}
    writer = SummaryWriter(str(tmp / "tb"))
    med, mean = per_call_ns(lambda i: writer.add_scalar("loss", 0.5, i), 500, 40 * scale)
    writer.close()
    return {"what": "tensorboardX add_scalar", "median_us": med / 1e3, "mean_us": mean / 1e3}


def bench_mlflow(tmp: Path, scale: int) -> list[Result]:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    try:
        import mlflow
    except ImportError:
        return [{"what": "MLflow log_metric", "note": "not installed"}]
    rows: list[Result] = []
    stores = {
        "sqlite": f"sqlite:///{tmp / 'mlflow.db'}",
        "file store": (tmp / "mlruns").as_uri(),
    }
    for store, uri in stores.items():
        try:
            with quiet():
                mlflow.set_tracking_uri(uri)
                mlflow.set_experiment(f"bench-{store.replace(' ', '-')}")
                with mlflow.start_run():
                    med, mean = per_call_ns(
                        lambda i: mlflow.log_metric("loss", 0.5, step=i), 20, 5 * scale
                    )
                    rows.append(
                        {
                            "what": f"MLflow log_metric sync ({store})",
                            "median_us": med / 1e3,
                            "mean_us": mean / 1e3,
                        }
                    )
                    med, mean = per_call_ns(
                        lambda i: mlflow.log_metric("loss", 0.5, step=i, synchronous=False),
                        100,
                        5 * scale,
                    )
                    rows.append(
                        {
                            "what": f"MLflow log_metric async ({store})",
                            "median_us": med / 1e3,
                            "mean_us": mean / 1e3,
                        }
                    )
                    mlflow.flush_async_logging()
        except Exception as exc:  # a store MLflow no longer supports: say so, go on
            rows.append(
                {
                    "what": f"MLflow log_metric ({store})",
                    "note": f"failed: {type(exc).__name__}: {exc}"[:120],
                }
            )
    return rows


# ---------------------------------------------------------------------------------------------
# 2. background CPU
# ---------------------------------------------------------------------------------------------
def _thread_cpu(native_ids: set[int]) -> float:
    import psutil

    total = 0.0
    for t in psutil.Process().threads():
        if t.id in native_ids:
            total += t.user_time + t.system_time
    return total


def bench_background_cpu(tmp: Path, seconds: float, with_store: bool) -> Result:
    """CPU of our threads while the training thread logs 1,000 steps/s for ``seconds``."""
    import warehouse
    from warehouse.live.steps import StepLogger, StepOptions
    from warehouse.settings import Settings

    rate = 1000
    run = None
    if with_store:
        settings = Settings(home=tmp / "home-cpu", console=False, system_interval_s=10.0)
        run = warehouse.start_run(experiment="bench-cpu", settings=settings)
        log_step: Callable[..., None] = run.log_step
        label = "recorder -> local store, sampler 10 s"
    else:
        logger = StepLogger("cpu", "cpu", lambda docs: None, StepOptions(console=False))
        log_step = logger.log_step
        label = "StepLogger -> null sink, sampler 10 s"
    log_step(0, loss=1.0)  # opens the recorder's logger and its threads
    time.sleep(0.2)
    ours = {
        t.native_id
        for t in threading.enumerate()
        if t.name.startswith("warehouse-") and t.native_id
    }
    cpu0 = _thread_cpu(ours)
    start = time.perf_counter()
    step = 1
    while True:
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            break
        due = int(elapsed * rate)
        while step <= due:
            log_step(step, loss=1.0 / step, lr=3e-4, grad_norm=1.0)
            step += 1
        time.sleep(0.001)
    wall = time.perf_counter() - start
    cpu = _thread_cpu(ours) - cpu0
    if run is not None:
        run.end()
    else:
        logger.close()
    return {
        "what": f"background threads at {rate} steps/s ({label})",
        "steps_per_s": step / wall,
        "cpu_pct_of_one_core": 100.0 * cpu / wall,
    }


# ---------------------------------------------------------------------------------------------
# 3. watch overhead
# ---------------------------------------------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import json, sys, time
    start = time.perf_counter()
    metric = sys.argv[1] == "metrics"
    for i in range(100_000):
        if metric:
            print(json.dumps({"metric": "loss", "value": 1 / (i + 1), "step": i}))
        else:
            print(f"line {i}: some log output, progress {i / 1000:.3f}%")
    sys.stdout.flush()
    sys.stderr.write(f"elapsed {time.perf_counter() - start:.6f}\\n")
    """
)


def _warehouse_command() -> list[str]:
    script = Path(sys.executable).parent / "warehouse"
    if script.is_file():
        return [str(script)]
    found = shutil.which("warehouse")
    return [found] if found else [sys.executable, "-m", "warehouse"]


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.run(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed: {proc.stderr.decode()[-2000:]}")
    inner = [line for line in proc.stderr.decode().splitlines() if line.startswith("elapsed ")]
    return wall, float(inner[-1].split()[1])


def bench_watch(tmp: Path, repeat: int) -> list[Result]:
    child = tmp / "child.py"
    child.write_text(CHILD)
    env = {
        **os.environ,
        "WAREHOUSE_HOME": str(tmp / "home-watch"),
        "WAREHOUSE_CONSOLE": "0",
        "PYTHONWARNINGS": "ignore",
    }
    rows: list[Result] = []
    for kind in ("plain", "metrics"):
        direct_cmd = [sys.executable, str(child), kind]
        watch_cmd = [*_warehouse_command(), "watch", "--", *direct_cmd]
        # the floor of any pipe-based pass-through: the same child into `cat`
        cat_cmd = ["sh", "-c", f'"{sys.executable}" "{child}" {kind} | cat']
        runs: dict[str, list[tuple[float, float]]] = {"direct": [], "cat": [], "watch": []}
        _timed(direct_cmd, env)
        _timed(watch_cmd, env)  # warm-ups
        for _ in range(repeat):  # interleaved, so machine noise hits all alike
            runs["direct"].append(_timed(direct_cmd, env))
            runs["cat"].append(_timed(cat_cmd, env))
            runs["watch"].append(_timed(watch_cmd, env))
        wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
        inner = {k: statistics.median(i for _, i in v) for k, v in runs.items()}
        rows.append(
            {
                "what": f"watch, child printing 100k {kind} lines",
                "child_alone_s": wall["direct"],
                "child_into_cat_s": wall["cat"],
                "under_watch_s": wall["watch"],
                "added_wall_pct": 100.0 * (wall["watch"] - wall["direct"]) / wall["direct"],
                "printing_alone_s": inner["direct"],
                "printing_into_cat_s": inner["cat"],
                "printing_under_watch_s": inner["watch"],
                "added_printing_pct": 100.0 * (inner["watch"] - inner["direct"]) / inner["direct"],
            }
        )
    start_cmd = [*_warehouse_command(), "--help"]
    starts = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(start_cmd, env=env, capture_output=True, check=False)
        starts.append(time.perf_counter() - t)
    rows.append(
        {
            "what": "for scale: `warehouse --help` process start",
            "seconds": statistics.median(starts),
        }
    )
    return rows


# ---------------------------------------------------------------------------------------------
def _print_table(title: str, rows: list[Result]) -> None:
    print(f"\n{title}")
    for row in rows:
        what = row["what"]
        rest = {k: v for k, v in row.items() if k != "what"}
        text = "  ".join(
            f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in rest.items()
        )
        print(f"  {what:<48} {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a rough look)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--skip-watch", action="store_true")
    args = parser.parse_args()
    scale = 1 if args.quick else 3
    results: dict[str, list[Result]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-log-step-") as folder:
        tmp = Path(folder)
        calls = [
            *bench_ours(tmp, scale),
            bench_json_print(tmp, scale),
            bench_tensorboardx(tmp, scale),
        ]
        calls += bench_mlflow(tmp, scale)
        results["per_call"] = calls
        _print_table("1. per-call cost on the training thread (microseconds)", calls)
        seconds = 3.0 if args.quick else 10.0
        cpu = [bench_background_cpu(tmp, seconds, False), bench_background_cpu(tmp, seconds, True)]
        results["background_cpu"] = cpu
        _print_table("2. background CPU (% of one core)", cpu)
        if not args.skip_watch:
            watch = bench_watch(tmp, 3 if args.quick else 5)
            results["watch"] = watch
            _print_table("3. warehouse watch overhead", watch)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
