"""One process of a distributed job, as torchrun starts it (RANK, WORLD_SIZE ... in the
environment): records through ``warehouse.start_run`` like any training script.

    python rank_job.py OUT_DIR [--hold]

Each rank logs metrics, steps, samples and an artifact that carry its rank, so a test can
tell whose values were recorded. ``--hold`` (per-rank system figures): a rank other than 0
holds ``rank * 40 MB`` and waits until its own figures are written at least once; rank 0
waits until ``OUT_DIR/go`` exists before it ends its run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import warehouse
from warehouse.recording.ranks import process_rank


def main() -> None:
    out = Path(sys.argv[1])
    hold = "--hold" in sys.argv
    rank = process_rank().rank
    with warehouse.start_run(experiment="ddp", config={"lr": 0.1}) as run:
        run.log_metrics("val", {"acc": 0.5 + rank / 100})
        run.log_step(1, loss=float(rank))
        run.log_samples("val", [{"sample_id": i, "correct": True, "rank": rank} for i in range(3)])
        run.log_artifact(f"rank {rank}".encode(), "who.txt")
        ballast = b""
        if hold and rank:
            ballast = b"x" * (rank * 40 * 1024 * 1024)  # written: resident
            reporter = run._reporter  # the test checks this rank's own file is written
            assert reporter is not None
            while not reporter.path.exists() or not reporter.path.read_bytes().count(b"\n"):
                time.sleep(0.05)
        if hold and not rank:
            while not (out / "go").exists():
                time.sleep(0.05)
        (out / f"rank-{rank}.id").write_text(run.run_id)
        del ballast


if __name__ == "__main__":
    main()
