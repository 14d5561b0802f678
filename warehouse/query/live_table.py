"""Step documents as flat rows: what ``warehouse query steps RUN_ID`` prints and exports.

The columns follow flodl's monitor CSV — position, duration, training metrics, then the
machine (cpu, ram, gpu, vram)::

    timestamp, seq, step, epoch, duration_s, <each metric, first-seen order>,
    grad_norm_spike, loss_trend, cpu_pct, ram_used_bytes, ram_total_bytes, rss_bytes,
    disk_used_pct, gpu_util_pct, gpu_mem_used_bytes, gpu_mem_total_bytes, gpu_power_w,
    gpu_temperature_c, torch_allocated_bytes, torch_reserved_bytes

A run recorded with ``WAREHOUSE_SYSTEM_PER_RANK`` also has documents of the other ranks'
figures: a ``rank`` column (after ``seq``) says whose each row is (empty: rank 0's own).
Only columns that hold a value somewhere appear (a CPU-only run has no ``gpu_*`` columns),
and every row has every column (``None`` where a document has no value), so rows go straight
into a CSV writer. A metric whose name clashes with a fixed column is prefixed ``metrics.``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

POSITION_COLUMNS = ("timestamp", "seq", "step", "epoch", "duration_s")
FLAG_COLUMNS = ("grad_norm_spike", "loss_trend")
SYSTEM_COLUMNS = (
    "cpu_pct",
    "ram_used_bytes",
    "ram_total_bytes",
    "rss_bytes",
    "disk_used_pct",
    "gpu_util_pct",
    "gpu_mem_used_bytes",
    "gpu_mem_total_bytes",
    "gpu_power_w",
    "gpu_temperature_c",
    "torch_allocated_bytes",
    "torch_reserved_bytes",
)
_FIXED = frozenset((*POSITION_COLUMNS, "rank", *FLAG_COLUMNS, *SYSTEM_COLUMNS))


def _metric_column(name: str) -> str:
    return f"metrics.{name}" if name in _FIXED else name


def _flat(doc: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "timestamp": doc.get("@timestamp"),
        "seq": doc.get("seq"),
        "rank": doc.get("rank"),
        "step": doc.get("step"),
        "epoch": doc.get("epoch"),
        "duration_s": doc.get("duration_s"),
    }
    for name, value in (doc.get("metrics") or {}).items():
        row[_metric_column(name)] = value
    for name, value in (doc.get("flags") or {}).items():
        if name in FLAG_COLUMNS:
            row[name] = value
    for name, value in (doc.get("system") or {}).items():
        if name in SYSTEM_COLUMNS:
            row[name] = value
    return row


def step_columns(docs: Iterable[dict[str, Any]]) -> list[str]:
    """The columns ``step_rows`` gives for these documents, in order."""
    metrics: dict[str, None] = {}
    present: set[str] = set()
    for doc in docs:
        if doc.get("rank") is not None:
            present.add("rank")
        for name in doc.get("metrics") or {}:
            metrics.setdefault(_metric_column(name), None)
        present.update(k for k in (doc.get("flags") or {}) if k in FLAG_COLUMNS)
        present.update(k for k, v in (doc.get("system") or {}).items() if v is not None)
    position = list(POSITION_COLUMNS)
    if "rank" in present:
        position.insert(position.index("seq") + 1, "rank")
    return [
        *position,
        *metrics,
        *(c for c in FLAG_COLUMNS if c in present),
        *(c for c in SYSTEM_COLUMNS if c in present),
    ]


def step_rows(
    docs: Iterable[dict[str, Any]], columns: Sequence[str] | None = None
) -> Iterator[dict[str, Any]]:
    """One flat row per step document, all with the same columns.

    With ``columns`` given (from :func:`step_columns`, or chosen), documents stream through;
    without, they are read once to find the columns (a run's steps fit in memory), then rowed.
    """
    if columns is None:
        docs = list(docs)
        columns = step_columns(docs)
    for doc in docs:
        flat = _flat(doc)
        yield {c: flat.get(c) for c in columns}


__all__ = ["FLAG_COLUMNS", "POSITION_COLUMNS", "SYSTEM_COLUMNS", "step_columns", "step_rows"]
