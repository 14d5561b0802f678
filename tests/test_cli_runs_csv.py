"""`warehouse query runs --format csv` from the local catalog's columns (issue 16).

The CSV is written from the catalog's columns a chunk of runs at a time
(``LocalStore.csv_rows``) and must be byte for byte what the run documents give (the path
every other store takes, and the local store's when the columns cannot tell). Each case is
printed both ways; the work is counted: only the documents of the cells a column cannot
tell are parsed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from warehouse.cli import app
from warehouse.models import Run
from warehouse.stores import local_export
from warehouse.stores.base import RunQuery
from warehouse.stores.local import LocalStore
from warehouse.stores.local_catalog import RunCatalog

runner = CliRunner()


def run_doc(run_id: str, experiment: str, **fields: Any) -> dict[str, Any]:
    doc = Run(run_id=run_id, experiment=experiment).to_doc()
    doc.update(fields)
    return doc


@pytest.fixture
def odd_world(home: Path) -> Path:
    """Runs whose CSV cells the columns alone cannot all tell."""
    with LocalStore(home, compact_after=1000) as store:
        store.write_runs(
            [
                run_doc(
                    "r1",
                    "a",
                    started_at="2026-01-02T03:04:05Z",
                    ended_at="2026-01-02T04:04:05.120000Z",
                    duration_s=3600.12,
                    status="completed",
                    metrics={"val": {"acc": 0.5}, "train": {"loss": 0.25}},
                ),
                run_doc(  # whole numbers: the document says 1 and 10 (not 1.0, 10.0)
                    "r2",
                    "a",
                    started_at="2026-01-03T00:00:00Z",
                    duration_s=12,
                    status="completed",
                    metrics={"val": {"acc": 1, "epochs": 10}, "test": {"acc": 2.0}},
                ),
                run_doc(  # running, silent for long: shown as lost
                    "r3",
                    "b",
                    started_at="2026-01-04T00:00:00Z",
                    status="running",
                    lost_at="2026-01-04T00:01:30Z",
                    metrics={"val": {"acc": 0.75}},
                ),
                run_doc(  # running and beating
                    "r4",
                    "b",
                    started_at="2026-01-05T00:00:00Z",
                    status="running",
                    lost_at="2999-01-01T00:00:00Z",
                ),
                run_doc(  # a metric only ever NaN: a key, never a value
                    "r5",
                    "c",
                    started_at="2026-01-06T00:00:00.000001Z",
                    status="failed",
                    metrics={"test": {"f1": math.nan}},
                ),
                run_doc(
                    "r6",
                    "c",
                    started_at="2026-01-07T00:00:00Z",
                    status="completed",
                    metrics={"val": {"gone": 0.3}},
                ),
            ]
        )
        store.compact()
        store.delete_runs(["r6"])  # its metric stays a (now empty) catalog column
    return home


def csv_of(*args: str) -> str:
    result = runner.invoke(app, ["query", "runs", "--format", "csv", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def said(*args: str) -> str:
    return runner.invoke(app, ["query", "runs", "--format", "csv", *args]).stderr


def from_documents(monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(LocalStore, "csv_rows", lambda *_, **__: None)
        return csv_of(*args)


CASES = [
    ("--limit", "0"),
    ("--limit", "2"),
    (),
    ("-q", "experiment:a", "--limit", "0"),
    ("-q", "experiment:b OR experiment:c", "-s", "metrics.val.acc"),
    ("-q", "status:lost"),
    ("-q", "status:running"),
    ("-s", "duration_s:asc", "-s", "run_id:desc", "--limit", "3"),
    ("-q", "experiment:nothing"),
]


@pytest.mark.parametrize("chunk", [1, local_export.CHUNK])
@pytest.mark.parametrize("args", CASES, ids=[" ".join(c) or "default" for c in CASES])
def test_the_columns_give_the_documents_csv_byte_for_byte(
    odd_world: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], chunk: int
) -> None:
    monkeypatch.setattr(local_export, "CHUNK", chunk)
    assert csv_of(*args) == from_documents(monkeypatch, *args)
    with monkeypatch.context() as patch:
        patch.setattr(LocalStore, "csv_rows", lambda *_, **__: None)
        expected = said(*args)
    assert said(*args) == expected


def test_the_odd_cells_are_as_the_documents_hold_them(odd_world: Path) -> None:
    rows = {line.split(",")[0]: line for line in csv_of("--limit", "0").splitlines()}
    header = rows["run_id"].split(",")
    assert header[:6] == ["run_id", "experiment", "status", "started_at", "ended_at", "duration_s"]
    assert "metrics.test.f1" in header  # a key of r5's metrics, though never a value
    assert "metrics.val.gone" not in header  # r6 is gone
    cell = dict(zip(header, rows["r2"].split(","), strict=True))
    assert (cell["duration_s"], cell["metrics.val.acc"], cell["metrics.val.epochs"]) == (
        "12",
        "1",
        "10",
    )
    assert cell["metrics.test.acc"] == "2.0"
    assert rows["r3"].split(",")[2] == "lost"
    assert rows["r4"].split(",")[2] == "running"
    assert rows["r1"].split(",")[3:5] == ["2026-01-02T03:04:05Z", "2026-01-02T04:04:05.120000Z"]
    assert rows["r5"].split(",")[3] == "2026-01-06T00:00:00.000001Z"


def test_only_the_documents_of_untold_cells_are_parsed(
    odd_world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of 5 runs, the documents read are r2's (whole numbers), r3's and r4's (running) and
    one for the never-valued metric: no document per run."""
    parsed: list[str] = []
    real = json.loads

    def counting(text: str, *args: Any, **kwargs: Any) -> Any:
        doc = real(text, *args, **kwargs)
        if isinstance(doc, dict) and "run_id" in doc:  # a run document (json is shared)
            parsed.append(doc["run_id"])
        return doc

    monkeypatch.setattr(local_export.json, "loads", counting)
    calls: list[Any] = []
    plan = LocalStore.csv_rows

    def spy(self: LocalStore, *args: Any) -> Any:
        calls.append(found := plan(self, *args))
        return found

    monkeypatch.setattr(LocalStore, "csv_rows", spy)
    assert csv_of("--limit", "0").count("\n") == 6
    assert calls
    assert calls[0] is not None  # the columns' way was taken
    assert sorted(set(parsed)) == ["r2", "r3", "r4", "r5"]
    assert len(parsed) <= 5


def test_a_column_of_unproven_type_falls_back_to_the_documents(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LocalStore(home) as store:  # a number in one run, a text in another: a text column
        store.write_runs([run_doc("s1", "x", duration_s=1.5), run_doc("s2", "x", duration_s="2")])
    with LocalStore(home) as store:
        assert store.csv_rows(RunQuery(), ("run_id", "duration_s"), lambda d: d) is None
    assert csv_of("--limit", "0") == from_documents(monkeypatch, "--limit", "0")


JSON_CASES = [("--limit", "0"), ("-q", "status:lost"), ("-s", "duration_s:asc", "-n", "2"), ()]


@pytest.mark.parametrize("args", JSON_CASES, ids=[" ".join(c) or "default" for c in JSON_CASES])
def test_json_documents_read_a_chunk_at_a_time_equal_the_list_of_them(
    odd_world: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    """``--format json`` prints whole documents as LocalStore.run_documents parses them, a
    chunk at a time, not as a list of all of them first: the same bytes."""
    streamed = runner.invoke(app, ["query", "runs", "--format", "json", *args])
    with monkeypatch.context() as patch:
        patch.delattr(LocalStore, "run_documents")
        listed = runner.invoke(app, ["query", "runs", "--format", "json", *args])
    assert streamed.exit_code == listed.exit_code == 0
    assert streamed.stdout == listed.stdout
    assert streamed.stderr == listed.stderr
    docs = json.loads(streamed.stdout)
    assert all("config" in d for d in docs)


def test_json_documents_come_in_chunks(odd_world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_export, "CHUNK", 2)
    read: list[int] = []
    real = RunCatalog.texts

    def counting(self: RunCatalog, column: Any, rows: Any) -> list[str]:
        read.append(len(rows))
        return real(self, column, rows)

    monkeypatch.setattr(RunCatalog, "texts", counting)
    result = runner.invoke(app, ["query", "runs", "--format", "json", "--limit", "0"])
    assert len(json.loads(result.stdout)) == 5
    assert read == [2, 2, 1]  # no read of every run's document at once
