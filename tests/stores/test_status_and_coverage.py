"""The lost status and the ranked views' coverage, over every store: one answer everywhere."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from warehouse.filters import lucene
from warehouse.models import Run, RunStatus, resolve_metric
from warehouse.query import views
from warehouse.query.coverage import default_metric, left_out
from warehouse.query.status import LOST, lost_aware, shown_status
from warehouse.stores.base import Store

NOW = datetime.now(UTC)  # only for the pure checks that pass their own "now"


def run(
    run_id: str, status: str, lost_in_s: float | None, now: datetime = NOW, **metrics: float
) -> dict[str, Any]:
    """A run as written at ``now``; deadlines are relative to it, not to import time."""
    record = Run(
        run_id=run_id,
        experiment="exp",
        status=RunStatus(status),
        started_at=now - timedelta(hours=1),
        heartbeat_at=now - timedelta(minutes=1),
        lost_at=None if lost_in_s is None else now + timedelta(seconds=lost_in_s),
        metrics={"val": metrics} if metrics else {},
    )
    if status != "running":
        record.ended_at = now - timedelta(minutes=2)
    return record.to_doc()


def docs() -> list[dict[str, Any]]:
    """Written when the test runs: a suite that takes minutes must not age "alive" into lost."""
    now = datetime.now(UTC)
    return [
        run("alive", "running", 3600, now),  # its lost_at is an hour ahead
        run("killed", "running", -3600, now),  # silent an hour past its lost_at: lost
        run("done", "completed", None, now, acc=0.9),
    ]


def ids(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(d["run_id"] for d in docs)


def test_a_silent_running_run_is_shown_as_lost(store: Store) -> None:
    store.write_runs(docs())
    shown = {d["run_id"]: d["status"] for d in views.runs(store, fields=["run_id", "status"])}
    assert shown == {"alive": "running", "killed": LOST, "done": "completed"}
    assert views.get_run(store, "killed")["status"] == LOST


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("status:lost", ["killed"], id="lost"),
        pytest.param("status:running", ["alive"], id="running"),
        pytest.param("NOT status:lost", ["alive", "done"], id="not-lost"),
        pytest.param("status:(lost OR completed)", ["done", "killed"], id="lost-or-completed"),
        pytest.param('status:"lost"', ["killed"], id="phrase"),
    ],
)
def test_status_filters_mean_what_the_views_show(
    store: Store, text: str, expected: list[str]
) -> None:
    store.write_runs(docs())
    assert ids(views.runs(store, filter=text, fields=["run_id"])) == expected


def test_lost_is_decided_by_the_runs_own_deadline() -> None:
    doc = run("r", "running", 30)
    assert shown_status(doc, NOW) == "running"
    assert shown_status(doc, NOW + timedelta(seconds=31)) == LOST
    ended = run("e", "completed", None)
    assert shown_status(ended, NOW + timedelta(days=1)) == "completed"


def test_the_rewrite_leaves_other_filters_alone() -> None:
    node = lost_aware("experiment:svm AND status:failed")
    assert node == lucene.parse("experiment:svm AND status:failed")


def test_ranked_views_say_which_runs_they_leave_out(store: Store) -> None:
    def keras(run_id: str, acc: float) -> dict[str, Any]:
        record = Run(run_id=run_id, experiment="keras", status=RunStatus.COMPLETED)
        record.metrics = {"val": {"accuracy": acc}}
        record.primary_metric = resolve_metric_primary("val.accuracy")
        return record.to_doc()

    docs = [keras(f"k{i}", 0.5 + i / 100) for i in range(12)]
    done = run("done", "completed", None, acc=0.9)
    store.write_runs([*docs, done])
    missing = left_out(store, resolve_metric("val.acc"), None)
    assert missing.count == 12
    assert missing.message() == (
        "12 runs have no val.acc; they have val.accuracy (12) -- try --metric val.accuracy"
    )
    assert left_out(store, resolve_metric("val.accuracy"), None).count == 1
    assert default_metric(store, None, "val.acc") == "val.accuracy"  # what most runs recorded
    assert default_metric(store, "run_id:done", "val.loss") == "val.loss"  # none recorded one


def resolve_metric_primary(name: str) -> Any:
    from warehouse.models import PrimaryMetric

    m = resolve_metric(name)
    return PrimaryMetric(name=m.label, split=m.split, metric=m.name, direction=m.direction)
