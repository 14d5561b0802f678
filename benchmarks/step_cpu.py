"""CPU per logged training step, all threads counted, until the steps are stored.

    python benchmarks/step_cpu.py             # 100,000 steps per way, 5 repeats (~1-2 min)
    python benchmarks/step_cpu.py --steps 20000 --repeat 3

Each way of logging a step runs in a fresh interpreter that logs ``--steps`` steps of
``(step, loss, lr, grad_norm)`` as fast as it can, then closes/flushes until everything is
stored. Two figures per way, medians over ``--repeat`` processes:

- ``call_us``: the training thread's time per call (wall clock of the logging loop / steps:
  what the training loop waits, GIL hand-overs to our threads included);
- ``cpu_us``: the **whole process's** CPU per step (``getrusage(RUSAGE_SELF)`` user+system,
  every thread, from before the first step to after the close that stores the last one);
- ``after``: the part of ``cpu_us`` spent after the loop, in the close (a burst of steps
  logged faster than the background thread's tick is built and stored there).

The ways: ``list.append`` of a tuple (the floor), an orjson line and a ``json.dumps`` line
written to a file, tensorboardX ``SummaryWriter.add_scalar`` (three scalars a step, its
writer thread included), and ours: ``StepLogger.log_step`` into a sink that drops the
documents (building them is all), into the local store's ``write_steps`` (the local half of
a recorded run's store), into ``encode_lines`` + one append a batch (the same without the
store's checks), and ``run.log_step`` through ``warehouse.start_run`` (its store writes an
outbox entry per batch before the local append). The machine's load average is printed with
every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

PRELUDE = textwrap.dedent(
    """
    import json, os, resource, sys, tempfile, time
    from pathlib import Path
    N = int(sys.argv[1])
    TMP = Path(sys.argv[2])
    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    """
)

WAYS: dict[str, tuple[str, str, str]] = {
    # name: (setup, the call in the loop, the close)
    "list.append (floor)": (
        "buf = []; ap = buf.append",
        "ap((time.time(), i, 0.5, 3e-4, 1.0))",
        "",
    ),
    "orjson line to a file": (
        "import orjson; f = open(TMP / 'o.jsonl', 'wb'); w = f.write; d = orjson.dumps",
        "w(d({'step': i, 'loss': 0.5, 'lr': 3e-4, 'grad_norm': 1.0}, "
        "option=orjson.OPT_APPEND_NEWLINE))",
        "f.close()",
    ),
    "json.dumps line to a file": (
        "f = open(TMP / 'j.jsonl', 'w'); w = f.write; d = json.dumps",
        "w(d({'step': i, 'loss': 0.5, 'lr': 3e-4, 'grad_norm': 1.0}) + '\\n')",
        "f.close()",
    ),
    "tensorboardX SummaryWriter (3 add_scalar)": (
        "from tensorboardX import SummaryWriter; sw = SummaryWriter(str(TMP / 'tb')); "
        "add = sw.add_scalar",
        "add('loss', 0.5, i); add('lr', 3e-4, i); add('grad_norm', 1.0, i)",
        "sw.close()",
    ),
    "StepLogger.log_step -> null sink": (
        "from warehouse.live.steps import StepLogger, StepOptions; "
        "lg = StepLogger('r', 'e', lambda docs: None, "
        "StepOptions(console=False, system_interval_s=10)); ls = lg.log_step",
        "ls(i, loss=0.5, lr=3e-4, grad_norm=1.0)",
        "lg.close()",
    ),
    "StepLogger.log_step -> LocalStore.write_steps": (
        "from warehouse.live.steps import StepLogger, StepOptions\n"
        "from warehouse.stores.local import LocalStore\n"
        "store = LocalStore(TMP / 'home')\n"
        "lg = StepLogger('r1', 'e', lambda docs: store.write_steps('r1', 'e', docs), "
        "StepOptions(console=False, system_interval_s=10)); ls = lg.log_step",
        "ls(i, loss=0.5, lr=3e-4, grad_norm=1.0)",
        "lg.close()",
    ),
    "StepLogger.log_step -> encode_lines + one append": (
        "import fcntl\n"
        "from warehouse.live.steps import StepLogger, StepOptions\n"
        "from warehouse.live.step_docs import encode_lines\n"
        "fd = os.open(TMP / 'steps.jsonl', os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)\n"
        "def sink(docs):\n"
        "    data = encode_lines(docs, 'r1', 'e')\n"
        "    fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "    os.write(fd, data)\n"
        "    fcntl.flock(fd, fcntl.LOCK_UN)\n"
        "lg = StepLogger('r1', 'e', sink, StepOptions(console=False, system_interval_s=10))\n"
        "ls = lg.log_step",
        "ls(i, loss=0.5, lr=3e-4, grad_norm=1.0)",
        "lg.close()",
    ),
    "run.log_step (start_run, local store)": (
        "import warehouse\n"
        "from warehouse.settings import Settings\n"
        "run = warehouse.start_run(experiment='bench', settings=Settings(home=TMP / 'home2', "
        "console=False))\n"
        "run.open_steps(); ls = run.log_step",
        "ls(i, loss=0.5, lr=3e-4, grad_norm=1.0)",
        "run.end()",
    ),
}


def script(setup: str, call: str, close: str) -> str:
    return (
        PRELUDE
        + setup
        + "\n"
        + textwrap.dedent(
            f"""
            c0 = cpu(); t0 = time.perf_counter()
            for i in range(N):
                {call}
            t1 = time.perf_counter(); cm = cpu()
            {close or "pass"}
            c1 = cpu()
            print(json.dumps({{"call_us": (t1 - t0) / N * 1e6, "cpu_us": (c1 - c0) / N * 1e6,
                               "after_us": (c1 - cm) / N * 1e6}}))
            """
        )
    )


def measure(name: str, steps: int, repeat: int) -> dict[str, Any]:
    setup, call, close = WAYS[name]
    code = script(setup, call, close)
    calls, cpus, afters, loads = [], [], [], []
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-step-cpu-") as tmp:
            loads.append(os.getloadavg()[0])
            proc = subprocess.run(
                [sys.executable, "-c", code, str(steps), tmp],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
            return {"what": name, "note": f"failed: {tail[:100]}"}
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        calls.append(out["call_us"])
        cpus.append(out["cpu_us"])
        afters.append(out["after_us"])
    return {
        "what": name,
        "call_us": statistics.median(calls),
        "cpu_us": statistics.median(cpus),
        "after_us": statistics.median(afters),
        "load": statistics.median(loads),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", help="ways whose name contains this")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args()
    rows = []
    print(f"{'way':<58} {'call us':>8} {'cpu us':>8} {'after':>8} {'load':>6}")
    for name in WAYS:
        if args.only and args.only not in name:
            continue
        row = measure(name, args.steps, args.repeat)
        rows.append(row)
        if "note" in row:
            print(f"{name:<58} {row['note']}")
        else:
            print(
                f"{name:<58} {row['call_us']:8.2f} {row['cpu_us']:8.2f} {row['after_us']:8.2f} "
                f"{row['load']:6.2f}"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
