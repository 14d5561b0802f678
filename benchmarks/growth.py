"""Growth table: every view at 1k / 10k / 100k runs, with DuckDB over the same Parquet beside it.

    python benchmarks/growth.py                          # 1k, 10k, 100k runs (data cached)
    python benchmarks/growth.py --sizes 1000,10000 --repeat 5 --json out.json

For each size the synthetic warehouse (``synthetic.py``: N runs in 50 experiments; 10 runs
x 100,000 validation samples, 1 at 1k) is generated once under ``benchmarks/.cache/``.
Then, for every view, in the same run and on the same files:

- **warehouse, in process**: ``warm`` = median of ``--repeat`` calls on one ``LocalStore``
  after a warm-up; ``cold`` = the first call on a new ``LocalStore`` (files in the OS cache).
- **DuckDB, in process**, over the store's own Parquet (``catalog/runs.parquet``,
  ``samples/<run>/val.parquet``): ``warm`` = median on one connection; ``cold`` = a new
  connection's first query.
- **whole process**: ``warehouse query ...`` vs ``python -c 'import duckdb; ...'`` (both with
  interpreter start; ``python -c pass`` is the floor), medians of ``--process-repeat``;
  streamed CSV exports also give their peak RSS.

Every answer is checked against DuckDB's (same best runs, same run ids, same number of new
bests over time, same records over time, same 100 hardest samples, same row counts); a
mismatch is printed and kept in the JSON. The machine's 1-minute load average is recorded
with every figure: on a shared machine compare the ratios of one row, not absolute times
across rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = HERE / ".cache"
sys.path[:0] = [str(HERE), str(ROOT)]  # this checkout's warehouse, in process as in children

METRIC = "metrics.val.acc"
RUNS_FILTER = "experiment:vit-01 AND metrics.val.acc:>=0.7"
Row = dict[str, Any]


def load() -> float:
    return round(os.getloadavg()[0], 2)


def home_for(runs: int, sample_runs: int, samples: int) -> Path:
    from synthetic import MARKER, Shape, generate

    shape = Shape(runs=runs, sample_runs=sample_runs, samples=samples)
    home = CACHE / f"growth-r{runs}" if samples == 100_000 else CACHE / f"growth-{shape.slug()}"
    if not (home / MARKER).exists():
        generate(home, shape)
    return home


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1000, out


def warm_cold(
    make: Callable[[], Any], call: Callable[[Any], Any], repeat: int, close: Callable[[Any], None]
) -> tuple[float, float, Any]:
    """(warm median ms, cold ms, answer)."""
    fresh = make()
    cold, answer = timed(lambda: call(fresh))
    close(fresh)
    handle = make()
    call(handle)
    warm = statistics.median(timed(lambda: call(handle))[0] for _ in range(repeat))
    close(handle)
    return warm, cold, answer


# --- the views, both ways ----------------------------------------------------------------------
def duck_bests(con: Any, catalog: str) -> list[tuple[str, str]]:
    rows = con.execute(
        f"""
        SELECT experiment, first(run_id ORDER BY "{METRIC}" DESC, ended_at, run_id)
        FROM '{catalog}' WHERE isfinite("{METRIC}") GROUP BY experiment ORDER BY 1
        """
    ).fetchall()
    return [(str(e), str(r)) for e, r in rows]


def cases(home: Path) -> dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]]:
    """view -> (warehouse call on a store, DuckDB call on a connection), both normalised to
    a comparable answer."""
    from warehouse.query import views

    catalog = str(home / "catalog" / "runs.parquet")

    def wh_leaderboard(s: Any) -> Any:
        rows = views.leaderboard(s, "val.acc", "max")
        return sorted((str(r["experiment"]), str(r["best_run_id"])) for r in rows)

    def wh_best(s: Any) -> Any:
        return [str(r["run_id"]) for r in views.best(s, "val.acc", "max")]

    def duck_best(con: Any) -> Any:
        return [
            str(r[0])
            for r in con.execute(
                f"""SELECT run_id FROM '{catalog}' WHERE isfinite("{METRIC}")
                ORDER BY "{METRIC}" DESC, ended_at, run_id LIMIT 1"""
            ).fetchall()
        ]

    def wh_runs(s: Any) -> Any:
        return [str(d["run_id"]) for d in views.runs(s, RUNS_FILTER, ["metrics.val.acc"], 20)]

    def duck_runs(con: Any) -> Any:
        return [
            str(r[0])
            for r in con.execute(
                f"""SELECT run_id FROM '{catalog}'
                WHERE experiment = 'vit-01' AND "{METRIC}" >= 0.7
                ORDER BY "{METRIC}" DESC, run_id LIMIT 20"""
            ).fetchall()
        ]

    # each run beside the best before it (DuckDB's side of over-time and its records)
    records_cte = f"""WITH s AS (
              SELECT run_id, ended_at, "{METRIC}" AS v,
                max("{METRIC}") OVER (ORDER BY ended_at, run_id
                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
              FROM '{catalog}' WHERE isfinite("{METRIC}") AND ended_at IS NOT NULL)"""

    def wh_over_time(s: Any) -> Any:
        points = views.over_time(s, "val.acc", "max")
        return (len(points), sum(bool(p["is_new_best"]) for p in points), points[-1]["best_run_id"])

    def duck_over_time(con: Any) -> Any:
        n, new, last = con.execute(
            f"""
            {records_cte}
            SELECT count(*), count(*) FILTER (WHERE before IS NULL OR v > before),
              first(run_id ORDER BY v DESC, ended_at, run_id)
            FROM s
            """
        ).fetchone()
        return (int(n), int(new), str(last))

    def wh_records(s: Any) -> Any:
        points = views.over_time(s, "val.acc", "max", every_run=False)
        return [str(p["run_id"]) for p in points]

    def duck_records(con: Any) -> Any:
        rows = con.execute(
            f"""
            {records_cte}
            SELECT run_id FROM s WHERE before IS NULL OR v > before ORDER BY ended_at, run_id
            """
        ).fetchall()
        return [str(r[0]) for r in rows]

    def wh_samples(s: Any) -> Any:
        rows = views.samples(s, best=True, split="val", sort="pixel_acc", order="asc", limit=100)
        return [str(r["sample_id"]) for r in rows]

    def duck_samples(con: Any) -> Any:
        best = duck_best(con)[0]
        path = home / "samples" / best / "val.parquet"
        return [
            str(r[0])
            for r in con.execute(
                f"SELECT sample_id FROM '{path}' ORDER BY pixel_acc, sample_id LIMIT 100"
            ).fetchall()
        ]

    return {
        "leaderboard": (wh_leaderboard, lambda con: duck_bests(con, catalog)),
        "best run": (wh_best, duck_best),
        "runs -q FILTER -s metrics.val.acc -n 20": (wh_runs, duck_runs),
        "over-time (records: the CLI's default)": (wh_records, duck_records),
        "over-time (per run: --every-run)": (wh_over_time, duck_over_time),
        "samples --best --sort pixel_acc --asc --limit 100": (wh_samples, duck_samples),
    }


def in_process(home: Path, runs: int, repeat: int) -> list[Row]:
    import duckdb

    from warehouse.stores.local import LocalStore

    rows = []
    for name, (wh, duck) in cases(home).items():
        reps = max(2, repeat // 2) if "per run" in name and runs >= 100_000 else repeat
        before = load()
        w_warm, w_cold, w_answer = warm_cold(
            lambda: LocalStore(home), wh, reps, lambda s: s.close()
        )
        d_warm, d_cold, d_answer = warm_cold(duckdb.connect, duck, reps, lambda c: c.close())
        rows.append(
            {
                "runs": runs,
                "view": name,
                "warehouse_warm_ms": w_warm,
                "warehouse_cold_ms": w_cold,
                "duckdb_warm_ms": d_warm,
                "duckdb_cold_ms": d_cold,
                "warm_ratio": w_warm / d_warm,
                "same_answer": w_answer == d_answer,
                "load": max(before, load()),
            }
        )
        if w_answer != d_answer:
            rows[-1]["answers"] = [repr(w_answer)[:300], repr(d_answer)[:300]]
    return rows


# --- whole processes ---------------------------------------------------------------------------
PROBE = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)\n"
    "out = p.stdout\n"
    "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
    " out.count(b'\\n'), p.returncode)"
)


def process(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(seconds, peak RSS MiB, stdout lines) of one whole process."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], env=env, capture_output=True, text=True, check=True
    )
    seconds, rss, lines, code = proc.stdout.split()
    if code != "0":
        raise SystemExit(f"{argv} exited {code}")
    return float(seconds), int(rss) / 1024, int(lines)


def whole_process(home: Path, runs: int, repeat: int, sample_run: str | None) -> list[Row]:
    env = {
        **os.environ,
        "WAREHOUSE_HOME": str(home),
        "PYTHONWARNINGS": "ignore",
        "PYTHONPATH": str(ROOT),
        "WAREHOUSE_CONSOLE": "0",
    }
    py = sys.executable
    catalog = home / "catalog" / "runs.parquet"
    duck = "import duckdb, sys; duckdb.sql(sys.argv[1]).{}"
    commands: list[tuple[str, list[str], list[str], int]] = [
        (
            "python -c pass (floor) | warehouse --help",
            [py, "-m", "warehouse", "--help"],
            [py, "-c", "pass"],
            repeat,
        ),
        (
            "query leaderboard --format json",
            [py, "-m", "warehouse", "query", "leaderboard", "--format", "json"],
            [
                py,
                "-c",
                duck.format("fetchall()"),
                f"""SELECT experiment, first(run_id ORDER BY "{METRIC}" DESC) FROM '{catalog}'
                WHERE isfinite("{METRIC}") GROUP BY 1""",
            ],
            repeat,
        ),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-growth-") as tmp:
        commands.append(
            (
                "query runs --format csv --limit 0",
                [py, "-m", "warehouse", "query", "runs", "--format", "csv", "--limit", "0"],
                [
                    py,
                    "-c",
                    duck.format("write_csv(sys.argv[2])"),
                    f"SELECT * EXCLUDE (_doc) FROM '{catalog}'",
                    f"{tmp}/runs.csv",
                ],
                1 if runs >= 100_000 else max(1, repeat // 2),
            )
        )
        if sample_run:
            path = home / "samples" / sample_run / "val.parquet"
            commands.append(
                (
                    "query samples --run R --split val --limit 0 --format csv",
                    [
                        py,
                        "-m",
                        "warehouse",
                        "query",
                        "samples",
                        "--run",
                        sample_run,
                        "--split",
                        "val",
                        "--limit",
                        "0",
                        "--format",
                        "csv",
                    ],
                    [
                        py,
                        "-c",
                        duck.format("write_csv(sys.argv[2])"),
                        f"SELECT * FROM '{path}'",
                        f"{tmp}/samples.csv",
                    ],
                    1,
                )
            )
        rows = []
        for name, ours, theirs, reps in commands:
            before = load()
            mine = [process(ours, env) for _ in range(reps)]
            peer = [process(theirs, env) for _ in range(reps)]
            row: Row = {
                "runs": runs,
                "command": name,
                "warehouse_s": statistics.median(m[0] for m in mine),
                "warehouse_rss_mib": max(m[1] for m in mine),
                "peer_s": statistics.median(p[0] for p in peer),
                "peer_rss_mib": max(p[1] for p in peer),
                "load": max(before, load()),
            }
            row["ratio"] = row["warehouse_s"] / row["peer_s"]
            if "csv" in name:
                out_lines = mine[0][2] - 1  # the header
                peer_file = Path(theirs[-1])
                peer_lines = sum(1 for _ in peer_file.open("rb")) - 1 if peer_file.exists() else -1
                row["rows"] = out_lines
                row["same_answer"] = out_lines == peer_lines
            rows.append(row)
    return rows


def stream_rows(home: Path, sample_run: str, label: str) -> Row:
    """In process: ``warehouse.history.streaming.write_csv_batches`` vs pyarrow's CSV writer, one
    split's Parquet file batch by batch, to /dev/null; peak RSS of each in its own process."""
    path = home / "samples" / sample_run / "val.parquet"
    code = (
        "import resource, sys, time, pyarrow.parquet as pq\n"
        "f = pq.ParquetFile(sys.argv[2]); t = time.perf_counter()\n"
        "if sys.argv[1] == 'ours':\n"
        "    from warehouse.history.streaming import write_csv_batches\n"
        "    with open('/dev/null', 'w') as out:\n"
        "        n = write_csv_batches(f.iter_batches(batch_size=65536), out)\n"
        "else:\n"
        "    import pyarrow.csv as pc\n"
        "    w = None; n = 0\n"
        "    for b in f.iter_batches(batch_size=65536):\n"
        "        w = w or pc.CSVWriter('/dev/null', b.schema); w.write_batch(b); n += b.num_rows\n"
        "    w.close()\n"
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, n)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out: Row = {"what": f"stream {label} sample rows to CSV in process", "load": load()}
    for side in ("ours", "pyarrow"):
        proc = subprocess.run(
            [sys.executable, "-c", code, side, str(path)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        seconds, rss, n = proc.stdout.split()
        out[f"{side}_s"], out[f"{side}_rss_mib"], out["rows"] = (
            float(seconds),
            int(rss) / 1024,
            int(n),
        )
    return out


def first_sample_run(home: Path) -> str | None:
    folder = home / "samples"
    found = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    return found[0] if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--process-repeat", type=int, default=3)
    parser.add_argument("--million", action="store_true", help="also a run of 1M samples")
    parser.add_argument("--skip-process", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result: dict[str, list[Row]] = {"in_process": [], "whole_process": [], "streaming": []}
    for size in (int(s) for s in args.sizes.split(",")):
        home = home_for(size, 1 if size < 10_000 else 10, 100_000)
        rows = in_process(home, size, args.repeat)
        result["in_process"] += rows
        for r in rows:
            print(
                f"{size:>7} {r['view']:<52} wh warm {r['warehouse_warm_ms']:9.2f} "
                f"cold {r['warehouse_cold_ms']:9.2f} | duckdb warm {r['duckdb_warm_ms']:7.2f} "
                f"cold {r['duckdb_cold_ms']:7.2f} | x{r['warm_ratio']:.1f} "
                f"same={r['same_answer']} load {r['load']}",
                flush=True,
            )
        sample_run = first_sample_run(home)
        if not args.skip_process:
            rows = whole_process(home, size, args.process_repeat, sample_run)
            result["whole_process"] += rows
            for r in rows:
                print(
                    f"{size:>7} {r['command']:<52} wh {r['warehouse_s']:7.3f} s "
                    f"{r['warehouse_rss_mib']:6.0f} MiB | peer {r['peer_s']:7.3f} s "
                    f"{r['peer_rss_mib']:6.0f} MiB | x{r['ratio']:.1f} "
                    f"same={r.get('same_answer', '-')} load {r['load']}",
                    flush=True,
                )
        if sample_run and size == 1000:
            result["streaming"].append(stream_rows(home, sample_run, "100k"))
            print(result["streaming"][-1], flush=True)
    if args.million:
        home = home_for(50, 1, 1_000_000)
        run = first_sample_run(home)
        assert run is not None
        result["streaming"].append(stream_rows(home, run, "1M"))
        print(result["streaming"][-1], flush=True)
        if not args.skip_process:
            rows = [r for r in whole_process(home, 50, 1, run) if "samples" in r["command"]]
            for r in rows:
                r["command"] += " (1M rows)"
                print(r, flush=True)
            result["whole_process"] += rows
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
