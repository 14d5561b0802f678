"""The calibration suite at full size: every scenario of ``tests/query/calibration.py`` with
ten times the trials the CI suite runs (or ``--scale``), each rate with its Monte-Carlo error.

    python benchmarks/calibration.py              # ~10 minutes on 2 busy cores
    python benchmarks/calibration.py --scale 3

A null scenario's rate is the false-positive rate (nominal 5 %; exact, Holm and Bonferroni
tests are below it by design); a coverage scenario's is how often the 95 % interval held the
truth; a power scenario's how often the planted effect was found.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    from tests.query.calibration import SCENARIOS

    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    print(
        f"{'scenario':42s} {'kind':8s} {'nominal':>7s} {'rate':>7s} {'± 3 se':>7s} {'trials':>7s}"
    )
    for scenario in SCENARIOS:
        trials = max(1, round(scenario.ci_trials * args.scale))
        start = time.perf_counter()
        rate = scenario.run(trials, args.seed)
        spent = time.perf_counter() - start
        error = 3 * math.sqrt(max(rate * (1 - rate), 1e-6) / trials)
        print(
            f"{scenario.name:42s} {scenario.kind:8s} {scenario.nominal:7.3f} {rate:7.4f} "
            f"{error:7.4f} {trials:7d}  ({spent:.0f} s)"
        )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
