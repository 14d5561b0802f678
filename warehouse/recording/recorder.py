"""The recorder: opens a run (config, git, environment captured, redacted) and writes it.

``start_run`` (the function) and :meth:`Recorder.start_run` take the same parameters
(:class:`RunOptions`); the open run is an :class:`~warehouse.recording.run.ActiveRun`. Every record
is written through the recorder's :class:`~warehouse.replication.Recording`: the local store first,
and, when Elasticsearch or S3 is configured, on to them through the outbox.

    with warehouse.start_run(experiment="resnet", config=cfg) as run:
        run.log_metrics("val", {"acc": 0.93})
"""

from __future__ import annotations

import contextvars
import logging
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from typing_extensions import Unpack

from warehouse.errors import InvalidRecord, WarehouseError
from warehouse.models import PrimaryMetric, Run, config_hash, normalise_name, resolve_metric
from warehouse.recording.ranks import NullRun, ProcessRank, process_rank
from warehouse.recording.run import ActiveRun

if TYPE_CHECKING:
    from warehouse.live.steps import StepOptions
    from warehouse.objects.base import ObjectStore
    from warehouse.replication import Recording
    from warehouse.settings import Settings
    from warehouse.stores.base import Store

log = logging.getLogger(__name__)

_CURRENT: contextvars.ContextVar[ActiveRun | None] = contextvars.ContextVar(
    "warehouse_current_run", default=None
)


class RunOptions(TypedDict, total=False):
    """The keyword arguments of ``start_run`` (the function and the method alike).

    ``run_id``: resume (or replace) that run; ``tags``; ``primary_metric`` (``split.metric``)
    and its ``direction`` (``max``/``min``, inferred from the name by default);
    ``baseline_error`` for the bias/variance decomposition; ``cwd``: where to look for the git
    work tree (default: Hydra's original cwd, else the current folder); ``steps``: how
    ``log_step`` logs (:class:`~warehouse.live.steps.StepOptions`: total steps for the ETA,
    tokens per step for tokens/s and MFU, system sampling per step); ``hydra``: the overrides
    and job information, when the Hydra callback opens the run; ``rank``: this process's
    global rank and the world size, when the caller knows them (else they are read:
    :mod:`warehouse.recording.ranks`).
    """

    run_id: str | None
    tags: Iterable[str]
    primary_metric: str | None
    direction: str | None
    baseline_error: float | None
    cwd: Path | None
    steps: StepOptions | None
    hydra: tuple[list[str], dict[str, Any]] | None
    rank: tuple[int, int] | None


def current_run() -> ActiveRun | None:
    """The run opened by ``start_run`` or the Hydra callback in this context, if any."""
    return _CURRENT.get()


def log_step(step: int, epoch: int | None = None, **metrics: float) -> None:
    """``log_step`` on the current run; a no-op (with one debug line) when none is open."""
    run = _CURRENT.get()
    if run is None:
        log.debug("warehouse.log_step called with no active run; step %s dropped", step)
        return
    run.log_step(step, epoch, **metrics)


def start_run(
    experiment: str | None = None,
    config: Any = None,
    *,
    settings: Settings | None = None,
    **options: Unpack[RunOptions],
) -> ActiveRun:
    """Open a run (status ``running``, recorded at once) and make it the current run.

    Use it as a context manager: leaving the block completes the run; an exception inside it
    records ``failed`` with the error and is re-raised; Ctrl-C and SIGTERM record
    ``interrupted``. Options: :class:`RunOptions`.
    """
    if settings is None:
        from warehouse.settings import load

        settings = load()
    return Recorder(settings).start_run(experiment, config, **options)


class Recorder:
    """Opens runs and writes their records through one :class:`~warehouse.replication.Recording`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._recording: Recording | None = None

    @property
    def recording(self) -> Recording:
        """Where records go: opened on first use, offline (servers are reached when shipping)."""
        if self._recording is None:
            from warehouse.replication import open_recording

            self._recording = open_recording(self.settings)
        return self._recording

    @property
    def store(self) -> Store:
        """The store runs, samples and steps are written to (local first, always)."""
        return self.recording.store

    @property
    def objects(self) -> ObjectStore:
        """The object store artifacts and outputs are written to (local first, always)."""
        return self.recording.objects

    def start_run(
        self,
        experiment: str | None = None,
        config: Any = None,
        **options: Unpack[RunOptions],
    ) -> ActiveRun:
        """Capture config, git and environment, write the ``running`` record, return the run."""
        from warehouse.capture.config import capture_config, hydra_info
        from warehouse.capture.environment import capture_environment
        from warehouse.capture.git import capture_git
        from warehouse.capture.redact import redact_config, redact_overrides
        from warehouse.live.lifecycle import Lifecycle

        s = self.settings
        rank = process_rank(options.get("rank"))
        if not rank.records:  # one run per job: only global rank 0 records
            return self._null_run(str(experiment or s.experiment or "default"), rank)
        redaction = s.redaction  # key, value and file patterns; secret environment values
        name = redaction.text(str(experiment or s.experiment or "default"))
        captured = capture_config(config, redaction)
        hydra = options.get("hydra")
        overrides, hydra_meta = hydra if hydra is not None else hydra_info(redaction)
        env = redact_config(capture_environment(), redaction)
        env["world_size"] = rank.world_size
        primary = _primary_metric(
            options.get("primary_metric") or s.primary_metric,
            options.get("direction") or s.direction,
        )
        cwd = options.get("cwd")
        git_dir = cwd or Path(hydra_meta.get("original_cwd") or Path.cwd())
        git, diff = capture_git(
            git_dir, with_diff=s.capture_git_diff, redaction=redaction, exclude=[s.resolved_home]
        )

        record = Run(
            experiment=normalise_experiment(name),
            project=redaction.text(s.project) if s.project else None,
            tags=sorted(
                set(redact_overrides([str(t) for t in options.get("tags", ())], redaction))
            ),
            user=env.get("user"),
            host=env.get("host"),
            git=git,
            config=captured.config,
            overrides=list(overrides or captured.overrides),
            hydra=dict(hydra_meta or captured.hydra),
            params=captured.params,
            config_hash_noseed=config_hash(captured.config, s.seed_keys),
            environment=env,
            primary_metric=primary,
            redacted=["git.diff"] if git.redacted_files else [],
        )
        run_id = options.get("run_id")
        if run_id:
            record.run_id = run_id
        record.heartbeat_at = record.started_at
        baseline = options.get("baseline_error")
        run = ActiveRun(
            self,
            record,
            baseline_error=s.baseline_error if baseline is None else baseline,
            steps=options.get("steps"),
            secrets=frozenset(captured.secrets) | redaction.secrets,
            resumed=bool(run_id),
        )
        if normalise_experiment(name) != str(name).strip():
            run.note("experiment: characters UTF-8 cannot store replaced with U+FFFD")
        if diff:
            run.log_artifact(
                diff.encode("utf-8"), "git.diff", kind="git", content_type="text/x-diff"
            )
            record.git.diff_uri = record.artifacts[-1].uri
        run.save()
        Lifecycle.current().join(run, heartbeat_s=s.heartbeat_s)
        if s.system_per_rank and rank.world_size > 1:
            from warehouse.live.rank_system import collect_ranks

            collect_ranks(run.open_steps(), s.resolved_home, rank.world_size)
        _CURRENT.set(run)
        return run

    def _null_run(self, experiment: str, rank: ProcessRank) -> NullRun:
        """The run of a rank that does not record (with ``system_per_rank``: its reporter)."""
        reporter = None
        if self.settings.system_per_rank:
            from warehouse.live.rank_system import RankReporter

            reporter = RankReporter(self.settings.resolved_home, rank.rank, self.settings)
        run = NullRun(self, experiment, rank, reporter)
        _CURRENT.set(run)
        return run

    def forget(self, run: ActiveRun) -> None:
        """``run`` has ended: it is no longer the current run."""
        if _CURRENT.get() is run:
            _CURRENT.set(None)

    def announce(self, record: Run) -> None:
        """One line on stderr saying where the run went (``WAREHOUSE_CONSOLE=0``: silent)."""
        if not self.settings.console:
            return
        try:
            line = describe_recorded(record, self.settings)
        except WarehouseError:
            return
        print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        """Release the stores; they reopen lazily if the recorder is used again."""
        if self._recording is not None:
            self._recording.close()
        self._recording = None


def describe_recorded(record: Run, settings: Settings) -> str:
    """``recorded a897853c (val.acc 0.9916) in .warehouse/ -- warehouse query show a897853c``."""
    short = record.run_id[:8]
    pm = record.primary_metric
    score = ""
    if pm is not None and pm.value is not None:
        score = f" ({pm.name} {pm.value:.4g})"
    elif pm is not None:
        score = f" (no {pm.name})"
    status = "" if record.status == "completed" else f" as {record.status}"
    where = _where(settings)
    return f"recorded {short}{status}{score} in {where} -- warehouse query show {short}"


def _where(settings: Settings) -> str:
    home = settings.resolved_home
    try:
        shown = f"{home.relative_to(Path.cwd())}/"
    except ValueError:
        shown = f"{home}/"
    if settings.store_engine == "elasticsearch":
        from warehouse.stores.elastic_errors import public_url

        return f"Elasticsearch {public_url(settings.es_url or '')} (local copy in {shown})"
    return shown


def _primary_metric(metric: str, direction: str | None) -> PrimaryMetric:
    m = resolve_metric(metric, direction)
    return PrimaryMetric(name=m.label, split=m.split, metric=m.name, direction=m.direction)


def normalise_experiment(name: str) -> str:
    """Experiment names are kept as given, minus surrounding blanks (and with any character
    UTF-8 cannot store as U+FFFD); empty is refused."""
    from warehouse.capture.limits import clean_text

    cleaned = clean_text(str(name)).strip()
    if not cleaned:
        raise InvalidRecord("experiment name is empty; pass experiment='my-experiment'")
    segments = cleaned.split("/")
    if any(s in ("", ".", "..") for s in segments) or any(ord(c) < 32 for c in cleaned):
        raise InvalidRecord(
            f"experiment name {cleaned!r} cannot be used: it names folders and object keys, so "
            "it may not start or end with '/', hold '.' or '..' parts or control characters; "
            "e.g. experiment='resnet50-baseline'"
        )
    return cleaned


__all__ = [
    "ActiveRun",
    "Recorder",
    "RunOptions",
    "WarehouseError",
    "current_run",
    "log_step",
    "normalise_experiment",
    "normalise_name",
    "start_run",
]
