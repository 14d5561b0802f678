"""The records: run, sample result, step, artifact reference — and the names and ids they use.

A run document is what every store keeps, one per ``run_id``; its JSON form (``Run.to_doc``)
is the same in the local store and in Elasticsearch. Field names are the user's nouns:
``metrics.<split>.<metric>``, ``params.<dotted.config.key>``, ``primary_metric``.

Metric and split names may contain letters and digits of any script (``précision``, ``精度``),
``_`` and ``-``. Anything else (dots, slashes, spaces ...) becomes ``_`` — ``"top-1 acc"`` is
stored as ``top-1_acc`` — so a name can never break the dotted field paths;
:func:`normalise_name` is the one place that decides. Two names that become the same stored
name (``top-1 acc`` and ``top-1.acc``) are refused where they are logged, never merged.
"""

from __future__ import annotations

import math
import re
import unicodedata
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
"""Bumped whenever a stored field changes meaning or shape."""

SPLITS = ("train", "val", "test")
"""The splits the bias/variance decomposition reads; others are stored as given."""

_KEPT_CATEGORIES = ("L", "N", "M")  # Unicode letters, digits/numbers, combining marks
_LOWER_IS_BETTER = re.compile(r"(loss|err|error|mse|mae|rmse|perplexity|ppl|wer|cer|nll|fid)", re.I)


def normalise_name(name: str) -> str:
    """A metric/split name safe inside a dotted field path (``"val acc"`` → ``"val_acc"``).

    Letters, digits and marks of every script are kept (NFC-normalised, so ``é`` typed either
    way is one name), as are ``_`` and ``-``; each run of other characters becomes one ``_``.
    """
    text = unicodedata.normalize("NFC", str(name).strip())
    if text.isascii():
        cleaned = _ASCII_BAD.sub("_", text)
    else:
        out: list[str] = []
        for char in text:
            if char in "_-" or _kept(char):
                out.append(char)
            elif not out or out[-1] != "\0":
                out.append("\0")  # a run of other characters: one "_"
        cleaned = "".join(out).replace("\0", "_")
    cleaned = cleaned.strip("_")
    return cleaned or "_"


_ASCII_BAD = re.compile(r"[^A-Za-z0-9_\-]+")


def _kept(char: str) -> bool:
    return unicodedata.category(char)[0] in _KEPT_CATEGORIES


def new_run_id() -> str:
    """A fresh run id: 32 lowercase hex digits, like MLflow's."""
    return uuid.uuid4().hex


def utcnow() -> datetime:
    return datetime.now(UTC)


def infer_direction(metric: str) -> Literal["max", "min"]:
    """``min`` for loss-like metric names (loss, error, mse, perplexity ...), else ``max``."""
    return "min" if _LOWER_IS_BETTER.search(metric) else "max"


def parse_metric_path(path: str) -> tuple[str, str]:
    """``"val.acc"``, ``"val/acc"`` or ``"metrics.val.acc"`` → ``("val", "acc")``."""
    text = path.strip()
    if text.startswith("metrics."):
        text = text[len("metrics.") :]
    for sep in (".", "/"):
        if sep in text:
            split, metric = text.split(sep, 1)
            return normalise_name(split), normalise_name(metric)
    raise ValueError(
        f"metric {path!r} does not name a split: write it as split.metric, e.g. val.acc"
    )


@dataclass(frozen=True)
class Metric:
    """A metric that ranks runs: split, name and direction (``max`` = higher is better)."""

    split: str
    name: str
    direction: Literal["max", "min"]

    @property
    def label(self) -> str:
        """``val.acc``: how users write it."""
        return f"{self.split}.{self.name}"

    @property
    def path(self) -> str:
        """``metrics.val.acc``: the field path in a run document."""
        return f"metrics.{self.split}.{self.name}"

    def better(self, a: float, b: float) -> bool:
        """Whether score ``a`` is strictly better than ``b``."""
        return a > b if self.direction == "max" else a < b


def resolve_metric(metric: str, direction: str | None = None) -> Metric:
    """The :class:`Metric` for ``val.acc`` / ``val/acc`` / ``metrics.val.acc``; the direction
    is inferred from the name when not given. The one place metric names are read."""
    from warehouse.errors import ConfigurationError

    try:
        split, name = parse_metric_path(metric)
    except ValueError as exc:
        raise ConfigurationError(f"{exc} (from --metric or the primary_metric setting)") from None
    wanted = direction if direction is not None else infer_direction(name)
    if wanted not in ("max", "min"):
        raise ConfigurationError(
            f"direction {wanted!r} is neither 'max' (higher is better) nor 'min'"
        )
    return Metric(split, name, "max" if wanted == "max" else "min")


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class GitInfo(BaseModel):
    """The code version: empty fields when the run is not inside a git work tree."""

    model_config = ConfigDict(extra="forbid")

    commit: str | None = None
    branch: str | None = None
    dirty: bool | None = None
    remote: str | None = None
    message: str | None = None
    committed_at: datetime | None = None
    diff_uri: str | None = None
    redacted_files: list[str] = Field(default_factory=list)  # diff: their secrets left out


class ArtifactRef(BaseModel):
    """Where a file lives in object storage, and what it is."""

    model_config = ConfigDict(extra="forbid")

    name: str
    uri: str
    kind: str = "artifact"
    size_bytes: int
    sha256: str
    content_type: str | None = None


class RunError(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str
    message: str
    traceback: str | None = None


class PrimaryMetric(BaseModel):
    """The metric that ranks runs: ``split.metric``, its direction and the run's value."""

    model_config = ConfigDict(extra="forbid")

    name: str  # "val.acc"
    split: str
    metric: str
    direction: Literal["max", "min"]
    value: float | None = None


class Decomposition(BaseModel):
    """Bias/variance after *Machine Learning Yearning*; error = 1 - score, or the loss itself."""

    model_config = ConfigDict(extra="forbid")

    baseline_error: float = 0.0
    train_error: float | None = None
    val_error: float | None = None
    test_error: float | None = None
    avoidable_bias: float | None = None
    variance: float | None = None
    dev_overfit: float | None = None


def error_of(value: float | None, direction: str) -> float | None:
    """The error a score stands for: ``1 - score`` when higher is better, else the value."""
    if value is None or not math.isfinite(value):
        return None
    return 1.0 - value if direction == "max" else value


def decompose(
    metrics: dict[str, dict[str, float]], metric: str, direction: str, baseline: float
) -> Decomposition:
    """The decomposition of one run's ``metrics`` for the primary ``metric`` name."""
    errs = {s: error_of(metrics.get(s, {}).get(metric), direction) for s in SPLITS}
    train, val, test = errs["train"], errs["val"], errs["test"]
    return Decomposition(
        baseline_error=baseline,
        train_error=train,
        val_error=val,
        test_error=test,
        avoidable_bias=None if train is None else train - baseline,
        variance=None if train is None or val is None else val - train,
        dev_overfit=None if val is None or test is None else test - val,
    )


class Run(BaseModel):
    """One training run, as stored: the unit every view is built from."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    run_id: str = Field(default_factory=new_run_id)
    experiment: str
    project: str | None = None
    tags: list[str] = Field(default_factory=list)
    note: str | None = None  # free text, set with `warehouse runs note`
    user: str | None = None
    host: str | None = None

    status: RunStatus = RunStatus.RUNNING
    error: RunError | None = None
    started_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None
    heartbeat_at: datetime | None = None
    lost_at: datetime | None = None  # running: shown as lost if no heartbeat comes by then
    updated_at: datetime | None = None  # when this version was saved: newer replaces older
    duration_s: float | None = None

    git: GitInfo = Field(default_factory=GitInfo)
    config: dict[str, Any] = Field(default_factory=dict)
    overrides: list[str] = Field(default_factory=list)
    hydra: dict[str, Any] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)
    config_hash_noseed: str | None = None  # the same for runs that differ only in seed keys

    metrics: dict[str, dict[str, float]] = Field(default_factory=dict)
    metrics_ci: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    invalid_metrics: list[str] = Field(default_factory=list)
    primary_metric: PrimaryMetric | None = None
    decomposition: Decomposition | None = None

    artifacts: list[ArtifactRef] = Field(default_factory=list)
    sample_counts: dict[str, int] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    redacted: list[str] = Field(default_factory=list)  # where secrets were replaced, never what
    schema_version: int = SCHEMA_VERSION

    def to_doc(self) -> dict[str, Any]:
        """The JSON-ready document every store keeps (datetimes as ISO 8601 strings)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Run:
        return cls.model_validate(doc)


class SampleResult(BaseModel):
    """One sample's result in one split of one run (``_id`` = ``run_id:split:sample_id``).

    Per-sample metrics and any extra columns (label, prediction ...) sit at the top level next
    to the fixed fields, exactly as they are columns in the local store's Parquet files.
    """

    model_config = ConfigDict(extra="allow")

    run_id: str
    experiment: str
    split: str
    sample_id: str
    output_uri: str | None = None
    recorded_at: datetime | None = None

    @property
    def doc_id(self) -> str:
        return sample_doc_id(self.run_id, self.split, self.sample_id)


def sample_doc_id(run_id: str, split: str, sample_id: str) -> str:
    return f"{run_id}:{split}:{sample_id}"


ACCURACY_NAMES = frozenset({"acc", "accuracy", "top1", "top1_acc", "top1_accuracy"})
"""Metric names whose per-sample column is ``correct`` unless one of their own name exists."""


def sample_column_for(
    metric: str, columns: Collection[str], chosen: Mapping[str, str] | None = None
) -> str | None:
    """The per-sample column a run-level metric is the mean of, by the documented rule:
    the column ``log_samples(..., metric_columns={"acc": "correct"})`` names, else the column
    of the metric's own name, else ``correct`` for accuracy-like names (acc, accuracy, top1);
    None when the rule finds no column."""
    if chosen and metric in chosen:
        return chosen[metric] if chosen[metric] in columns else None
    if metric in columns:
        return metric
    if metric.lower() in ACCURACY_NAMES and "correct" in columns:
        return "correct"
    return None


def config_hash(config: Mapping[str, Any], seed_keys: Collection[str] = ()) -> str:
    """A stable hash of a resolved config without its seed keys (glob patterns matched
    against each key's last dotted part): runs that differ only in seeds share it, whatever
    the key order."""
    import fnmatch
    import hashlib
    import json

    from warehouse.filters.docpath import flatten

    kept = {
        key: value
        for key, value in flatten(config).items()
        if not any(fnmatch.fnmatchcase(key.rsplit(".", 1)[-1], p) for p in seed_keys)
    }
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_version(doc: dict[str, Any]) -> int:
    """The version of a run document: its ``updated_at`` in nanoseconds since the epoch (0 for
    documents saved before versions existed). A store keeps the highest version it was given;
    an equal one replaces (replaying a write is harmless)."""
    from warehouse.values import parse_time

    moment = parse_time(doc.get("updated_at"))
    if moment is None:
        return 0
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def step_doc_id(run_id: str, seq: int) -> str:
    return f"{run_id}:{seq}"


SAMPLE_FIXED_COLUMNS = ("run_id", "experiment", "split", "sample_id", "output_uri", "recorded_at")
"""Columns every stored sample row has; everything else is a per-sample metric or label."""


def sample_column_order(names: Iterable[str]) -> list[str]:
    """The order sample columns are given in, whatever the store: the row's identity
    (``run_id``, ``experiment``, ``split``, ``sample_id``), the logged columns by name, then
    ``output_uri`` and ``recorded_at``. (Stores keep columns in different orders: the local
    store as logged, Elasticsearch as its documents hold them.)"""
    present = set(names)
    head = [c for c in SAMPLE_FIXED_COLUMNS[:4] if c in present]
    tail = [c for c in SAMPLE_FIXED_COLUMNS[4:] if c in present]
    return [*head, *sorted(present - set(head) - set(tail)), *tail]


STEP_FIXED_FIELDS = ("@timestamp", "run_id", "experiment", "seq", "step", "epoch")
"""Fields every step document has; the rest are training and system metrics (flat names)."""
