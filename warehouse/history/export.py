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

Everything is streamed (:mod:`warehouse.history.streaming`): samples a stored batch at a time, runs
and steps a chunk of rows at a time, so memory does not grow with the rows written.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from warehouse.errors import ConfigurationError, NotFound
from warehouse.history.streaming import write_jsonl_batches, write_jsonl_rows, write_parquet_rows

if TYPE_CHECKING:
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

    if fmt not in FORMATS:
        raise ConfigurationError(f"export format {fmt!r} is not one of {', '.join(FORMATS)}")
    dest.mkdir(parents=True, exist_ok=True)
    docs = views.runs(store, filter, sort=("started_at:asc",), limit=None)
    done = Exported(runs=len(docs))
    runs_file = dest / f"runs.{fmt}"
    if fmt == "jsonl":
        with open(runs_file, "w", encoding="utf-8") as out:
            write_jsonl_rows(docs, out)
    else:
        write_parquet_rows(lambda: docs, runs_file)
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
        steps = _export_steps(store, run_id, dest / "steps" / f"{run_id}.{fmt}", fmt)
        if steps:
            done.step_files += 1
            done.steps += steps
            done.paths.append(dest / "steps" / f"{run_id}.{fmt}")
        if progress is not None:
            progress(number, len(docs))
    return done


def _export_samples(store: Store, run_id: str, split: str, path: Path, fmt: Format) -> int | None:
    """One split's rows, a stored batch at a time; None when the run has no such split."""
    import pyarrow.parquet as pq

    try:
        batches = store.sample_batches(run_id, split)
        first = next(batches, None)
    except NotFound:
        return None
    if first is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as out:
            return write_jsonl_batches(itertools.chain([first], batches), out)
    rows = 0
    with pq.ParquetWriter(path, first.schema, write_page_checksum=True) as writer:
        for batch in itertools.chain([first], batches):
            writer.write_batch(batch.cast(first.schema) if batch.schema != first.schema else batch)
            rows += batch.num_rows
    return rows


def _export_steps(store: Store, run_id: str, path: Path, fmt: Format) -> int:
    """A run's steps, streamed (Parquet: read twice, once for the schema); the count."""
    from warehouse.stores.base import StepRange

    def steps() -> Iterator[dict[str, Any]]:
        return store.steps(StepRange(run_id=run_id))

    if next(steps(), None) is None:
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as out:
            return write_jsonl_rows(steps(), out)
    return write_parquet_rows(steps, path)


__all__ = ["FORMATS", "Exported", "export"]
