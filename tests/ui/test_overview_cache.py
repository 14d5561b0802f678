"""The UI's overview at team size, by counting work (its speed is benchmarks/ui.py's): kept
until the store's version changes, so a page refreshing every 5 s reads nothing while no run
is recorded; and answered from the views' bounded questions, never a read of every run."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import warehouse
from tests.ui.conftest import Demo
from warehouse.query import api
from warehouse.stores.base import RunQuery, Store
from warehouse.ui.api import UiData

READS = (
    "search_runs",
    "best_per_experiment",
    "timeline",
    "count_by",
    "search_samples",
    "sample_batches",
    "group_samples",
    "steps",
)


class CountingStore:
    """A real store whose read calls (the contract's queries) are written down."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.reads: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if name not in READS:
            return attr

        def counted(*args: Any, **kw: Any) -> Any:
            self.reads.append((name, args))
            return attr(*args, **kw)

        return counted


def ui_over(demo: Demo) -> tuple[UiData, CountingStore]:
    counting = CountingStore(api.open_store(demo.settings))
    return UiData(demo.settings, cast(Store, counting)), counting


def test_a_refresh_reads_nothing_while_no_run_is_recorded(demo: Demo, tmp_path: Path) -> None:
    data, counting = ui_over(demo)
    try:
        first = data.overview()
        data.overview()  # the first read of this warehouse may have stored its catalog
        settled = len(counting.reads)
        for _ in range(5):  # the page asks every 5 s
            assert data.overview() is not None
        assert counting.reads[settled:] == []
        with warehouse.start_run("digits-new", {"seed": 9}, settings=demo.settings, cwd=tmp_path):
            pass
        again = data.overview()
        assert len(counting.reads) > settled  # a run recorded: the overview is read again
        assert again["run_count"] == first["run_count"] + 1
        assert again["fingerprint"] != first["fingerprint"]
    finally:
        counting.store.close()


def test_the_overview_never_reads_every_run(demo: Demo) -> None:
    data, counting = ui_over(demo)
    try:
        answer = data.overview()
    finally:
        counting.store.close()
    experiments = len(set(demo.experiments))
    assert len(answer["leaderboard"]) == experiments
    runs = [args[0] for name, args in counting.reads if name == "search_runs"]
    unbounded = [q for q in runs if isinstance(q, RunQuery) and q.limit is None]
    assert unbounded == []  # no list of every run (seed groups, slices: the report's)
    assert not any(name == "group_samples" for name, _ in counting.reads)
    sample_reads = [name for name, _ in counting.reads if name in ("sample_batches",)]
    assert len(sample_reads) <= experiments  # the intervals read the best runs' samples only
