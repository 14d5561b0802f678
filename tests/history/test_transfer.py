"""push and pull: a solo warehouse moves to the team's Elasticsearch and S3, and back.

Counts are read back from the servers themselves (ES through the store contract, S3 by
listing the bucket) and compared with what the local store holds."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

import warehouse
from tests.helpers import run_main
from tests.servers import S3Server
from warehouse.history.transfer import Transfer, pull, push
from warehouse.home import Home
from warehouse.objects.local import LocalObjectStore
from warehouse.objects.s3 import S3ObjectStore
from warehouse.query import views
from warehouse.settings import load
from warehouse.stores.base import StepRange, Store
from warehouse.stores.elastic import ElasticStore, init_elasticsearch
from warehouse.stores.local import LocalStore

RUNS = 6


@pytest.fixture
def solo(home: Path) -> list[str]:
    """Runs recorded with no server configured: samples, an output per sample, an artifact
    and steps, all in the local folder with file:// links."""
    ids = []
    for i in range(RUNS):
        with warehouse.start_run("solo" if i % 2 else "solo-b", config={"lr": i}) as run:
            for step in range(5):
                run.log_step(step, loss=1.0 / (step + 1))
            run.log_metrics("val", {"acc": 0.5 + i / 20})
            run.log_samples(
                "val", [{"sample_id": f"s{k}", "correct": (k + i) % 3 > 0} for k in range(30)]
            )
            for k in range(3):
                run.log_output("val", f"s{k}", f"png-{i}-{k}".encode(), content_type="image/png")
            run.log_artifact(b"weights", name="model.bin")
        ids.append(run.run_id)
    return ids


@pytest.fixture
def team(
    solo: list[str],
    es_url: str,
    es_prefix: str,
    s3_server: S3Server,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, Any]:
    """The same user, now pointed at a team cluster and bucket (installed, empty)."""
    env = {"WAREHOUSE_ES_URL": es_url, "WAREHOUSE_INDEX_PREFIX": es_prefix}
    env.update(s3_server.settings_env(s3_bucket, prefix="team"))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = load()
    init_elasticsearch(settings)
    return {"settings": settings, "s3": s3_server, "bucket": s3_bucket}


def pushed(team: dict[str, Any], **options: Any) -> Transfer:
    settings = team["settings"]
    home = Home.from_settings(settings)
    with (
        LocalStore(home) as local,
        LocalObjectStore(home.objects) as objects,
        ElasticStore.from_settings(settings) as remote,
        S3ObjectStore.from_settings(settings) as bucket,
    ):
        return push(local, objects, remote, bucket, **options)


def census(store: Store) -> dict[str, int]:
    """Runs, sample rows and steps a store holds, read back through its contract."""
    return census_of(store, None)


def census_of(store: Store, filter: str | None) -> dict[str, int]:
    docs = views.runs(store, filter=filter, limit=None, fields=["run_id", "sample_counts"])
    rows = steps = 0
    for doc in docs:
        for split in doc.get("sample_counts") or {}:
            rows += sum(b.num_rows for b in store.sample_batches(doc["run_id"], split))
        steps += sum(1 for _ in store.steps(StepRange(run_id=doc["run_id"])))
    return {"runs": len(docs), "sample_rows": rows, "steps": steps}


def bucket_keys(team: dict[str, Any]) -> list[str]:
    listed = team["s3"].admin.list_objects_v2(Bucket=team["bucket"], Prefix="team/")
    return sorted(o["Key"] for o in listed.get("Contents", []))


def local_objects(team: dict[str, Any]) -> int:
    """Objects in the local folder (outputs, artifacts, the git diff when the tree is dirty)."""
    root = Home.from_settings(team["settings"]).objects
    return sum(1 for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))


def local_census(team: dict[str, Any]) -> dict[str, int]:
    with LocalStore(Home.from_settings(team["settings"])) as local:
        return census(local)


def remote_census(team: dict[str, Any]) -> dict[str, int]:
    with ElasticStore.from_settings(team["settings"]) as remote:
        return census(remote)


def test_push_copies_everything_and_a_second_push_stores_nothing_twice(
    team: dict[str, Any],
) -> None:
    expected = local_census(team)
    assert (expected["runs"], expected["sample_rows"]) == (RUNS, RUNS * 30)
    assert expected["steps"] >= RUNS * 5  # logged steps, and the system samples beside them
    objects = local_objects(team)
    assert objects >= RUNS * 4  # 3 outputs and 1 artifact per run (+ a diff if tree is dirty)
    first = pushed(team)
    assert (first.runs, first.present, first.objects) == (RUNS, 0, objects)
    assert remote_census(team) == expected
    keys = bucket_keys(team)
    assert len(keys) == objects

    second = pushed(team)
    assert (second.runs, second.present, second.objects) == (0, RUNS, 0)
    assert remote_census(team) == expected
    assert bucket_keys(team) == keys


def test_pushed_links_point_at_the_bucket_not_at_this_machine(team: dict[str, Any]) -> None:
    pushed(team)
    with ElasticStore.from_settings(team["settings"]) as remote:
        board = views.leaderboard(remote, metric="val.acc")
        best = views.get_run(remote, board[0]["best_run_id"])
        uris = [
            u
            for b in remote.sample_batches(best["run_id"], "val", ["output_uri"])
            for u in b.column("output_uri").to_pylist()
            if u
        ]
    prefix = f"s3://{team['bucket']}/team/"
    assert len(uris) == 3
    assert all(u.startswith(prefix) for u in uris)
    assert all(a["uri"].startswith(prefix) for a in best["artifacts"])
    with S3ObjectStore.from_settings(team["settings"]) as bucket:
        assert bucket.get(uris[0]).startswith(b"png-")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_interrupted_push_resumes_to_the_same_counts(team: dict[str, Any], seed: int) -> None:
    stop_at = random.Random(seed).randrange(1, RUNS)

    def interrupt(done: int, total: int, nbytes: int) -> None:
        if done == stop_at:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pushed(team, progress=interrupt, workers=1)
    partial = remote_census(team)["runs"]
    assert partial == stop_at  # the runs done before the stop are complete remotely
    resumed = pushed(team, workers=1)
    assert (resumed.runs, resumed.present) == (RUNS - stop_at, stop_at)
    assert remote_census(team) == local_census(team)
    assert len(bucket_keys(team)) == local_objects(team)


def test_a_newer_remote_version_is_never_overwritten(team: dict[str, Any]) -> None:
    from warehouse.history import edits as history

    pushed(team)
    with ElasticStore.from_settings(team["settings"]) as remote:
        docs = history.select_runs(remote, filter="experiment:solo")
        history.edit_runs(remote, docs, history.note("tagged by a teammate"))
    again = pushed(team)
    assert again.runs == 0
    with ElasticStore.from_settings(team["settings"]) as remote:
        notes = {d.get("note") for d in views.runs(remote, filter="experiment:solo")}
    assert notes == {"tagged by a teammate"}


def test_pull_takes_a_subset_home_and_twice_adds_nothing(
    team: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pushed(team)
    monkeypatch.setenv("WAREHOUSE_HOME", str(tmp_path / "laptop"))
    settings = load()
    with (
        ElasticStore.from_settings(settings) as remote,
        LocalStore(Home.from_settings(settings)) as laptop,
    ):
        first = pull(remote, laptop, filter="experiment:solo")
        again = pull(remote, laptop, filter="experiment:solo")
        assert (first.runs, again.runs, again.present) == (RUNS // 2, 0, RUNS // 2)
        mine, theirs = census(laptop), census(remote)
        assert (mine["runs"], mine["sample_rows"]) == (RUNS // 2, RUNS // 2 * 30)
        assert mine["steps"] == census_of(remote, "experiment:solo")["steps"]
        assert views.leaderboard(laptop, metric="val.acc") == [
            row
            for row in views.leaderboard(remote, metric="val.acc")
            if row["experiment"] == "solo"
        ]
    assert theirs["runs"] == RUNS


def test_the_commands_say_what_they_did(
    team: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(["push", "-q", "experiment:solo-b"], monkeypatch, capsys)
    assert code == 0, err
    assert f"pushed {RUNS // 2} run(s)" in err
    assert "0 run(s) were already there" in err
    code, out, err = run_main(["push", "-f", "json"], monkeypatch, capsys)
    assert code == 0, err
    assert '"already_there": 3' in out
    monkeypatch.delenv("WAREHOUSE_ES_URL")
    code, _, err = run_main(["push", "--to-es"], monkeypatch, capsys)
    assert code == 2
    assert "WAREHOUSE_ES_URL" in err


def test_a_deleted_run_is_gone_everywhere_and_stays_gone_after_sync_and_push(
    team: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pushed(team)
    with ElasticStore.from_settings(team["settings"]) as remote:
        victim = views.runs(remote, filter="experiment:solo", limit=1)[0]
    run_id = victim["run_id"]
    keys_before = bucket_keys(team)
    code, _, err = run_main(["runs", "delete", run_id[:8]], monkeypatch, capsys)
    assert code == 2  # not a terminal and no --yes: says what would go, deletes nothing
    assert "would delete 1 run(s)" in err
    code, _, err = run_main(["runs", "delete", run_id[:8], "--yes"], monkeypatch, capsys)
    assert code == 0, err
    for _ in range(2):
        assert run_main(["sync"], monkeypatch, capsys)[0] == 0
        pushed(team)
        with ElasticStore.from_settings(team["settings"]) as remote:
            assert run_id not in {d["run_id"] for d in views.runs(remote, limit=None)}
            assert remote_census(team)["runs"] == RUNS - 1
        assert local_census(team)["runs"] == RUNS - 1
        keys = bucket_keys(team)
        assert not [k for k in keys if f"/{run_id}/" in k]
        assert len(keys) < len(keys_before)
    assert not list((Home.from_settings(team["settings"]).objects).rglob(f"*{run_id}*"))


def test_a_deletion_drops_the_runs_writes_still_waiting_in_the_outbox(
    solo: list[str], es_url: str, es_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded while Elasticsearch was down, deleted before the sync: the sync must not
    bring the run to Elasticsearch, nor back into the local store."""
    from warehouse.history import edits as history
    from warehouse.replication import open_recording

    monkeypatch.setenv("WAREHOUSE_ES_URL", "http://127.0.0.1:9")  # nothing listens: down
    monkeypatch.setenv("WAREHOUSE_INDEX_PREFIX", es_prefix)
    with warehouse.start_run("offline") as run:
        run.log_metrics("val", {"acc": 0.99})
        run.log_samples("val", [{"sample_id": "x", "correct": True}])
    recording = open_recording(load())
    assert recording.shipper.outbox.count() > 0  # the run's writes wait for Elasticsearch
    docs = history.select_runs(recording.shipper.local, [run.run_id])
    history.delete_runs(recording.store, recording.objects, docs)
    kinds = [e.kind for e in recording.shipper.outbox.pending()]
    assert kinds == ["delete"]
    recording.close()
    monkeypatch.setenv("WAREHOUSE_ES_URL", es_url)
    settings = load()
    init_elasticsearch(settings)
    recording = open_recording(settings)
    report = recording.shipper.drain()
    assert report is not None
    assert report.complete
    with ElasticStore.from_settings(settings) as remote:
        assert views.runs(remote, filter="experiment:offline") == []
    with LocalStore(Home.from_settings(settings)) as local:
        assert views.runs(local, filter="experiment:offline") == []
    recording.close()
