"""Compaction off the writer's path (issue 16): started in the background, folded in phases.

Counted, never timed: how many compactions a writer starts, how many tables it builds itself,
which journal lines survive a fold, which runs a query sees at every step."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.stores.test_local import (
    RUNS_PER_WRITER,
    SHARED,
    _join,
    _spawn,
    _writer,
    doc,
    journaled,
)
from warehouse import files
from warehouse.stores import local_catalog, local_catalog_files, local_compaction
from warehouse.stores.base import RunQuery
from warehouse.stores.local import LocalStore
from warehouse.stores.local_catalog import RunCatalog
from warehouse.stores.local_catalog_files import CatalogFiles


def _ids(home: Path) -> set[str]:
    with LocalStore(home) as store:  # a fresh reader each time: what another process sees
        return {r["run_id"] for r in store.search_runs(RunQuery(limit=None))}


def _journal(home: Path) -> list[str]:
    return journaled(home)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """The compactions writers start (real processes, counted)."""
    processes: list[subprocess.Popen[bytes]] = []
    real = subprocess.Popen

    def spy(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        process = real(*args, **kwargs)
        processes.append(process)
        return process

    monkeypatch.setattr(local_catalog_files.subprocess, "Popen", spy)
    return processes


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Catalog files written in this process (a compaction done by the writer itself)."""
    calls: list[str] = []
    real = CatalogFiles.write

    def write(self: CatalogFiles, *args: Any, **kwargs: Any) -> Any:
        calls.append("write")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(CatalogFiles, "write", write)
    return calls


def test_a_writer_crossing_the_threshold_starts_one_compaction_and_builds_nothing(
    home: Path, started: list[subprocess.Popen[bytes]], built: list[str]
) -> None:
    with LocalStore(home, compact_after=3) as store:
        for i in range(3):
            store.write_runs([doc(f"r{i}")])
        assert len(started) == 1  # the third line crossed the threshold
        store.write_runs([doc("r3")])  # still running, or the journal is short again
        assert built == []  # the writer compacted nothing itself
        local_compaction.wait(home / "catalog")
        assert len(started) == 1
        assert started[0].wait() == 0
        assert (home / "catalog" / "runs.parquet").is_file()
        assert set(_journal(home)) <= {"r3"}  # r0..r2 folded; r3 if written after the fold
        assert _ids(home) == {"r0", "r1", "r2", "r3"}


def test_a_crossing_while_a_compaction_runs_starts_none_and_the_journal_stays_bounded(
    home: Path, started: list[subprocess.Popen[bytes]], built: list[str]
) -> None:
    """Issue 25 item 5: a compaction that never finishes (hung, or failing) no longer lets
    the journal grow: at twice the threshold the writer compacts itself."""
    (home / "catalog").mkdir(parents=True)
    fd = os.open(home / "catalog" / local_catalog_files.COMPACT_LOCK, os.O_RDWR | os.O_CREAT)
    lengths = []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running (hung) compaction holds it
        with LocalStore(home, compact_after=5) as store:
            for i in range(40):
                store.write_runs([doc(f"r{i}")])
                lengths.append(len(_journal(home)))
        assert started == []
    finally:
        os.close(fd)
    assert max(lengths) < 2 * 5
    assert len(built) == 40 // (2 * 5)  # one compaction by the writer per 10 lines
    assert _ids(home) == {f"r{i}" for i in range(40)}


def _prefilled(home: Path) -> LocalStore:
    store = LocalStore(home, compact_after=1000)
    store.write_runs([doc(f"r{i}") for i in range(5)])
    store.compact()
    store.write_runs([doc("r5"), doc("r6")])  # journaled, to be folded
    return store


def test_a_fold_keeps_the_lines_appended_between_its_start_and_its_install(home: Path) -> None:
    with _prefilled(home) as store:
        catalog = RunCatalog(home)
        fold = catalog.fold_begin()
        assert fold.journal.run_ids == ["r5", "r6"]
        store.write_runs([doc("r7")])
        catalog.fold_build(fold)
        store.write_runs([doc("r5", value=0.9)])  # a folded run written again
        assert _ids(home) == {f"r{i}" for i in range(8)}
        assert catalog.fold_install(fold)
        catalog.files.discard(fold.pending)
        assert _journal(home) == ["r7", "r5"]  # only the folded lines are gone
        assert _ids(home) == {f"r{i}" for i in range(8)}
        (r5,) = store.search_runs(RunQuery(filter="run_id:r5"))
        assert r5["metrics"]["val"]["acc"] == 0.9
    assert not list((home / "catalog").glob("*.tmp"))


def test_a_fold_overtaken_by_another_compaction_installs_nothing(home: Path) -> None:
    with _prefilled(home) as store:
        catalog = RunCatalog(home)
        fold = catalog.fold_begin()
        catalog.fold_build(fold)
        store.compact()  # 'warehouse compact' meanwhile
        store.write_runs([doc("r7")])
        assert not catalog.fold_install(fold)
        catalog.files.discard(fold.pending)
        assert _journal(home) == ["r7"]
        assert _ids(home) == {f"r{i}" for i in range(8)}


@pytest.mark.parametrize("phase", ["built", "manifest", "installed", "cut"])
def test_a_compaction_that_dies_at_any_phase_leaves_every_run_visible(
    home: Path, phase: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _prefilled(home):
        catalog = RunCatalog(home)
        fold = catalog.fold_begin()
        catalog.fold_build(fold)  # "built": dies here, tmp files left behind
        if phase != "built":
            # the renames of an install: the manifest, runs.arrow, runs.parquet
            dies_at = {"manifest": 2, "installed": 3, "cut": 99}[phase]
            real, renames = os.replace, []

            def replace(src: Any, dst: Any) -> None:
                renames.append(dst)
                if len(renames) >= dies_at:
                    raise OSError("killed")
                real(src, dst)

            def die(*args: Any) -> None:
                raise OSError("killed")

            monkeypatch.setattr(files.os, "replace", replace)
            if phase == "cut":
                monkeypatch.setattr(CatalogFiles, "cut_journal", die)
            with pytest.raises(OSError, match="killed"):
                catalog.fold_install(fold)
            monkeypatch.undo()
        assert _ids(home) == {f"r{i}" for i in range(7)}
        assert RunCatalog(home).compact()  # the next one goes through
        assert _ids(home) == {f"r{i}" for i in range(7)}
        assert _journal(home) == []


def test_a_sigkilled_background_compaction_loses_no_run(
    home: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    with LocalStore(home, compact_after=3) as store:
        store.write_runs([doc(f"r{i}") for i in range(2)])
        store.write_runs([doc("r2")])
        (process,) = started
        os.killpg(process.pid, signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL
        store.write_runs([doc("r3")])  # the lock went with it: this crossing starts one
        assert len(started) == 2
        local_compaction.wait(home / "catalog")
        assert _ids(home) == {f"r{i}" for i in range(4)}


def test_a_failing_compaction_never_fails_the_writer(home: Path) -> None:
    (home / "runs").mkdir(parents=True)
    with LocalStore(home, compact_after=2) as store:
        (home / "catalog").mkdir()
        (home / "catalog" / "runs.parquet").mkdir()  # the rename into place fails
        for i in range(4):
            store.write_runs([doc(f"r{i}")])
        local_compaction.wait(home / "catalog")
        assert set(_journal(home)) == {f"r{i}" for i in range(4)}


@pytest.mark.slow
def test_processes_writing_while_background_compactions_run_lose_nothing(home: Path) -> None:
    _join([_spawn(_writer, str(home), w, 5) for w in range(4)])
    local_compaction.wait(home / "catalog")
    expected = {f"w{w}-{i}" for w in range(4) for i in range(RUNS_PER_WRITER)}
    assert _ids(home) == expected | {f"shared-{k}" for k in range(SHARED)}
    table = local_catalog.RunCatalog(home).table()
    assert table is not None
    assert table.num_rows == len(expected) + SHARED  # no run twice
    assert len(_journal(home)) < 4 * (RUNS_PER_WRITER + 4 * SHARED)  # compactions folded
    assert not list(home.rglob("*.tmp"))
