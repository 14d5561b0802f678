"""The local store's grouped sample counts (``Store.group_samples``): Arrow's group-by over
the sample files of the runs asked for — the mirror of ``elastic_groups.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warehouse.errors import QuerySyntaxError
from warehouse.stores.base import Group, GroupQuery
from warehouse.stores.local_samples import open_parquet, read_parquet


def group_samples(files: dict[str, Path], query: GroupQuery) -> list[Group]:
    """The groups of ``query`` over ``files`` (run id -> that run's sample file of the split)."""
    table = _rows(files, query)
    if table.num_rows == 0:
        return []
    value = table.column("v")
    kind = value.type
    if not (pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        raise QuerySyntaxError(
            f"sample column {query.column} holds {kind} values; group a 0/1 or numeric column "
            "such as correct",
            field=query.column,
        )
    numbers = value.cast(pa.float64())
    table = table.set_column(2, "v", numbers).append_column(
        "w", pc.cast(pc.equal(numbers, 0.0), pa.int64())
    )
    keys = ["r", "k"] if query.per_run else ["k"]
    cuts: list[float] = []
    if query.bins is not None:
        table, cuts = _binned(table, query)
    table = table.filter(pc.is_valid(table.column("k")))
    grouped = table.group_by(keys).aggregate([("v", "count"), ("v", "sum"), ("w", "sum")])
    groups = [
        Group(
            key=_key(row["k"]) if not cuts else (cuts[row["k"]], cuts[row["k"] + 1]),
            n=int(row["v_count"]),
            total=float(row["v_sum"] or 0.0),
            wrong=int(row["w_sum"] or 0),
            run_id=row.get("r") if query.per_run else None,
        )
        for row in grouped.to_pylist()
    ]
    return query.arrange(groups)


def _rows(files: dict[str, Path], query: GroupQuery) -> pa.Table:
    parts = []
    for run_id, path in files.items():
        if not path.is_file():
            continue
        names = open_parquet(path).schema_arrow.names
        if query.by not in names or query.column not in names:
            continue
        read = read_parquet(path, [query.by, query.column])
        parts.append(
            pa.table(
                {
                    "r": pa.array([run_id] * read.num_rows, pa.string()),
                    "k": _plain(read.column(query.by)),
                    "v": _plain(read.column(query.column)),
                }
            )
        )
    if not parts:
        return pa.table({"r": pa.array([], pa.string()), "k": [], "v": pa.array([], pa.float64())})
    return pa.concat_tables(parts, promote_options="permissive")


def _plain(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_dictionary(column.type):
        return column.cast(column.type.value_type)
    return column


def _binned(table: pa.Table, query: GroupQuery) -> tuple[pa.Table, list[float]]:
    """The table keyed by bin number instead of value, and the bins' edges."""
    keys = table.column("k").cast(pa.float64()).to_numpy(zero_copy_only=False)
    present = keys[~np.isnan(keys)]
    if not present.size:
        return table, []
    cuts = query.cuts(float(present.min()), float(present.max()))
    index = np.clip(np.searchsorted(cuts, keys, side="right") - 1, 0, len(cuts) - 2)
    numbers = pa.array(index, pa.int64(), mask=np.isnan(keys))
    return table.set_column(1, "k", numbers), cuts


def _key(value: Any) -> Any:
    """A group key as Elasticsearch's terms aggregation reports it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return float(value)
    return value


__all__ = ["group_samples"]
