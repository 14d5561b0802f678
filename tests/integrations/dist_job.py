"""One process of a torch.distributed (gloo) group started without the launcher's variables:
only the process group knows the rank. ``python dist_job.py RANK WORLD INIT_FILE OUT_DIR``."""

from __future__ import annotations

import sys
from pathlib import Path

import torch.distributed as dist

import warehouse


def main() -> None:
    rank, world, init, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    try:
        with warehouse.start_run(experiment="gloo") as run:
            run.log_metrics("val", {"acc": 0.9 - rank / 10})
            dist.barrier()
        (out / f"rank-{rank}.id").write_text(run.run_id)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
