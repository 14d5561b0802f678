"""Which process of a distributed job records: global rank 0, and no other.

``torchrun --nproc_per_node 8 train.py`` starts eight processes running the same script; each
would open its own run. :func:`process_rank` says which one this is, and
:meth:`~warehouse.recording.recorder.Recorder.start_run` gives every rank but 0 a
:class:`NullRun`: the interface of :class:`~warehouse.recording.run.ActiveRun`, every method a
no-op, nothing captured, written or started. Rank 0's run records the world size
(``environment.world_size``).

The rank, first found wins:

1. given by the caller (an integration reads it from its framework: Lightning's
   ``trainer.global_rank``, transformers' ``args.process_index``);
2. ``torch.distributed``, when the program imported torch and initialised a process group;
3. accelerate's state, when the program imported accelerate and made an ``Accelerator``;
4. Lightning's ``rank_zero_only.rank``, when the program imported Lightning;
5. the launcher's environment (:class:`~warehouse.settings.LaunchEnvironment`): ``RANK`` /
   ``WORLD_SIZE`` (torchrun, accelerate, DeepSpeed), ``SLURM_PROCID`` / ``SLURM_NTASKS``,
   ``OMPI_COMM_WORLD_RANK`` / ``PMI_RANK`` (MPI), then ``LOCAL_RANK`` with ``NODE_RANK`` or
   ``GROUP_RANK`` (Lightning's own launcher sets only those): a process whose local or node
   rank is not 0 is not rank 0.

Nothing of that found: a single process, rank 0 of 1.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from warehouse.models import Run, RunStatus
from warehouse.recording.run import ActiveRun, RunHost

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping

    from warehouse.live.rank_system import RankReporter
    from warehouse.live.steps import StepLogger
    from warehouse.models import ArtifactRef
    from warehouse.settings import LaunchEnvironment, Settings


@dataclass(frozen=True)
class ProcessRank:
    """This process's place in its job: global ``rank``, ``world_size``, where that was read."""

    rank: int = 0
    world_size: int = 1
    source: str = "single process"

    @property
    def records(self) -> bool:
        """Only global rank 0 records."""
        return self.rank == 0


def process_rank(given: tuple[int, int] | None = None) -> ProcessRank:
    """This process's rank and world size (the rules: the module docstring)."""
    if given is not None:
        rank, world = given
        return ProcessRank(int(rank), max(int(world), 1), "given")
    for read in (_torch_distributed, _accelerate, _lightning):
        found = read()
        if found is not None:
            return found
    from warehouse.settings import load_launch

    return rank_from_environment(load_launch())


def rank_from_environment(env: LaunchEnvironment) -> ProcessRank:
    """The rank the launcher's variables give (rule 5 of the module docstring)."""
    world = env.world_size or env.slurm_ntasks or env.mpi_size
    if env.rank is not None:
        return ProcessRank(env.rank, env.world_size or 1, "RANK")
    if env.slurm_procid is not None:
        return ProcessRank(env.slurm_procid, env.slurm_ntasks or 1, "SLURM_PROCID")
    if env.mpi_rank is not None:
        return ProcessRank(env.mpi_rank, env.mpi_size or 1, "MPI")
    if env.local_rank is not None or env.node_rank is not None:
        local, node = env.local_rank or 0, env.node_rank or 0
        # the exact global rank needs the processes per node; whether it is 0 does not
        rank = node * (env.local_world_size or 1) + local if node else local
        return ProcessRank(rank, world or 1, "LOCAL_RANK")
    return ProcessRank(0, world or 1, "single process")


def _torch_distributed() -> ProcessRank | None:
    if "torch" not in sys.modules:  # never import torch for this
        return None
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return ProcessRank(dist.get_rank(), dist.get_world_size(), "torch.distributed")
    return None


def _accelerate() -> ProcessRank | None:
    if "accelerate" not in sys.modules:
        return None
    from accelerate.state import PartialState, is_initialized

    if not is_initialized():
        return None
    state = PartialState()
    return ProcessRank(state.process_index, state.num_processes, "accelerate")


def _lightning() -> ProcessRank | None:
    for name in ("lightning.fabric.utilities.rank_zero", "lightning_fabric.utilities.rank_zero"):
        module = sys.modules.get(name)
        rank = getattr(getattr(module, "rank_zero_only", None), "rank", None)
        if isinstance(rank, int) and rank != 0:  # 0 is also its default: let the env say more
            return ProcessRank(rank, 1, "lightning")
    return None


class NullRun(ActiveRun):
    """The run of a process that does not record (a rank other than 0).

    The interface of :class:`ActiveRun` with every method a no-op: nothing is captured,
    validated, written or started, and what the methods return is empty (``log_samples``
    returns 0, ``log_output`` an empty URI). ``record`` is a bare :class:`Run` that is never
    stored; ``run_id`` is empty. With ``system_per_rank`` the only work it does is its
    :class:`~warehouse.live.rank_system.RankReporter`'s: this rank's system figures, sent to
    rank 0's run.
    """

    def __init__(
        self,
        recorder: RunHost,
        experiment: str,
        rank: ProcessRank,
        reporter: RankReporter | None = None,
    ) -> None:
        from warehouse.live.steps import StepOptions

        # no ActiveRun.__init__: a NullRun holds no store, step logger, lock or names
        self.record = Run.model_construct(run_id="", experiment=experiment)
        self.rank = rank
        self.baseline_error = 0.0
        self.step_options = StepOptions()
        self._recorder = recorder
        self._reporter = reporter

    @property
    def run_id(self) -> str:
        return ""

    @property
    def experiment(self) -> str:
        return self.record.experiment

    @property
    def settings(self) -> Settings:
        return self._recorder.settings

    def log_metrics(self, split: str, metrics: Mapping[str, Any]) -> None:
        """Nothing is recorded on this rank."""

    def log_metric(self, split: str, name: str, value: float) -> None:
        """Nothing is recorded on this rank."""

    def set_tags(self, *tags: str) -> None:
        """Nothing is recorded on this rank."""

    def note(self, text: str) -> None:
        """Nothing is recorded on this rank."""

    def log_samples(
        self,
        split: str,
        rows: Any,
        *,
        metric_columns: Mapping[str, str] | None = None,
        cluster: str | None = None,
    ) -> int:
        """Nothing is recorded on this rank (``rows`` is not even iterated): 0 rows."""
        return 0

    def log_output(
        self,
        split: str,
        sample_id: str | int,
        data_or_path: bytes | str | os.PathLike[str],
        content_type: str | None = None,
    ) -> str:
        """Nothing is stored on this rank: an empty URI."""
        return ""

    def log_artifact(
        self,
        path_or_bytes: bytes | str | os.PathLike[str],
        name: str | None = None,
        *,
        kind: str = "artifacts",
        content_type: str | None = None,
        attach: bool = True,
    ) -> ArtifactRef:
        """Nothing is stored on this rank (the file is not read): an empty reference."""
        from warehouse.models import ArtifactRef

        if not name and not isinstance(path_or_bytes, bytes | bytearray):
            name = Path(path_or_bytes).name
        return ArtifactRef.model_construct(
            name=name or "", uri="", kind=kind, size_bytes=0, sha256="", content_type=content_type
        )

    def log_step(self, step: int, epoch: int | None = None, **metrics: float) -> None:
        """Nothing is recorded on this rank."""

    def log_step_metrics(self, step: int, epoch: int | None, metrics: Mapping[str, float]) -> None:
        """Nothing is recorded on this rank."""

    def open_steps(self) -> StepLogger:
        """A rank that does not record has no step logger."""
        raise RuntimeError(
            "this process is not rank 0 of its job: it records nothing and has no step logger"
        )

    def heartbeat(self) -> None:
        """Nothing is recorded on this rank."""

    def save(self) -> None:
        """Nothing is recorded on this rank."""

    def end(
        self,
        status: RunStatus | str = RunStatus.COMPLETED,
        error: BaseException | None = None,
    ) -> Run:
        """Stop the rank's reporter, if any; nothing is recorded."""
        reporter, self._reporter = self._reporter, None
        if reporter is not None:
            reporter.close()
        self._recorder.forget(self)
        self.record.status = RunStatus(status)
        return self.record

    def terminate(self, reason: str) -> None:
        self.end(RunStatus.INTERRUPTED)

    def at_exit(self, error: BaseException | None) -> None:
        self.end(RunStatus.COMPLETED if error is None else RunStatus.FAILED)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.end(RunStatus.COMPLETED if exc is None else RunStatus.FAILED)


__all__ = ["NullRun", "ProcessRank", "process_rank", "rank_from_environment"]
