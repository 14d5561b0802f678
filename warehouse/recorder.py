"""The recorder: opens a run, takes metrics, samples, outputs and steps, and closes it.

Every record is written to the embedded local store first (the durable copy); when
Elasticsearch or S3 is configured, a :class:`warehouse.outbox.Replicator` ships it from there,
keeping it in the outbox while a server is down. Policy lives here, once: metric validation
(NaN/inf → ``invalid_metrics``, non-numbers refused), name normalisation, redaction (through
``capture/``), the primary metric and the bias/variance decomposition.

    with warehouse.start_run(experiment="resnet", config=cfg) as run:
        run.log_metrics("val", {"acc": 0.93})
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import logging
import math
import mimetypes
import numbers
import os
import signal
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar

from warehouse.errors import InvalidRecord, WarehouseError
from warehouse.models import (
    ArtifactRef,
    PrimaryMetric,
    Run,
    RunError,
    RunStatus,
    decompose,
    infer_direction,
    normalise_name,
    parse_metric_path,
    utcnow,
)
from warehouse.objects.base import object_key

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.live.steps import StepLogger
    from warehouse.objects.base import ObjectStore
    from warehouse.outbox import Replicator
    from warehouse.settings import Settings
    from warehouse.stores.base import Store

log = logging.getLogger(__name__)

_CURRENT: contextvars.ContextVar[ActiveRun | None] = contextvars.ContextVar(
    "warehouse_current_run", default=None
)

_BATCH_ROWS = 65_536


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
    run_id: str | None = None,
    tags: Iterable[str] = (),
    primary_metric: str | None = None,
    direction: str | None = None,
    baseline_error: float | None = None,
    settings: Settings | None = None,
    cwd: Path | None = None,
    total_steps: int | None = None,
    tokens_per_step: float | None = None,
    flops_per_token: float | None = None,
    peak_flops: float | None = None,
    system_per_step: bool = False,
) -> ActiveRun:
    """Open a run (status ``running``, recorded at once) and make it the current run.

    Use it as a context manager: leaving the block completes the run; an exception inside it
    records status ``failed`` with the error and is re-raised; SIGTERM records ``interrupted``.

    The step options feed ``log_step``: ``total_steps`` gives the console line its ETA,
    ``tokens_per_step`` gives tokens/s, with ``flops_per_token`` and ``peak_flops`` also MFU;
    ``system_per_step`` samples the machine on every logged step instead of every
    ``system_interval_s``.
    """
    if settings is None:
        from warehouse.settings import load

        settings = load()
    return Recorder(settings).start_run(
        experiment,
        config,
        run_id=run_id,
        tags=tags,
        primary_metric=primary_metric,
        direction=direction,
        baseline_error=baseline_error,
        cwd=cwd,
        steps=StepOptions(
            total_steps, tokens_per_step, flops_per_token, peak_flops, system_per_step
        ),
    )


@dataclass(frozen=True)
class StepOptions:
    """What the step logger needs beyond the steps themselves (see :func:`start_run`)."""

    total_steps: int | None = None
    tokens_per_step: float | None = None
    flops_per_token: float | None = None
    peak_flops: float | None = None
    system_per_step: bool = False


class Recorder:
    """Writes runs through the local store (always) and the replicator (when configured)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._store: Store | None = None
        self._objects: ObjectStore | None = None
        self._replicator: Replicator | None = None
        self._replicator_loaded = False

    @property
    def store(self) -> Store:
        """The local store: the first, durable write of every record."""
        if self._store is None:
            from warehouse.stores import open_local_store

            self._store = open_local_store(self.settings)
        return self._store

    @property
    def objects(self) -> ObjectStore:
        """The local object folder: the first, durable copy of every artifact and output."""
        if self._objects is None:
            from warehouse.objects.local import LocalObjectStore

            self._objects = LocalObjectStore(self.settings.resolved_home / "objects")
        return self._objects

    @property
    def replicator(self) -> Replicator | None:
        """Ships records to Elasticsearch / S3 through the outbox; None in local-only mode."""
        if not self._replicator_loaded:
            self._replicator_loaded = True
            if self.settings.store_engine != "local" or self.settings.s3_url:
                from warehouse.outbox import Replicator

                self._replicator = Replicator.from_settings(self.settings)
        return self._replicator

    def start_run(
        self,
        experiment: str | None = None,
        config: Any = None,
        *,
        run_id: str | None = None,
        tags: Iterable[str] = (),
        primary_metric: str | None = None,
        direction: str | None = None,
        baseline_error: float | None = None,
        cwd: Path | None = None,
        total_steps: int | None = None,
        hydra: tuple[list[str], dict[str, Any]] | None = None,
        steps: StepOptions | None = None,
    ) -> ActiveRun:
        """Capture config, git and environment, write the ``running`` record, return the run."""
        from warehouse.capture.config import capture_config, hydra_info
        from warehouse.capture.environment import capture_environment
        from warehouse.capture.git import capture_git

        s = self.settings
        name = experiment or s.experiment or "default"
        captured = capture_config(config, s.redact_patterns)
        overrides, hydra_meta = hydra if hydra is not None else hydra_info(s.redact_patterns)
        env = capture_environment()
        metric = primary_metric or s.primary_metric
        try:
            split, metric_name = parse_metric_path(metric)
        except ValueError as exc:
            raise InvalidRecord(str(exc)) from None
        wanted = direction or s.direction or infer_direction(metric_name)
        if wanted not in ("max", "min"):
            raise InvalidRecord(f"direction must be 'max' or 'min', not {wanted!r}")
        direct: Literal["max", "min"] = "max" if wanted == "max" else "min"
        git_dir = cwd or Path(hydra_meta.get("original_cwd") or Path.cwd())
        git, diff = capture_git(git_dir, with_diff=s.capture_git_diff)

        record = Run(
            experiment=normalise_experiment(name),
            project=s.project,
            tags=sorted({str(t) for t in tags}),
            user=env.get("user"),
            host=env.get("host"),
            git=git,
            config=captured.config,
            overrides=list(overrides or captured.overrides),
            hydra=dict(hydra_meta or captured.hydra),
            params=captured.params,
            environment=env,
            primary_metric=PrimaryMetric(
                name=f"{split}.{metric_name}", split=split, metric=metric_name, direction=direct
            ),
        )
        if run_id:
            record.run_id = run_id
        record.heartbeat_at = record.started_at
        run = ActiveRun(
            self,
            record,
            baseline_error=s.baseline_error if baseline_error is None else baseline_error,
            steps=steps or StepOptions(total_steps=total_steps),
        )
        run._secrets = captured.secrets
        run._resumed = bool(run_id)
        if diff:
            run.log_artifact(
                diff.encode("utf-8"), "git.diff", kind="git", content_type="text/x-diff"
            )
            run.record.git.diff_uri = run.record.artifacts[-1].uri
        run.save()
        run._watch_sigterm()
        _CURRENT.set(run)
        return run

    def write_run(self, record: Run) -> None:
        doc = record.to_doc()
        self.store.write_runs([doc])
        if self.replicator is not None:
            self.replicator.publish_run(doc)

    def close(self) -> None:
        """Release the stores; they reopen lazily if the recorder is used again."""
        if self._replicator is not None:
            self._replicator.close()
        if self._store is not None:
            self._store.close()
        self._store, self._replicator, self._replicator_loaded = None, None, False


def normalise_experiment(name: str) -> str:
    """Experiment names are kept as given, minus surrounding blanks; empty is refused."""
    cleaned = str(name).strip()
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


_F = TypeVar("_F", bound=Callable[..., Any])


def _holding_locks(method: _F) -> _F:
    """Marks an ActiveRun method that takes store or file locks: a SIGTERM arriving on the
    main thread meanwhile is handled when the outermost such call returns, not inside it."""

    @functools.wraps(method)
    def wrapper(self: ActiveRun, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return method(self, *args, **kwargs)
        self._writing += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._writing -= 1
            pending = self._deferred_sigterm
            if not self._writing and pending is not None:
                self._deferred_sigterm = None
                self._on_sigterm(*pending)

    return wrapper  # type: ignore[return-value]


class ActiveRun:
    """A run being recorded: log metrics, samples, outputs, artifacts and steps, then end it."""

    def __init__(
        self,
        recorder: Recorder,
        record: Run,
        *,
        baseline_error: float = 0.0,
        steps: StepOptions | None = None,
    ) -> None:
        self._recorder = recorder
        self.record = record
        self.baseline_error = baseline_error
        self.step_options = steps or StepOptions()
        self._previous_sigterm: Any = None
        self._outputs: dict[str, dict[str, str]] = {}  # split -> sample_id -> uri
        self._stale_splits: set[str] = set()  # samples written before some of their outputs
        self._steps: StepLogger | None = None
        self._ended = False
        self._writing = 0  # main-thread writes under way (store and file locks held)
        self._secrets: frozenset[str] = frozenset()  # the config's, scrubbed from errors
        self._resumed = False  # started with the run id of an earlier attempt
        self._deferred_sigterm: tuple[int, Any] | None = None

    # identity ---------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def experiment(self) -> str:
        return self.record.experiment

    @property
    def settings(self) -> Settings:
        return self._recorder.settings

    # metrics ----------------------------------------------------------------------------
    def log_metrics(self, split: str, metrics: Mapping[str, Any]) -> None:
        """Record final metrics of one split (``"val"``, {"acc": 0.93}); later calls merge.

        Names are normalised (see ``warehouse.models``). NaN/±inf are not stored as numbers:
        they are listed under ``invalid_metrics`` and a warning names them. A non-numeric
        value raises ``InvalidRecord`` naming the metric.
        """
        split_name = normalise_name(split)
        clean: dict[str, float] = {}
        invalid: list[str] = []
        for raw_name, value in metrics.items():
            name = normalise_name(raw_name)
            number = _as_number(split_name, raw_name, value)
            if math.isfinite(number):
                clean[name] = number
            else:
                invalid.append(f"{split_name}.{name}")
        target = self.record.metrics.setdefault(split_name, {})
        target.update(clean)
        for path in invalid:
            target.pop(path.split(".", 1)[1], None)
            if path not in self.record.invalid_metrics:
                self.record.invalid_metrics.append(path)
        for path in [p for p in self.record.invalid_metrics if p.startswith(f"{split_name}.")]:
            if path.split(".", 1)[1] in clean:
                self.record.invalid_metrics.remove(path)
        if invalid:
            log.warning(
                "run %s: non-finite metric value(s) not stored as numbers: %s "
                "(listed under invalid_metrics)",
                self.run_id,
                ", ".join(invalid),
            )

    def log_metric(self, split: str, name: str, value: float) -> None:
        """One final metric of one split."""
        self.log_metrics(split, {name: value})

    def set_tags(self, *tags: str) -> None:
        """Add tags to the run (kept sorted, unique)."""
        self.record.tags = sorted(set(self.record.tags) | {str(t) for t in tags})

    # samples and outputs ----------------------------------------------------------------
    @_holding_locks
    def log_samples(self, split: str, rows: Any) -> int:
        """Record per-sample results of one split; return the number of rows written.

        ``rows``: a pandas DataFrame, a pyarrow Table/RecordBatch, or an iterable of mappings,
        each with a ``sample_id``. Rows stream to the store in batches, so millions of rows
        never exist as Python objects at once. An ``output`` column (bytes or a file path, with
        an optional ``output_content_type``) is stored as the sample's model output and
        replaced by its ``output_uri``. Calling it again for the same split replaces that
        split's samples.
        """
        split_name = normalise_name(split)
        batches = self._sample_batches(split_name, rows)
        count = self._recorder.store.write_samples(
            self.run_id, self.experiment, split_name, batches
        )
        self.record.sample_counts[split_name] = count
        self._stale_splits.discard(split_name)
        if self._recorder.replicator is not None:
            self._recorder.replicator.publish_samples(self.run_id, self.experiment, split_name)
        return count

    def log_output(
        self,
        split: str,
        sample_id: str | int,
        data_or_path: bytes | str | os.PathLike[str],
        content_type: str | None = None,
    ) -> str:
        """Store one sample's model output and link it as that sample's ``output_uri``."""
        split_name = normalise_name(split)
        sid = str(sample_id)
        suffix = ""
        if not isinstance(data_or_path, bytes | bytearray):
            suffix = Path(data_or_path).suffix
        if not suffix and content_type:
            suffix = mimetypes.guess_extension(content_type) or ""
        ref = self.log_artifact(
            data_or_path,
            f"{split_name}/{sid}{suffix}",
            kind="outputs",
            content_type=content_type,
            attach=False,
        )
        self._outputs.setdefault(split_name, {})[sid] = ref.uri
        if split_name in self.record.sample_counts:
            self._stale_splits.add(split_name)
        return ref.uri

    @_holding_locks
    def log_artifact(
        self,
        path_or_bytes: bytes | str | os.PathLike[str],
        name: str | None = None,
        *,
        kind: str = "artifacts",
        content_type: str | None = None,
        attach: bool = True,
    ) -> ArtifactRef:
        """Store a file (or bytes) in object storage; the run keeps its URI, size and sha256."""
        if isinstance(path_or_bytes, bytes | bytearray):
            if not name:
                raise InvalidRecord("log_artifact(bytes) needs a name, e.g. name='model.pt'")
            data = bytes(path_or_bytes)
            digest, size = hashlib.sha256(data).hexdigest(), len(data)
            source: bytes | Path = data
        else:
            source = Path(path_or_bytes)
            if not source.is_file():
                raise InvalidRecord(f"artifact {source} is not a file; pass an existing path")
            digest, size = _hash_file(source)
            name = name or source.name
        assert name is not None
        ctype = content_type or mimetypes.guess_type(name)[0]
        key = object_key(self.experiment, self.run_id, kind, name)
        uri = self._recorder.objects.put(key, source, content_type=ctype, sha256=digest)
        settings = self.settings
        if settings.s3_url and self._recorder.replicator is not None:
            local_path = settings.resolved_home / "objects" / key
            self._recorder.replicator.publish_object(key, local_path, ctype, digest)
            uri = f"{settings.s3_url.rstrip('/')}/{key}"
        ref = ArtifactRef(
            name=name, uri=uri, kind=kind, size_bytes=size, sha256=digest, content_type=ctype
        )
        if attach:
            self.record.artifacts = [
                a for a in self.record.artifacts if a.name != name or a.kind != kind
            ]
            self.record.artifacts.append(ref)
        return ref

    # steps ------------------------------------------------------------------------------
    def log_step(self, step: int, epoch: int | None = None, **metrics: float) -> None:
        """Log training metrics of one step; cheap: the work happens on a background thread."""
        steps = self._steps
        if steps is None:
            steps = self.open_steps()
        steps.log_step(step, epoch, **metrics)

    def open_steps(self) -> StepLogger:
        """Start the step logger (and its system sampler) now rather than at the first step."""
        if self._steps is not None:
            return self._steps
        from warehouse.live.steps import StepLogger

        store = self._recorder.store
        replicator = self._recorder.replicator
        run_id, experiment = self.run_id, self.experiment

        def sink(docs: list[dict[str, Any]]) -> None:
            store.write_steps(run_id, experiment, docs)
            if replicator is not None:
                replicator.publish_steps(run_id, experiment, docs)

        s, o = self.settings, self.step_options
        self._steps = StepLogger(
            run_id,
            experiment,
            sink,
            s.resolved_home / "spill" / run_id,
            console=s.console,
            total_steps=o.total_steps,
            system_interval_s=s.system_interval_s,
            system_per_step=o.system_per_step,
            tokens_per_step=o.tokens_per_step,
            flops_per_token=o.flops_per_token,
            peak_flops=o.peak_flops,
            first_seq=self._next_seq() if self._resumed else 0,
        )
        return self._steps

    def _next_seq(self) -> int:
        """After the steps already stored for this run id (a resumed run must not reuse a
        ``run_id:seq`` id: it would replace the earlier attempt's steps)."""
        from warehouse.stores.base import StepRange

        try:
            stored = self._recorder.store.steps(StepRange(run_id=self.run_id))
            return max((int(d.get("seq", -1)) for d in stored), default=-1) + 1
        except WarehouseError as exc:
            log.warning("run %s: cannot read its stored steps (%s)", self.run_id, exc)
            return 0

    # life -------------------------------------------------------------------------------
    def heartbeat(self) -> None:
        """Mark the run alive now (a run whose heartbeat stops is lost, not running)."""
        self.record.heartbeat_at = utcnow()
        self.save()

    @_holding_locks
    def save(self) -> None:
        """Write the run record as it is now (replacing the previous version)."""
        self._finish_metrics()
        self._recorder.write_run(self.record)

    @_holding_locks
    def end(
        self,
        status: RunStatus | str = RunStatus.COMPLETED,
        error: BaseException | None = None,
    ) -> Run:
        """Close the run: flush steps and outputs, set status, times and scores, write it."""
        if self._ended:
            return self.record
        self._ended = True
        try:
            if self._steps is not None:
                self._steps.close()
            self._relink_outputs()
            rec = self.record
            rec.status = RunStatus(status)
            if error is not None:
                from warehouse.capture.redact import scrub_text

                patterns = self.settings.redact_patterns
                trace = "".join(traceback.format_exception(error))[-20_000:]
                rec.error = RunError(
                    type=type(error).__name__,
                    message=scrub_text(str(error), self._secrets, patterns),
                    traceback=scrub_text(trace, self._secrets, patterns),
                )
            rec.ended_at = utcnow()
            rec.heartbeat_at = rec.ended_at
            rec.duration_s = (rec.ended_at - rec.started_at).total_seconds()
            self.save()
        finally:
            self._unwatch_sigterm()
            if _CURRENT.get() is self:
                _CURRENT.set(None)
            self._recorder.close()
        return self.record

    def _watch_sigterm(self) -> None:
        """On SIGTERM, record ``interrupted`` (steps flushed), then let the signal go on."""
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:  # not the main interpreter
            self._previous_sigterm = None

    def _unwatch_sigterm(self) -> None:
        if self._previous_sigterm is None:
            return
        with contextlib.suppress(ValueError):
            if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                signal.signal(signal.SIGTERM, self._previous_sigterm)
        self._previous_sigterm = None

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        if self._writing:
            # the interrupted frame holds the store's locks (not reentrant): recording now
            # would wait on them forever; the write finishes, then this handler runs
            self._deferred_sigterm = (signum, frame)
            return
        previous = self._previous_sigterm
        try:
            self.end(RunStatus.INTERRUPTED, _Terminated("terminated by SIGTERM"))
        except Exception:  # the run stays 'running'; never block the termination
            log.exception("run %s: could not record the interruption", self.run_id)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.end(RunStatus.COMPLETED)
        elif isinstance(exc, KeyboardInterrupt):
            self.end(RunStatus.INTERRUPTED, exc)
        else:
            self.end(RunStatus.FAILED, exc)

    # internals --------------------------------------------------------------------------
    def _finish_metrics(self) -> None:
        rec = self.record
        pm = rec.primary_metric
        if pm is None:
            return
        pm.value = rec.metrics.get(pm.split, {}).get(pm.metric)
        rec.decomposition = decompose(rec.metrics, pm.metric, pm.direction, self.baseline_error)

    def _sample_batches(self, split: str, rows: Any) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for batch in _iter_batches(rows):
            names = [normalise_sample_column(n) for n in batch.schema.names]
            if len(set(names)) != len(names):
                raise InvalidRecord(
                    f"sample columns {batch.schema.names} collide once normalised to {names}"
                )
            batch = batch.rename_columns(names)
            if "sample_id" not in names:
                raise InvalidRecord(
                    f"samples of split {split!r} have no 'sample_id' column "
                    f"(columns: {', '.join(names)}); add one that identifies each sample"
                )
            batch = batch.set_column(
                names.index("sample_id"), "sample_id", batch.column("sample_id").cast(pa.string())
            )
            batch = _nan_to_null(batch)
            if "output" in names:
                batch = self._store_inline_outputs(split, batch)
            outputs = self._outputs.get(split)
            if outputs:
                batch = _with_output_uris(batch, outputs)
            yield batch

    def _store_inline_outputs(self, split: str, batch: pa.RecordBatch) -> pa.RecordBatch:
        import pyarrow as pa

        names = batch.schema.names
        ids = batch.column("sample_id").to_pylist()
        data = batch.column("output").to_pylist()
        types = (
            batch.column("output_content_type").to_pylist()
            if "output_content_type" in names
            else [None] * len(ids)
        )
        for sid, payload, ctype in zip(ids, data, types, strict=True):
            if payload is not None:
                self.log_output(split, sid, payload, ctype)
        self._stale_splits.discard(split)
        keep = [i for i, n in enumerate(names) if n not in ("output", "output_content_type")]
        return pa.RecordBatch.from_arrays(
            [batch.column(i) for i in keep], names=[names[i] for i in keep]
        )

    def _relink_outputs(self) -> None:
        """Outputs logged after their split's samples: rewrite that split with the URIs."""
        from warehouse.stores.base import SampleQuery

        for split in sorted(self._stale_splits):
            rows = list(
                self._recorder.store.search_samples(
                    SampleQuery(run_id=self.run_id, split=split, limit=None)
                )
            )
            fixed = ("run_id", "experiment", "split", "recorded_at")
            self.log_samples(split, [{k: v for k, v in r.items() if k not in fixed} for r in rows])
        self._stale_splits.clear()


class _Terminated(Exception):
    """The process received SIGTERM (recorded as the run's error)."""


def normalise_sample_column(name: str) -> str:
    """Sample column names follow the metric-name rule (letters, digits, ``_``, ``-``)."""
    return normalise_name(name)


def _as_number(split: str, name: str, value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, numbers.Real):
        try:
            return float(value)
        except OverflowError:  # an int beyond float range (10**400): not a finite number
            return -math.inf if str(value).startswith("-") else math.inf
    item = getattr(value, "item", None)  # numpy / torch scalars
    if callable(item):
        try:
            inner = item()
        except (TypeError, ValueError):
            inner = None
        if isinstance(inner, numbers.Real):
            return float(inner)
    raise InvalidRecord(
        f"metric {split}.{name} has non-numeric value {value!r} ({type(value).__name__}); "
        "metrics must be numbers — record text as a tag or in the config"
    )


def _hash_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _iter_batches(rows: Any) -> Iterator[pa.RecordBatch]:
    """Any supported rows container as a stream of record batches."""
    import pyarrow as pa

    if isinstance(rows, pa.RecordBatch):
        yield rows
        return
    if isinstance(rows, pa.Table):
        yield from rows.to_batches(max_chunksize=_BATCH_ROWS)
        return
    if type(rows).__module__.startswith("pandas") and hasattr(rows, "to_dict"):
        table = pa.Table.from_pandas(rows, preserve_index=False)
        yield from table.to_batches(max_chunksize=_BATCH_ROWS)
        return
    if isinstance(rows, Mapping | str | bytes):
        raise InvalidRecord(
            "log_samples takes rows (a DataFrame, an Arrow table or an iterable of mappings), "
            f"not a {type(rows).__name__}"
        )
    chunk: list[Mapping[str, Any]] = []
    for row in rows:
        if not isinstance(row, Mapping):
            raise InvalidRecord(f"a sample row must be a mapping, not {type(row).__name__}")
        chunk.append(row)
        if len(chunk) >= _BATCH_ROWS:
            yield _batch_from_rows(chunk)
            chunk = []
    if chunk:
        yield _batch_from_rows(chunk)


def _batch_from_rows(rows: list[Mapping[str, Any]]) -> pa.RecordBatch:
    import pyarrow as pa

    try:
        return pa.RecordBatch.from_pylist([dict(r) for r in rows])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InvalidRecord(f"sample rows have inconsistent column types: {exc}") from None


def _nan_to_null(batch: pa.RecordBatch) -> pa.RecordBatch:
    """NaN/±inf sample values become missing, so every store answers the same (JSON has no NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = list(batch.columns)
    changed = False
    for i, column in enumerate(columns):
        if pa.types.is_floating(column.type) and column.null_count < len(column):
            bad = pc.invert(pc.is_finite(column))
            if pc.any(bad).as_py():
                columns[i] = pc.if_else(bad, pa.scalar(None, column.type), column)
                changed = True
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema) if changed else batch


def _with_output_uris(batch: pa.RecordBatch, outputs: Mapping[str, str]) -> pa.RecordBatch:
    import pyarrow as pa

    ids = batch.column("sample_id").to_pylist()
    names = batch.schema.names
    existing = (
        batch.column("output_uri").to_pylist() if "output_uri" in names else [None] * len(ids)
    )
    uris = pa.array(
        [outputs.get(sid, old) for sid, old in zip(ids, existing, strict=True)], type=pa.string()
    )
    if "output_uri" in names:
        return batch.set_column(names.index("output_uri"), "output_uri", uris)
    return batch.append_column("output_uri", uris)


__all__ = ["ActiveRun", "Recorder", "WarehouseError", "current_run", "log_step", "start_run"]
