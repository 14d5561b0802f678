"""The rules a run's logged names and values follow, checked before anything is stored.

Metric values must be numbers (numpy/torch scalars and bools too; NaN/±inf are numbers the
run lists under ``invalid_metrics``); split, metric and sample column names are normalised
(:func:`warehouse.models.normalise_name`), and two names that would be stored as one are
refused rather than one value silently replacing the other; every sample batch needs a
``sample_id`` column, kept as text. :class:`~warehouse.recording.run.ActiveRun` applies them.
"""

from __future__ import annotations

import math
import numbers
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from warehouse.errors import InvalidRecord
from warehouse.models import normalise_name

if TYPE_CHECKING:
    import pyarrow as pa


class Names:
    """The names as logged behind each stored (normalised) split and metric name, so two names
    that would become one are refused instead of one value silently replacing the other."""

    def __init__(self) -> None:
        self._splits: dict[str, str] = {}
        self._metrics: dict[tuple[str, str], str] = {}
        self._mutex = threading.Lock()

    def split(self, raw: str) -> str:
        name = normalise_name(raw)
        with self._mutex:
            seen = self._splits.setdefault(name, str(raw))
        if seen != str(raw):
            raise InvalidRecord(_collision("split names", seen, str(raw), name))
        return name

    def metrics(self, split: str, metrics: Mapping[str, Any]) -> dict[str, str]:
        """``{raw name: stored name}`` for the metrics of one call (all checked first)."""
        names: dict[str, str] = {}
        first: dict[str, str] = {}
        for raw in metrics:
            name = names[raw] = normalise_name(raw)
            other = first.setdefault(name, str(raw))
            if other != str(raw):
                raise InvalidRecord(
                    _collision(f"metric names of split {split!r}", other, raw, name)
                )
        with self._mutex:
            for name, raw in first.items():
                seen = self._metrics.get((split, name), raw)
                if seen != raw:
                    raise InvalidRecord(
                        _collision(f"metric names of split {split!r}", seen, raw, name)
                    )
            for name, raw in first.items():
                self._metrics[(split, name)] = raw
        return names


def _collision(what: str, first: str, second: str, name: str) -> str:
    return (
        f"{what} {first!r} and {second!r} would both be stored as {name!r} (only letters, "
        "digits, '_' and '-' are kept in names); rename one of them. Nothing of this call "
        "was stored"
    )


def as_number(split: str, name: str, value: Any) -> float:
    """A metric value as a float (numpy/torch scalars, bools too); InvalidRecord otherwise."""
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


def sample_columns(split: str, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with its column names normalised and ``sample_id`` as text; InvalidRecord
    when two names become one or the batch has no ``sample_id``."""
    import pyarrow as pa

    from warehouse.recording.sample_rows import normalise_sample_column

    names = [normalise_sample_column(n) for n in batch.schema.names]
    if len(set(names)) != len(names):
        raise InvalidRecord(
            f"sample columns {batch.schema.names} collide once normalised to {names}"
        )
    batch = batch.rename_columns(names)
    for i, field in enumerate(batch.schema):
        safe = nested_names(field.type, field.name)
        if safe != field.type:  # the same buffers under normalised field names
            batch = batch.set_column(i, field.name, batch.column(i).view(safe))
    if "sample_id" not in names:
        raise InvalidRecord(
            f"samples of split {split!r} have no 'sample_id' column "
            f"(columns: {', '.join(names)}); add one that identifies each sample"
        )
    return batch.set_column(
        names.index("sample_id"), "sample_id", batch.column("sample_id").cast(pa.string())
    )


def nested_names(kind: pa.DataType, path: str) -> pa.DataType:
    """``kind`` with the field names of its structs (in lists too) normalised as column names
    are: Elasticsearch reads a dot in a field name as a path, so ``{"a.b": 1, "a.b.c": 2}``
    would be refused there while the local store kept it; both now store ``a_b`` and
    ``a_b_c``. InvalidRecord when two fields of one struct become one."""
    import pyarrow as pa

    if pa.types.is_struct(kind):
        fields = [kind.field(i) for i in range(kind.num_fields)]
        names = [normalise_name(f.name) for f in fields]
        if len(set(names)) != len(names):
            raise InvalidRecord(
                f"the fields {[f.name for f in fields]} of sample column {path!r} collide "
                f"once normalised to {names}; rename them"
            )
        return pa.struct(
            [
                pa.field(name, nested_names(f.type, f"{path}.{name}"), f.nullable, f.metadata)
                for name, f in zip(names, fields, strict=True)
            ]
        )
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        item = kind.value_field
        safe = pa.field(item.name, nested_names(item.type, path), item.nullable, item.metadata)
        return pa.list_(safe) if pa.types.is_list(kind) else pa.large_list(safe)
    if pa.types.is_fixed_size_list(kind):
        item = kind.value_field
        safe = pa.field(item.name, nested_names(item.type, path), item.nullable, item.metadata)
        return pa.list_(safe, kind.list_size)
    return kind


__all__ = ["Names", "as_number", "nested_names", "sample_columns"]
