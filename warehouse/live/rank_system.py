"""System figures of every rank in rank 0's run (``WAREHOUSE_SYSTEM_PER_RANK=1``).

In a distributed job only rank 0 records (:mod:`warehouse.recording.ranks`), and its sampler
sees its own process and the GPUs visible to it. A multi-GPU user wants each rank's figures:
its GPU's utilisation, memory and power, its process's memory, its torch allocator.

- **Every other rank** (:class:`RankReporter`) samples its own process and its own GPU every
  ``system_interval_s`` (the one GPU it sees, else the ``LOCAL_RANK``-th visible one, as
  ``cuda:LOCAL_RANK`` picks it) and appends each sample as one JSON line to
  ``<home>/ranks/<launch>/rank-<k>.jsonl``; a last sample when its run ends or the process
  exits.
- **Rank 0** (:func:`collect_ranks`) reads the lines that are new each time its step logger
  flushes (and once more when the run ends) and records each as a step document of its run
  with ``rank`` and ``host`` set (``metrics`` empty), numbered in the run's one ``seq``
  sequence. Its own documents have no ``rank``.

``<launch>`` is the same on every rank of one launch and differs between launches running at
once: a hash of ``SLURM_JOB_ID.SLURM_STEP_ID``, else torchrun's ``TORCHELASTIC_RUN_ID``, else
``MASTER_ADDR:MASTER_PORT``. Lines taken more than a minute before rank 0's process started
(a crashed earlier launch with the same port) are ignored; rank 0 removes the files it read at
the end. The ranks meet in the warehouse folder, so ranks on other nodes reach rank 0's run
only when ``WAREHOUSE_HOME`` is on a filesystem every node shares. A sample a rank takes after
rank 0's run ended is not recorded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.live.lifecycle import Lifecycle

if TYPE_CHECKING:
    from warehouse.live.steps import StepLogger
    from warehouse.live.system import Sample, SystemSampler
    from warehouse.settings import LaunchEnvironment, Settings

log = logging.getLogger(__name__)

RankSample = tuple[float, int, dict[str, Any]]
"""``(time, rank, sample)``: one rank's system sample, with its ``host``."""

STALE_S = 60.0


def launch_folder(home: Path, env: LaunchEnvironment) -> Path:
    """Where the ranks of this launch meet (the rule: the module docstring)."""
    if env.slurm_job_id:
        key = f"slurm:{env.slurm_job_id}.{env.slurm_step_id or ''}"
    elif env.torchelastic_run_id and env.torchelastic_run_id != "none":
        key = f"torchelastic:{env.torchelastic_run_id}"
    elif env.master_addr or env.master_port:
        key = f"master:{env.master_addr}:{env.master_port}"
    else:
        key = "local"
    return home / "ranks" / hashlib.sha256(key.encode()).hexdigest()[:16]


class RankReporter:
    """A rank's side: its own figures, a JSON line a sample, for rank 0 to record."""

    def __init__(self, home: Path, rank: int, settings: Settings) -> None:
        from warehouse.live.system import SystemSampler
        from warehouse.settings import load_launch

        env = load_launch()
        self.rank = rank
        self.local_rank = env.local_rank if env.local_rank is not None else rank
        self.path = launch_folder(home, env) / f"rank-{rank}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.host = socket.gethostname()
        interval = settings.system_interval_s if settings.system_interval_s > 0 else 10.0
        self._sampler: SystemSampler | None = SystemSampler(interval, on_sample=self._write)
        self._sampler.start()
        Lifecycle.current().join(self)

    def _write(self, t: float, sample: Sample) -> None:
        line = {
            "t": t,
            "rank": self.rank,
            "host": self.host,
            **own_figures(sample, self.local_rank),
        }
        data = (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")
        try:  # one write of a whole line in append mode: lines never interleave
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            log.debug("rank %d: cannot append to %s (%s)", self.rank, self.path, exc)

    def close(self) -> None:
        """A last sample, then stop sampling."""
        sampler, self._sampler = self._sampler, None
        if sampler is None:
            return
        sampler.stop()
        try:
            self._write(time.time(), sampler.sample())
        except Exception:  # a sampler must never take the program down
            log.warning("rank %d: the last system sample failed", self.rank, exc_info=True)
        Lifecycle.current().leave(self)

    # the lifecycle's calls
    def terminate(self, reason: str) -> None:
        self.close()

    def at_exit(self, error: BaseException | None) -> None:
        self.close()

    def heartbeat(self) -> None:
        """The reporter has no heartbeat of its own."""


def own_figures(sample: Sample, local_rank: int) -> dict[str, Any]:
    """A rank's share of a sample: the GPU it uses (the only visible one, else the
    ``local_rank``-th), and the system figures with ``gpu_*`` that GPU's alone (rank 0's own
    documents have the totals over the GPUs it sees)."""
    from warehouse.live.system import gpu_totals

    system = {k: v for k, v in sample.get("system", {}).items() if not k.startswith("gpu_")}
    out: dict[str, Any] = {"system": system}
    gpus = sample.get("gpus") or []
    if gpus:
        mine = gpus[0] if len(gpus) == 1 else gpus[local_rank % len(gpus)]
        out["gpus"] = [mine]
        system.update(gpu_totals([mine]))
    return out


class RankFiles:
    """Rank 0's side: the lines the other ranks appended since the last read."""

    def __init__(self, folder: Path, since: float) -> None:
        self.folder = folder
        self.since = since
        self._offsets: dict[Path, int] = {}

    def __call__(self, final: bool) -> list[RankSample]:
        """New complete lines of every rank file, oldest first; ``final``: also remove them."""
        found: list[RankSample] = []
        try:
            paths = sorted(self.folder.glob("rank-*.jsonl"))
        except OSError:
            return found
        for path in paths:
            found.extend(self._read(path))
            if final:
                with contextlib.suppress(OSError):
                    path.unlink()
        found.sort(key=lambda s: s[0])
        return found

    def _read(self, path: Path) -> list[RankSample]:
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as src:
                src.seek(offset)
                data = src.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next read
        self._offsets[path] = offset + end
        out: list[RankSample] = []
        for raw in data[:end].splitlines():
            try:
                line = json.loads(raw)
                t, rank = float(line.pop("t")), int(line.pop("rank"))
            except (ValueError, KeyError, TypeError):
                log.debug("%s: a line that is not a rank sample was skipped", path)
                continue
            if t >= self.since:
                out.append((t, rank, line))
        return out


def collect_ranks(steps: StepLogger, home: Path, world_size: int) -> RankFiles:
    """Make rank 0's step logger record the other ranks' samples (its flushes read them)."""
    import psutil

    from warehouse.settings import load_launch

    folder = launch_folder(home, load_launch())
    started = psutil.Process().create_time()
    files = RankFiles(folder, since=started - STALE_S)
    steps.add_source(files)
    log.debug("rank 0 of %d collects the ranks' system figures from %s", world_size, folder)
    return files


__all__ = [
    "RankFiles",
    "RankReporter",
    "RankSample",
    "collect_ranks",
    "launch_folder",
    "own_figures",
]
