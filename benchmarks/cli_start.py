"""Whole-process CLI times: `warehouse --help` and `warehouse query leaderboard` (medians).

    python benchmarks/cli_start.py                      # --help, and leaderboard over the
                                                        # synthetic 10k runs (generated once)
    python benchmarks/cli_start.py --home ~/.warehouse  # leaderboard over another warehouse

Each command runs as a fresh process, the way a user types it: the console script next to
this interpreter (not a shell shim), stdout to a pipe. ``python -c pass`` is printed too: the
interpreter's own start, which no code of ours can remove. Targets: --help <= 0.3 s (issue),
leaderboard <= 0.8 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_HOME = HERE / ".cache" / "warehouse-full"


def warehouse_command() -> list[str]:
    """The `warehouse` console script of this interpreter, else ``python -m warehouse``."""
    script = Path(sys.executable).parent / "warehouse"
    if script.is_file():
        return [str(script)]
    found = shutil.which("warehouse")
    if (
        found
        and Path(found).read_bytes()[:2] == b"#!"
        and b"python" in Path(found).read_bytes()[:200]
    ):
        return [found]
    return [sys.executable, "-m", "warehouse"]


def time_process(argv: list[str], env: dict[str, str], repeat: int) -> list[float]:
    """Wall-clock seconds of ``argv`` run ``repeat`` times (after one untimed warm-up)."""
    times = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, check=False)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode()}")
        if i:
            times.append(elapsed)
    return times


def measure(home: Path, repeat: int = 7) -> dict[str, float]:
    """Median seconds: python start, `warehouse --help`, `warehouse query leaderboard`."""
    env = {**os.environ, "WAREHOUSE_HOME": str(home), "PYTHONWARNINGS": "ignore"}
    cmd = warehouse_command()
    return {
        "python -c pass": statistics.median(
            time_process([sys.executable, "-c", "pass"], env, repeat)
        ),
        "warehouse --help": statistics.median(time_process([*cmd, "--help"], env, repeat)),
        "warehouse query leaderboard": statistics.median(
            time_process([*cmd, "query", "leaderboard"], env, repeat)
        ),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--home",
        type=Path,
        default=None,
        help="warehouse to query (default: the synthetic 10k-run set)",
    )
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    home = args.home
    if home is None:
        sys.path.insert(0, str(HERE))
        from synthetic import generate

        generate(DEFAULT_HOME)
        home = DEFAULT_HOME
    print(f"command: {' '.join(warehouse_command())}   warehouse: {home}")
    for name, seconds in measure(home, args.repeat).items():
        print(f"  {name:<30} {seconds * 1000:8.0f} ms  (median of {args.repeat})")


if __name__ == "__main__":
    main()
