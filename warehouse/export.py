"""The way out: runs, samples and steps as plain files other tools read directly.

``warehouse export DIR [-q FILTER] [--format parquet|jsonl]`` writes, from whichever store is
configured::

    DIR/runs.parquet                        one row per run, nested fields as dotted columns
                                            (metrics.val.acc, params.model.C, config.lr ...)
    DIR/samples/<run_id>/<split>.parquet    each split's per-sample results, as stored
    DIR/steps/<run_id>.parquet              each run's step and system metrics

With ``--format jsonl`` every file is JSON lines instead, and ``runs.jsonl`` holds the whole run
documents exactly as ``warehouse query runs --format json`` prints them. DuckDB
(``SELECT * FROM 'DIR/samples/*/val.parquet'``), pandas, Polars and Spark read either. Outputs
and artifacts stay where the records point (``output_uri``, ``artifacts[].uri``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from warehouse.errors import ConfigurationError, NotFound

if TYPE_CHECKING:
    import pyarrow as pa

    from warehouse.stores.base import Store

Format = Literal["parquet", "jsonl"]
FORMATS: tuple[Format, ...] = ("parquet", "jsonl")


@dataclass
class Exported:
    """What an export wrote."""

    runs: int = 0
    sample_files: int = 0
    sample_rows: int = 0
    step_files: int = 0
    steps: int = 0
    paths: list[Path] = field(default_factory=list)


def export(
    store: Store,
    dest: Path,
    *,
    filter: str | None = None,
    fmt: Format = "parquet",
    progress: Callable[[int, int], None] | None = None,
) -> Exported:
    """Write the runs matching ``filter``, their samples and steps, under ``dest``."""
    from warehouse.query import views
    from warehouse.query.api import Result

    if fmt not in FORMATS:
        raise ConfigurationError(f"export format {fmt!r} is not one of {', '.join(FORMATS)}")
    dest.mkdir(parents=True, exist_ok=True)
    docs = views.runs(store, filter, sort=("started_at:asc",), limit=None)
    done = Exported(runs=len(docs))
    runs_file = dest / f"runs.{fmt}"
    if fmt == "jsonl":
        _write_jsonl(runs_file, docs)
    else:
        _write_parquet(runs_file, Result(docs).to_arrow())
    done.paths.append(runs_file)
    for number, doc in enumerate(docs, 1):
        run_id = str(doc["run_id"])
        for split in sorted(doc.get("sample_counts") or {}):
            path = dest / "samples" / run_id / f"{split}.{fmt}"
            rows = _export_samples(store, run_id, split, path, fmt)
            if rows is not None:
                done.sample_files += 1
                done.sample_rows += rows
                done.paths.append(path)
        steps = list(store.steps(_step_range(run_id)))
        if steps:
            path = dest / "steps" / f"{run_id}.{fmt}"
            path.parent.mkdir(parents=True, exist_ok=True)
            if fmt == "jsonl":
                _write_jsonl(path, steps)
            else:
                _write_parquet(path, Result(steps).to_arrow())
            done.step_files += 1
            done.steps += len(steps)
            done.paths.append(path)
        if progress is not None:
            progress(number, len(docs))
    return done


def _export_samples(store: Store, run_id: str, split: str, path: Path, fmt: Format) -> int | None:
    import pyarrow.parquet as pq

    try:
        batches = store.sample_batches(run_id, split)
        first = next(batches, None)
    except NotFound:
        return None
    if first is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = 0
    if fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as out:
            for batch in (first, *batches):
                for row in batch.to_pylist():
                    out.write(_line(row))
                rows += batch.num_rows
        return rows
    with pq.ParquetWriter(path, first.schema) as writer:
        for batch in (first, *batches):
            writer.write_batch(batch.cast(first.schema) if batch.schema != first.schema else batch)
            rows += batch.num_rows
    return rows


def _step_range(run_id: str) -> Any:
    from warehouse.stores.base import StepRange

    return StepRange(run_id=run_id)


def _write_parquet(path: Path, table: pa.Table) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path)


def _write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(_line(row))


def _line(row: dict[str, Any]) -> str:
    from warehouse.values import json_safe

    return json.dumps(json_safe(row), ensure_ascii=False, separators=(",", ":")) + "\n"


__all__ = ["FORMATS", "Exported", "export"]
