"""What a view answers through the front door (:mod:`warehouse.query.api`): its rows and
columns, the metric it ranked by, what it left out, and — when nothing matched — why.

A :class:`Result` is what ``warehouse query VIEW --format json`` prints (``to_dicts()``), as an
Arrow table or a pandas DataFrame on request; the front ends render it and say its notes (the
CLI on stderr, the UI and the report on the page). Nothing here reads a store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from warehouse.filters.docpath import flatten

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from warehouse.query.filter_hints import Hints


@dataclass(frozen=True)
class Empty:
    """Why a view answered nothing: the warehouse holds no run at all (a mistyped
    ``WAREHOUSE_HOME``?), or the filter looks mistyped (``hints``), or simply no run matches."""

    source: str  # where the runs were looked for, without credentials
    holds_no_run: bool
    hints: Hints | None = None

    def message(self, nothing: str) -> str:
        """The line for people: ``nothing`` (``"no runs match"``), or for an empty warehouse
        where it looked and how to record a run."""
        if not self.holds_no_run:
            return nothing
        return (
            f"no runs recorded in {self.source} yet — record one (warehouse demo, the Hydra "
            "callback, warehouse.start_run) or check WAREHOUSE_HOME / es_url"
        )

    def hint_lines(self) -> list[str]:
        """The filter's likely slips, the last line with the corrected filter."""
        return self.hints.said() if self.hints is not None else []


@dataclass
class Result:
    """A view's rows: ``to_dicts()``, ``to_arrow()``, ``to_pandas()``; also iterable.

    ``metric``/``direction``: what a ranked view ranked by; ``left_out``: the matching runs
    it could not rank (they lack the metric), said in one line; ``summary``: the view's
    one-line verdict (``diff``); ``empty``: why nothing matched (None when rows came back)."""

    rows: list[dict[str, Any]]
    columns: Sequence[str] = field(default_factory=tuple)
    metric: str | None = None
    direction: str | None = None
    left_out: str | None = None
    summary: str | None = None
    empty: Empty | None = None

    def to_dicts(self) -> list[dict[str, Any]]:
        """The rows as the CLI's JSON prints them."""
        return [dict(row) for row in self.rows]

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table, nested fields as dotted columns, in the view's order."""
        import pyarrow as pa

        flat = [flatten(row) for row in self.rows]
        names = list(dict.fromkeys([*self.columns, *(k for row in flat for k in row)]))
        return pa.table({name: _column([row.get(name) for row in flat]) for name in names})

    def to_pandas(self) -> pd.DataFrame:
        """The rows as a pandas DataFrame (pandas is imported here, only)."""
        frame: pd.DataFrame = self.to_arrow().to_pandas()
        return frame

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


@dataclass
class DiffResult(Result):
    """``diff``: the samples that changed between runs ``a`` and ``b`` (their documents),
    compared on ``column`` of ``split``; ``counts``: fixed, broke and changed."""

    a: dict[str, Any] = field(default_factory=dict)
    b: dict[str, Any] = field(default_factory=dict)
    split: str = ""
    column: str = ""
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class SamplePage:
    """One page of a run's samples (``sample_page``): the run, its splits with their sample
    counts, the split shown, its columns, the sort in force and the rows from ``offset``."""

    run: dict[str, Any]
    splits: dict[str, int]
    split: str | None = None
    columns: list[str] = field(default_factory=list)
    sort: str | None = None
    order: str = "asc"
    offset: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total(self) -> int:
        """The samples of the split shown."""
        return self.splits.get(self.split, 0) if self.split else 0


def _column(values: list[Any]) -> pa.Array:
    """One column; values of mixed kinds (a number in one run, text in another) become text,
    and empty mappings (no field to hold) are missing values."""
    import pyarrow as pa

    values = [None if v == {} else v for v in values]
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


__all__ = ["DiffResult", "Empty", "Result", "SamplePage"]
