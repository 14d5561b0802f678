"""What ``warehouse watch`` adds to a command's wall time, and what it reads of real captures.

    python benchmarks/watch_overhead.py              # 7 rounds of each command
    python benchmarks/watch_overhead.py --rounds 3 --long-s 5

Each round runs the command alone, then through ``python -m warehouse watch --`` (a fresh
process, stdout and stderr to pipes, a fresh local warehouse), alternating so that machine
load hits both alike. Printed: medians, the difference, and the load average before and
after. Commands: a short one (``python -c 'print(1)'``) and a long CPU-bound training-like
loop printing a tqdm-style bar and JSON metric lines (``--long-s`` seconds). Targets
(issue 30): at most +0.35 s on the short one on an idle machine, at most +2 % on the long one.

Then the per-capture recovery table of tests/watch/fixtures (visible values recovered, wrong,
invented) as the in-process parser reads them: a quick check; the claim is the end-to-end
replay of every capture through a live ``warehouse watch`` (tests/watch/test_replays.py).
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

LONG = """
import json, sys, time
end = time.perf_counter() + {seconds}
step, x = 0, 0.0
while time.perf_counter() < end:
    for i in range(20000):
        x += (i % 7) * 1e-9
    step += 1
    sys.stderr.write(f"\\rtrain: {{step}}it [00:01, 50.0it/s, loss={{1 / step:.4f}}]")
    if step % 10 == 0:
        print(json.dumps({{"metric": "loss", "value": 1 / step, "step": step}}), flush=True)
"""


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds, and CPU seconds (user + system, the process and its children): on a
    busy machine the wall time measures the load; the CPU time much less so."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{argv} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def compare(name: str, command: list[str], rounds: int) -> None:
    bare: list[tuple[float, float]] = []
    watched: list[tuple[float, float]] = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, WAREHOUSE_HOME=home, WAREHOUSE_CONSOLE="0")
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
        watch = [sys.executable, "-m", "warehouse", "watch", "--", *command]
        timed(watch, env)  # warm the file cache and the warehouse folder once
        for _ in range(rounds):
            bare.append(timed(command, env))
            watched.append(timed(watch, env))
    load_after = os.getloadavg()
    b, w = statistics.median(t for t, _ in bare), statistics.median(t for t, _ in watched)
    bc, wc = statistics.median(c for _, c in bare), statistics.median(c for _, c in watched)
    added = w - b
    print(
        f"{name:6} bare {b:7.3f} s  watched {w:7.3f} s  +{added:6.3f} s ({100 * added / b:5.1f} %)"
        f"  CPU {bc:6.3f} / {wc:6.3f} s (+{wc - bc:.3f})"
        f"  load {load_before[0]:.2f} -> {load_after[0]:.2f}  ({rounds} rounds, medians)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--long-s", type=float, default=10.0, help="0: the short command only")
    parser.add_argument("--no-table", action="store_true", help="skip the recovery table")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    compare("short", [sys.executable, "-c", "print(1)"], args.rounds)
    if args.long_s > 0:
        long = [sys.executable, "-c", LONG.format(seconds=args.long_s)]
        compare("long", long, max(3, args.rounds // 2))
    if not args.no_table:
        sys.path.insert(0, str(ROOT / "tests" / "watch" / "fixtures"))
        import scoring

        print()
        print(scoring.table([scoring.score(stem) for stem in scoring.captures()]))


if __name__ == "__main__":
    main()
