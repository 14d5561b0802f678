"""Issue 14 item 6: no crash between the local write and shipping loses the remote copy, and
`warehouse sync --verify` finds (and re-ships) whatever the remote lacks.

Real kills: a child process records runs and SIGKILLs itself at a failpoint (the N-th time a
write passes it: after the outbox entry, or after the local write); then `warehouse sync`
must bring Elasticsearch to exactly what the local store holds. Real servers only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from warehouse.cli import main
from warehouse.replication.verify import RESULT_NAME
from warehouse.settings import load
from warehouse.stores.base import RunQuery, StepRange
from warehouse.stores.elastic import init_elasticsearch
from warehouse.stores.local import LocalStore

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import warehouse
for n in range(2):
    with warehouse.start_run("killed", {"n": n}) as run:
        run.log_metrics("val", {"acc": 0.5 + n / 10})
        run.log_samples("val", [{"sample_id": str(i), "loss": i / 7} for i in range(40)])
        run.log_samples("test", [{"sample_id": str(i), "loss": i / 9} for i in range(15)])
        for step in range(30):
            run.log_step(step, loss=1.0 / (step + 1))
        run.log_artifact(b"weights", name="model.bin")
print("finished", flush=True)
"""


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    old = sys.argv
    sys.argv = ["warehouse", *argv]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    out, err = capsys.readouterr()
    return code, out, err


def _local_state(home: Path) -> dict[str, Any]:
    state: dict[str, Any] = {}
    with LocalStore(home) as store:
        for doc in store.search_runs(RunQuery(limit=None)):
            run_id = doc["run_id"]
            folder = home / "samples" / run_id
            splits = {}
            for path in sorted(folder.glob("*.parquet")) if folder.is_dir() else []:
                batches = store.sample_batches(run_id, path.stem, ["sample_id"])
                splits[path.stem] = sorted(v for b in batches for v in b.column(0).to_pylist())
            seqs = sorted(s["seq"] for s in store.steps(StepRange(run_id=run_id)))
            state[run_id] = (doc["updated_at"], splits, seqs)
    return state


def _remote_state(url: str, prefix: str, run_ids: list[str]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    with Elasticsearch(url) as client:
        for kind in ("runs", "samples", "steps"):
            if client.indices.exists(index=f"{prefix}-{kind}").body:
                client.indices.refresh(index=f"{prefix}-{kind}")
        for run_id in run_ids:
            found = client.options(ignore_status=404).get(index=f"{prefix}-runs", id=run_id)
            version = found.body["_source"]["updated_at"] if found.body.get("found") else None
            hits = client.search(
                index=f"{prefix}-samples", query={"term": {"run_id": run_id}}, size=1000
            ).body["hits"]["hits"]
            splits: dict[str, list[str]] = {}
            for hit in hits:
                splits.setdefault(hit["_source"]["split"], []).append(hit["_source"]["sample_id"])
            seqs: list[int] = []
            if client.indices.exists(index=f"{prefix}-steps").body:
                steps = client.search(
                    index=f"{prefix}-steps", query={"term": {"run_id": run_id}}, size=1000
                ).body["hits"]["hits"]
                seqs = sorted(h["_source"]["seq"] for h in steps)
            state[run_id] = (version, {k: sorted(v) for k, v in sorted(splits.items())}, seqs)
    return state


@pytest.mark.parametrize(
    "point", ["after-outbox:2", "after-local:1", "after-local:3", "after-local:5", "after-local:9"]
)
def test_a_process_killed_between_writes_loses_nothing_after_sync(
    point: str,
    home: Path,
    es_url: str,
    es_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "WAREHOUSE_ES_URL": es_url,
        "WAREHOUSE_INDEX_PREFIX": es_prefix,
        "WAREHOUSE_SYSTEM_INTERVAL_S": "0",
        "WAREHOUSE_TEST_FAILPOINT": point,
    }
    init_elasticsearch(load(cli={"es_url": es_url, "index_prefix": es_prefix}))
    child = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, (child.returncode, child.stderr)
    assert "finished" not in child.stdout
    local = _local_state(home)
    assert local, "the killed process recorded something locally first"
    monkeypatch.setenv("WAREHOUSE_ES_URL", es_url)
    monkeypatch.setenv("WAREHOUSE_INDEX_PREFIX", es_prefix)
    code, _, err = run_main(["sync"], capsys)
    assert code == 0, err
    local = _local_state(home)  # sync may have written locally what the kill cut short
    assert _remote_state(es_url, es_prefix, sorted(local)) == local
    code, _, err = run_main(["sync", "--verify"], capsys)
    assert code == 0, err
    assert "the remote copies match" in err


def _record(home: Path, es_url: str, es_prefix: str, runs: int) -> list[str]:
    import warehouse

    settings = load(cli={"es_url": es_url, "index_prefix": es_prefix, "system_interval_s": 0})
    init_elasticsearch(settings)
    ids = []
    for n in range(runs):
        with warehouse.start_run("verified", {"n": n}, settings=settings) as run:
            run.log_metrics("val", {"acc": n / 10})
            run.log_samples("val", [{"sample_id": str(i), "loss": i / 7} for i in range(20)])
            for step in range(10):
                run.log_step(step, loss=1.0 / (step + 1))
            ids.append(run.run_id)
    return ids


def test_verify_finds_what_the_remote_lacks_reships_it_and_status_shows_it(
    home: Path,
    es_url: str,
    es_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids = _record(home, es_url, es_prefix, 3)
    monkeypatch.setenv("WAREHOUSE_ES_URL", es_url)
    monkeypatch.setenv("WAREHOUSE_INDEX_PREFIX", es_prefix)
    code, out, _ = run_main(["status", "-f", "json"], capsys)
    assert json.loads(out)[0]["last verification"].startswith("never")
    local = _local_state(home)
    assert _remote_state(es_url, es_prefix, ids) == local
    # the remote loses things behind the outbox's back (an old snapshot restored, say)
    with Elasticsearch(es_url) as client:
        client.delete(index=f"{es_prefix}-runs", id=ids[0], refresh=True)
        client.delete_by_query(
            index=f"{es_prefix}-samples",
            query={
                "bool": {"filter": [{"term": {"run_id": ids[1]}}, {"range": {"loss": {"gt": 1}}}]}
            },
            refresh=True,
        )
        client.delete_by_query(
            index=f"{es_prefix}-steps",
            query={
                "bool": {"filter": [{"term": {"run_id": ids[2]}}, {"range": {"seq": {"gte": 4}}}]}
            },
            refresh=True,
        )
    assert _remote_state(es_url, es_prefix, ids) != local
    code, _, err = run_main(["sync"], capsys)
    assert "the outbox is empty" in err  # what sync alone says: it cannot see the loss
    code, _, err = run_main(["sync", "--verify"], capsys)
    assert code == 0, err
    assert f"run {ids[0]}: the run document is not in Elasticsearch" in err
    assert f"run {ids[1]}: samples val: 20 row(s) locally" in err
    assert f"run {ids[2]}: steps: " in err
    assert "3 difference(s), 3 re-shipped" in err
    assert _remote_state(es_url, es_prefix, ids) == local
    code, out, _ = run_main(["status", "-f", "json"], capsys)
    shown = json.loads(out)[0]["last verification"]
    assert "3 run(s) compared: 3 difference(s), 3 re-shipped" in shown
    saved = json.loads((home / RESULT_NAME).read_text())
    assert saved["remaining"] == 0


def test_verify_exits_non_zero_when_differences_remain(
    home: Path,
    es_url: str,
    es_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids = _record(home, es_url, es_prefix, 1)
    with LocalStore(home) as store:  # the local steps file lost its last lines by hand
        path = store.home.steps_file(ids[0])
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:3]))
    monkeypatch.setenv("WAREHOUSE_ES_URL", es_url)
    monkeypatch.setenv("WAREHOUSE_INDEX_PREFIX", es_prefix)
    code, _, err = run_main(["sync", "--verify"], capsys)
    assert code == 5, err
    assert f"run {ids[0]}: steps: 3 locally" in err
    code, out, _ = run_main(["status", "-f", "json"], capsys)
    assert "the remote holds more than the local store" in json.loads(out)[0]["last verification"]
