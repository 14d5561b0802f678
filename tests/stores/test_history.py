"""Tags, notes and experiment renames: new versions of runs, the same on every store."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import warehouse
from tests.helpers import run_main
from warehouse.errors import ConfigurationError
from warehouse.history import edits as history
from warehouse.models import Run, RunStatus, run_version
from warehouse.query import views
from warehouse.stores.base import Store


def done(run_id: str, experiment: str = "exp", acc: float = 0.5, **extra: Any) -> dict[str, Any]:
    record = Run(run_id=run_id, experiment=experiment, status=RunStatus.COMPLETED, **extra)
    record.metrics = {"val": {"acc": acc}}
    record.ended_at = datetime.now(UTC)
    record.updated_at = datetime.now(UTC) - timedelta(minutes=5)
    return record.to_doc()


def ids(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(str(d["run_id"]) for d in docs)


def test_tags_are_added_removed_and_filterable(store: Store) -> None:
    store.write_runs([done("a", tags=["debug"]), done("b"), done("c")])
    docs = history.select_runs(store, ["a"], "run_id:b")
    edited = history.edit_runs(
        store, docs, history.tag(history.TagChange.parse(["+baseline", "-debug"]))
    )
    assert [(e.run_id, e.tags, e.changed) for e in edited] == [
        ("a", ["baseline"], True),
        ("b", ["baseline"], True),
    ]
    assert ids(views.runs(store, filter="tags:baseline")) == ["a", "b"]
    assert ids(views.runs(store, filter="tags:debug")) == []
    again = history.edit_runs(
        store,
        history.select_runs(store, ["a"]),
        history.tag(history.TagChange.parse(["+baseline"])),
    )
    assert not again[0].changed  # nothing to change: no new version written


def test_a_change_is_a_newer_version_an_old_copy_cannot_undo(store: Store) -> None:
    old = done("a")
    store.write_runs([old])
    history.edit_runs(
        store, history.select_runs(store, ["a"]), history.note("baseline for the paper")
    )
    (now,) = views.runs(store, filter="run_id:a")
    assert run_version(now) > run_version(old)
    store.write_runs([old])  # a replayed outbox entry, a second push of the older copy
    (after,) = views.runs(store, filter="run_id:a")
    assert after["note"] == "baseline for the paper"


def test_renaming_an_experiment_moves_its_runs_in_every_ranked_view(store: Store) -> None:
    store.write_runs([done("a", "old", 0.9), done("b", "old", 0.7), done("c", "other", 0.8)])
    docs = history.select_runs(store, filter="experiment:old")
    history.edit_runs(store, docs, history.rename_experiment("new"))
    board = views.leaderboard(store, metric="val.acc")
    assert [(row["experiment"], row["run_count"]) for row in board] == [("new", 2), ("other", 1)]


def test_a_running_run_is_refused_a_lost_one_is_not(store: Store) -> None:
    now = datetime.now(UTC)
    alive = Run(run_id="alive", experiment="e", lost_at=now + timedelta(hours=1)).to_doc()
    dead = Run(run_id="dead", experiment="e", lost_at=now - timedelta(hours=1)).to_doc()
    store.write_runs([alive, dead])
    with pytest.raises(ConfigurationError, match="still running"):
        history.edit_runs(store, history.select_runs(store, ["alive"]), history.note("x"))
    (edited,) = history.edit_runs(store, history.select_runs(store, ["dead"]), history.note("oom"))
    assert edited.changed
    assert views.get_run(store, "dead")["note"] == "oom"


@pytest.mark.parametrize("bad", ["", "two words", "a,b", "x" * 101])
def test_a_tag_that_cannot_be_filtered_is_refused(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="tag"):
        history.TagChange.parse([f"+{bad}"])


def test_the_commands_change_runs_on_the_durable_path(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded = []
    for acc in (0.6, 0.7):
        with warehouse.start_run("digits") as run:
            run.log_metrics("val", {"acc": acc})
        recorded.append(run.run_id)
    code, out, err = run_main(
        ["runs", "tag", recorded[0][:8], "+baseline", "-debug", "-f", "json"], monkeypatch, capsys
    )
    assert code == 0, err
    assert json.loads(out)[0]["tags"] == "baseline"
    code, out, err = run_main(["runs", "note", recorded[1], "second try"], monkeypatch, capsys)
    assert code == 0, err
    code, out, err = run_main(["runs", "rename-experiment", "digits", "mnist"], monkeypatch, capsys)
    assert code == 0
    assert "changed 2 of 2" in err
    code, out, err = run_main(
        ["query", "runs", "-q", "tags:baseline", "-f", "json"], monkeypatch, capsys
    )
    assert code == 0, err
    (row,) = json.loads(out)
    assert (row["run_id"], row["experiment"]) == (recorded[0], "mnist")
    code, out, err = run_main(["runs", "rename-experiment", "digits", "x"], monkeypatch, capsys)
    assert code == 2
    assert "no run has experiment 'digits'" in err
    code, out, err = run_main(["runs", "tag", "+a"], monkeypatch, capsys)
    assert code == 2
    assert "name the runs" in err


def test_deleted_runs_leave_every_view_with_their_samples_and_steps(store: Store) -> None:
    import pyarrow as pa

    from warehouse.errors import NotFound
    from warehouse.stores.base import StepRange

    store.write_runs([done("a", acc=0.9), done("b", acc=0.8)])
    for run_id in ("a", "b"):
        batch = pa.record_batch({"sample_id": ["s1", "s2"], "correct": [True, False]})
        store.write_samples(run_id, "exp", "val", [batch])
        store.write_steps(run_id, "exp", [{"seq": 0, "step": 0, "loss": 1.0}])
    assert store.delete_runs(["a"]) == 1
    assert ids(views.runs(store)) == ["b"]
    assert [row["best_run_id"] for row in views.leaderboard(store, metric="val.acc")] == ["b"]
    with pytest.raises(NotFound):
        list(store.sample_batches("a", "val"))
    assert list(store.steps(StepRange(run_id="b")))
    with pytest.raises(NotFound):
        list(store.steps(StepRange(run_id="a")))
    assert store.delete_runs(["a"]) == 0  # a replayed deletion is not an error


def test_tags_and_notes_keep_no_secret(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with warehouse.start_run("digits") as run:
        run.log_metrics("val", {"acc": 0.5})
    token = "ghp_" + "a1B2" * 9
    code, _, err = run_main(["runs", "tag", run.run_id, f"+{token}"], monkeypatch, capsys)
    assert code == 2
    assert "looks like a secret" in err
    code, out, err = run_main(
        ["runs", "note", run.run_id, f"pushed with {token}", "-f", "json"], monkeypatch, capsys
    )
    assert code == 0, err
    assert token not in out
    assert token not in (home / "runs" / f"{run.run_id}.json").read_text()
