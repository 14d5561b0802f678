"""ActiveRun: a run being recorded — metrics, samples, outputs, artifacts, steps, then its end.

Policy lives here, once: metric validation (NaN/inf → ``invalid_metrics``, non-numbers refused),
name normalisation (the rules themselves: ``run_rules``), the primary metric and the
bias/variance decomposition, the record's version (``updated_at``), and what the run's status
becomes on each way it can end. Writes go straight to the recorder's store and object store
(the durable path: see ``replication/``); the process-wide
:class:`~warehouse.live.lifecycle.Lifecycle` ends the run on SIGTERM and at exit, and beats its
heartbeat.

    with warehouse.start_run(experiment="resnet", config=cfg) as run:
        run.log_metrics("val", {"acc": 0.93})
        run.log_samples("val", rows)
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import mimetypes
import os
import threading
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

from warehouse.capture.limits import NOTES
from warehouse.errors import InvalidRecord, WarehouseError, refuse_unknown_keywords
from warehouse.live.lifecycle import Lifecycle
from warehouse.models import (
    ArtifactRef,
    Run,
    RunError,
    RunStatus,
    decompose,
    utcnow,
)
from warehouse.objects.base import object_key
from warehouse.query.status import lost_after
from warehouse.recording.run_rules import Names, as_number, sample_columns
from warehouse.stores.doc_digest import stamp
from warehouse.values import json_safe

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.capture.scrub import RunScrub
    from warehouse.live.steps import StepLogger, StepOptions
    from warehouse.objects.base import ObjectStore
    from warehouse.query.summary import SplitSummary
    from warehouse.settings import Settings
    from warehouse.stores.base import Store

log = logging.getLogger(__name__)
_MESSAGE_MAX = 64 * 1024  # characters of an error message kept on the run


class RunHost(Protocol):
    """What an open run writes through (the :class:`~warehouse.recording.recorder.Recorder`)."""

    settings: Settings

    @property
    def store(self) -> Store: ...

    @property
    def objects(self) -> ObjectStore: ...

    def forget(self, run: ActiveRun) -> None:
        """The run has ended: it is no longer the current run."""

    def announce(self, record: Run) -> None:
        """Say where the run went."""

    def close(self) -> None:
        """Release the stores."""


@refuse_unknown_keywords
class ActiveRun:
    """A run being recorded: log metrics, samples, outputs, artifacts and steps, then end it."""

    def __init__(
        self,
        recorder: RunHost,
        record: Run,
        *,
        baseline_error: float = 0.0,
        steps: StepOptions | None = None,
        secrets: frozenset[str] = frozenset(),
        resumed: bool = False,
    ) -> None:
        from warehouse.live.steps import StepOptions

        self._recorder = recorder
        self.record = record
        self.baseline_error = baseline_error
        self.step_options = steps or StepOptions()
        self._outputs: dict[str, dict[str, str]] = {}  # split -> sample_id -> uri
        self._stale_splits: set[str] = set()  # samples written before some of their outputs
        self._steps: StepLogger | None = None
        self._ended = False
        self._lock = threading.RLock()  # the record: the heartbeat thread saves it too
        # per split: what the samples' statistics need (warehouse.query.summary); the
        # intervals on the record (metrics_ci) are derived from them
        self._samples: dict[str, SplitSummary] = {}
        self._names = Names()  # the names as logged behind each stored one (collisions)
        self._secrets = secrets  # the config's, scrubbed from errors
        self._resumed = resumed  # started with the run id of an earlier attempt
        self._notes: set[str] = set()  # what recording changed, kept on the record

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

    @functools.cached_property
    def _scrub(self) -> RunScrub:
        """Every string the run takes in passes here (issue 28): the settings' redaction, the
        config's secrets too, and where something was replaced."""
        from warehouse.capture.scrub import RunScrub

        return RunScrub(self.settings.redaction, self._secrets)

    # metrics ----------------------------------------------------------------------------
    def log_metrics(self, split: str, metrics: Mapping[str, Any]) -> None:
        """Record final metrics of one split (``"val"``, {"acc": 0.93}); later calls merge.

        Names are normalised (see ``warehouse.models``); two names that become the same stored
        name (``top-1 acc`` and ``top-1.acc``, in one call or across calls) raise
        ``InvalidRecord`` and nothing of the call is stored. NaN/±inf are not stored as numbers:
        they are listed under ``invalid_metrics`` and a warning names them. A non-numeric
        value raises ``InvalidRecord`` naming the metric.
        """
        split_name = self._names.split(self._scrub.name(str(split), "metrics"))
        metrics = self._scrub.names(metrics, f"metrics.{split_name}")
        names = self._names.metrics(split_name, metrics)
        clean: dict[str, float] = {}
        invalid: list[str] = []
        for raw_name, value in metrics.items():
            name = names[raw_name]
            number = as_number(split_name, raw_name, value)
            if math.isfinite(number):
                clean[name] = number
            else:
                invalid.append(f"{split_name}.{name}")
        with self._lock:
            rec = self.record
            target = rec.metrics.setdefault(split_name, {})
            target.update(clean)
            for path in invalid:
                target.pop(path.split(".", 1)[1], None)
                if path not in rec.invalid_metrics:
                    rec.invalid_metrics.append(path)
            for path in [p for p in rec.invalid_metrics if p.startswith(f"{split_name}.")]:
                if path.split(".", 1)[1] in clean:
                    rec.invalid_metrics.remove(path)
        if invalid:
            log.warning(
                "run %s: non-finite metric value(s) not stored as numbers: %s "
                "(listed under invalid_metrics)",
                self.run_id,
                ", ".join(invalid),
            )

    def note(self, text: str) -> None:
        """Keep on the record a note of something recording changed (``recording_notes``)."""
        self._notes.add(text)

    def log_metric(self, split: str, name: str, value: float) -> None:
        """One final metric of one split."""
        self.log_metrics(split, {name: value})

    def set_tags(self, *tags: str) -> None:
        """Add tags to the run (kept sorted, unique)."""
        from warehouse.capture.redact import redact_overrides

        clean = redact_overrides([str(t) for t in tags], self._scrub.policy)
        with self._lock:
            self.record.tags = sorted(set(self.record.tags) | set(clean))

    # samples and outputs ----------------------------------------------------------------
    def log_samples(
        self,
        split: str,
        rows: Any,
        *,
        metric_columns: Mapping[str, str] | None = None,
        cluster: str | None = None,
    ) -> int:
        """Record per-sample results of one split; return the number of rows written.

        ``rows``: a pandas DataFrame, a pyarrow Table/RecordBatch, or an iterable of mappings,
        each with a ``sample_id``. Rows stream to the store in batches, so millions of rows
        never exist as Python objects at once. An ``output`` column (bytes or a file path, with
        an optional ``output_content_type``) is stored as the sample's model output and
        replaced by its ``output_uri``. Calling it again for the same split replaces that
        split's samples.

        Every row needs a ``sample_id``, unique within the split: rows without one, or an id
        given twice, raise ``InvalidRecord`` and nothing of the split is stored (the split
        logged before, if any, stays).

        Each of the split's metrics gets a 95 % interval (``metrics_ci.<split>.<metric>``)
        when its samples reproduce the logged value (:mod:`warehouse.query.aggregates`):
        ``metric_columns`` says how a metric is computed from the samples, as a column it is
        the mean of (``{"acc": "correct"}``) or a formula (``{"bleu":
        "sum(matches)/sum(length)"}``, ``{"acc": "100*mean(correct)"}``); otherwise the
        naming rule's column (:func:`warehouse.models.sample_column_for`). ``cluster``: a
        sample column whose equal values are not independent (a passage, a conversation):
        the intervals and tests treat each cluster as one unit.
        """
        from warehouse.query.summary import SplitSummary

        split_name = self._names.split(self._scrub.name(str(split), "samples"))
        kept = self._samples.get(split_name)
        self._samples[split_name] = SplitSummary(metric_columns, cluster)
        with Lifecycle.current().writing():
            batches = self._sample_batches(split_name, rows)
            try:
                count = self._recorder.store.write_samples(
                    self.run_id, self.experiment, split_name, batches
                )
            except BaseException:  # refused or failed: the split stored before still counts
                self._samples.pop(split_name, None)
                if kept is not None:
                    self._samples[split_name] = kept
                raise
        with self._lock:
            self.record.sample_counts[split_name] = count
        self._stale_splits.discard(split_name)
        return count

    def log_output(
        self,
        split: str,
        sample_id: str | int,
        data_or_path: bytes | str | os.PathLike[str],
        content_type: str | None = None,
    ) -> str:
        """Store one sample's model output and link it as that sample's ``output_uri``."""
        split_name = self._names.split(self._scrub.name(str(split), "samples"))
        sid = self._scrub.name(str(sample_id), f"samples.{split_name}.sample_id")
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
        name = self._scrub.text(name, "artifacts")
        ctype = content_type or mimetypes.guess_type(name)[0]
        key = object_key(self.experiment, self.run_id, kind, name)
        with Lifecycle.current().writing():
            uri = self._recorder.objects.put(key, source, content_type=ctype, sha256=digest)
        ref = ArtifactRef(
            name=name, uri=uri, kind=kind, size_bytes=size, sha256=digest, content_type=ctype
        )
        if attach:
            with self._lock:
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
        if not self._scrub.known(metrics):  # a name not seen before: scrubbed once, then known
            metrics = self._scrub.names(metrics, "steps")
        steps.log_step(step, epoch, **metrics)

    def log_step_metrics(self, step: int, epoch: int | None, metrics: Mapping[str, float]) -> None:
        """:meth:`log_step` with the metrics in a mapping, whatever their names: ``epoch`` or
        ``step`` too (``warehouse watch`` records the names a program prints); the names
        scrubbed as :meth:`log_step`'s."""
        if not self._scrub.known(metrics):
            metrics = self._scrub.names(metrics, "steps")
        (self._steps or self.open_steps()).log_step(step, epoch, **metrics)

    def open_steps(self) -> StepLogger:
        """Start the step logger (and its system sampler) now rather than at the first step."""
        if self._steps is not None:
            return self._steps
        from warehouse.live.steps import StepLogger

        store = self._recorder.store
        run_id, experiment = self.run_id, self.experiment

        def sink(docs: list[dict[str, Any]]) -> None:
            store.write_steps(run_id, experiment, docs)

        s = self.settings
        options = replace(
            self.step_options,
            console=s.console,
            system_interval_s=s.system_interval_s,
            first_seq=self._next_seq() if self._resumed else 0,
        )
        self._steps = StepLogger(run_id, experiment, sink, options)
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
        with self._lock:
            if self._ended:
                return
            self.record.heartbeat_at = utcnow()
            self.save()

    def save(self) -> None:
        """Write the run record as it is now (a new version replacing the previous one)."""
        with Lifecycle.current().writing(), self._lock:
            self._finish_metrics()
            rec = self.record
            now = utcnow()
            if rec.updated_at is not None and now <= rec.updated_at:
                now = rec.updated_at + timedelta(microseconds=1)  # versions only grow
            rec.updated_at = now
            beat = rec.heartbeat_at or rec.started_at
            running = rec.status == RunStatus.RUNNING
            rec.lost_at = (
                beat + timedelta(seconds=lost_after(self.settings.heartbeat_s)) if running else None
            )
            try:
                doc = rec.to_doc()
            except UnicodeEncodeError:  # a lone surrogate: the store's fit_run replaces it
                doc = json_safe(rec.model_dump(mode="python"))
            doc["redacted"] = rec.redacted = sorted({*rec.redacted, *self._scrub.places_of(doc)})
            if self._notes:
                doc[NOTES] = sorted(self._notes)
            self._recorder.store.write_runs([stamp(doc)])  # with its content digest

    def end(
        self,
        status: RunStatus | str = RunStatus.COMPLETED,
        error: BaseException | None = None,
    ) -> Run:
        """Close the run: flush steps and outputs, set status, times and scores, write it.

        SIGTERM and Ctrl-C arriving meanwhile wait until the record is written."""
        with Lifecycle.current().writing():
            with self._lock:
                if self._ended:
                    return self.record
                self._ended = True
            try:
                if self._steps is not None:
                    self._steps.close()
                self._relink_outputs()
                with self._lock:
                    rec = self.record
                    rec.status = RunStatus(status)
                    if error is not None:
                        rec.error = self._error_of(error)
                    rec.ended_at = utcnow()
                    rec.heartbeat_at = rec.ended_at
                    rec.duration_s = (rec.ended_at - rec.started_at).total_seconds()
                    self.save()
            finally:
                Lifecycle.current().leave(self)
                self._recorder.forget(self)
                self._recorder.close()
        self._recorder.announce(self.record)
        return self.record

    def _error_of(self, error: BaseException) -> RunError:
        policy = self._scrub.policy  # secret environment values and the config's secrets too
        trace = "".join(traceback.format_exception(error))[-20_000:]
        message = str(error)
        if len(message) > _MESSAGE_MAX:  # a huge message (a dumped tensor) would bloat the run
            cut = len(message) - _MESSAGE_MAX
            message = f"{message[:_MESSAGE_MAX]} [cut by warehouse: {cut:,} more characters]"
        return RunError(
            type=type(error).__name__,
            message=policy.text(message),
            traceback=policy.text(trace),
        )

    # the lifecycle's calls --------------------------------------------------------------
    def terminate(self, reason: str) -> None:
        """SIGTERM: record ``interrupted`` (steps flushed)."""
        self.end(RunStatus.INTERRUPTED, _Terminated(reason))

    def at_exit(self, error: BaseException | None) -> None:
        """The interpreter exits with the run still open: ``failed`` when an uncaught
        exception ends the process, else ``completed`` (as MLflow ends an active run)."""
        if error is None:
            self.end(RunStatus.COMPLETED)
        elif isinstance(error, KeyboardInterrupt):
            self.end(RunStatus.INTERRUPTED, error)
        else:
            self.end(RunStatus.FAILED, error)

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
        self._intervals()
        pm = rec.primary_metric
        if pm is None:
            return
        pm.value = rec.metrics.get(pm.split, {}).get(pm.metric)
        rec.decomposition = decompose(rec.metrics, pm.metric, pm.direction, self.baseline_error)

    def _intervals(self) -> None:
        """``metrics_ci``: each metric's interval, where its samples describe it."""
        for split, summary in self._samples.items():
            found = summary.metrics_ci(self.record.metrics.get(split, {}))
            if found:
                self.record.metrics_ci[split] = found
            else:
                self.record.metrics_ci.pop(split, None)

    def _sample_batches(self, split: str, rows: Any) -> Iterator[pa.RecordBatch]:
        from warehouse.recording.sample_rows import iter_batches, nan_to_null, with_output_uris
        from warehouse.stores.sample_ids import SampleIds

        ids = SampleIds(self.run_id, split)
        cleaned: set[str] = set()
        for raw in iter_batches(rows, cleaned):  # secrets out first: names and text of columns
            raw = self._scrub.batch(raw, f"samples.{split}", skip=("output", "output_content_type"))
            batch = sample_columns(split, raw)
            ids.check(batch)  # before any output of the batch is stored
            batch = nan_to_null(batch)
            self._samples[split].add(batch)
            if "output" in batch.schema.names:
                batch = self._store_inline_outputs(split, batch)
            outputs = self._outputs.get(split)
            if outputs:
                batch = with_output_uris(batch, outputs)
            yield batch
        ids.finish()  # raised into the store's write: the split is not stored
        if cleaned:
            columns = ", ".join(sorted(cleaned))
            self.note(
                f"samples {split}: characters UTF-8 cannot store replaced with U+FFFD in {columns}"
            )

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
            kept = self._samples.get(split)  # the split's declarations hold for the rewrite
            self.log_samples(
                split,
                [{k: v for k, v in r.items() if k not in fixed} for r in rows],
                metric_columns=kept.metric_columns if kept else None,
                cluster=kept.cluster if kept else None,
            )
        self._stale_splits.clear()


class _Terminated(Exception):
    """The process received SIGTERM (recorded as the run's error)."""


def _hash_file(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as src:
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


__all__ = ["ActiveRun", "RunHost", "as_number"]
