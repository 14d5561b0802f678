"""Nothing recorded is lost, duplicated or divergent under randomized SIGKILLs while the
servers go down and up (issue 25: this replaces the named failpoints of issue 14).

Three recorders, a shipper (`warehouse sync`, itself killed now and then) and the outages
run together (``tests/chaos.py``); at least 40 recorders are SIGKILLed at seeded moments.
Then, every server up: `sync` ships everything, `sync --verify` finds nothing to repair, and
local, Elasticsearch and S3 hold the same content, each record once. The seed is printed on
failure: ``WAREHOUSE_CHAOS_SEED=<seed>`` replays the same schedule.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlparse

from tests.chaos import RECORDER, Chaos, Gate, compare, kill_until_ahead, settle
from tests.servers import S3Server, free_port
from warehouse.settings import load
from warehouse.stores.elastic import init_elasticsearch

SEED = int(os.environ.get("WAREHOUSE_CHAOS_SEED", "20251"))
# the code the killed processes run: this checkout, or an older one to see it fail
CODE = Path(os.environ.get("WAREHOUSE_CHAOS_REPO", str(Path(__file__).resolve().parents[1])))


def test_random_kills_with_servers_going_down_and_up_lose_and_duplicate_nothing(
    tmp_path: Path, es_url: str, es_prefix: str, s3_server: S3Server, s3_bucket: str
) -> None:
    es = urlparse(es_url)
    s3 = urlparse(s3_server.url)
    es_gate = Gate((es.hostname or "127.0.0.1", es.port or 80))
    s3_gate = Gate((s3.hostname or "127.0.0.1", s3.port or 80))
    s3_env = s3_server.settings_env(s3_bucket)
    env = {
        **s3_env,
        "WAREHOUSE_S3_ENDPOINT": s3_gate.url,
        "WAREHOUSE_ES_URL": es_gate.url,
        "WAREHOUSE_INDEX_PREFIX": es_prefix,
        "WAREHOUSE_ES_TIMEOUT_S": "5",
    }
    init_elasticsearch(load(cli={"es_url": es_url, "index_prefix": es_prefix}))
    home = tmp_path / "home"
    chaos = Chaos(home, env, [es_gate, s3_gate], seed=SEED, repo=CODE)
    try:
        counts = chaos.run()
        log = (tmp_path / "chaos-stderr.log").read_text(errors="replace")[-3000:]
        assert counts["crashed"] == 0, (SEED, counts, log)
        assert counts["kills"] >= 40, (SEED, counts)
        synced, verified = settle(chaos)
    finally:
        es_gate.close()
        s3_gate.close()
    assert synced.returncode == 0, (SEED, synced.stderr)
    assert verified.returncode == 0, (SEED, verified.stderr)
    assert "the remote copies match" in verified.stderr, (SEED, verified.stderr)
    found = compare(home, es_url, es_prefix, s3_server.admin, s3_bucket)
    assert found["runs"] >= 40, (SEED, found)
    for what in ("remote_only", "local_only", "divergent", "twice"):
        assert found[what] == [], (SEED, what, found[what], counts)


def test_an_entry_whose_writer_died_before_its_local_write_is_written_locally_first(
    tmp_path: Path, es_url: str, es_prefix: str
) -> None:
    """The drills' 4 runs `completed` in Elasticsearch but `running` locally: a recorder died
    between its outbox entry and its local write, and the next training process shipped the
    entry without writing it locally. Recorders with Elasticsearch down (fast writes) are
    killed at seeded moments until one dies inside that window; then a recorder with it up
    starts shipping what waits (and is killed too): the local copy is complete, and
    Elasticsearch may lag behind it but never lead; after `sync` the two are the same."""
    from warehouse.stores import doc_digest
    from warehouse.stores.base import RunQuery
    from warehouse.stores.elastic import ElasticStore
    from warehouse.stores.local import LocalStore

    home = tmp_path / "home"
    init_elasticsearch(load(cli={"es_url": es_url, "index_prefix": es_prefix}))
    down = {
        "WAREHOUSE_ES_URL": f"http://127.0.0.1:{free_port()}",
        "WAREHOUSE_INDEX_PREFIX": es_prefix,
    }
    chaos = Chaos(home, down, [], seed=SEED, life_s=(0.05, 0.8), repo=CODE)
    run_id, version, kills = kill_until_ahead(chaos)
    chaos.env = {**down, "WAREHOUSE_ES_URL": es_url}
    next_one = chaos._spawn([sys.executable, "-c", RECORDER, "1"])
    assert next_one.stdout is not None
    assert next_one.stdout.readline().startswith("started")  # it shipped older entries first
    next_one.kill()
    next_one.communicate()
    with LocalStore(home) as local, ElasticStore(es_url, prefix=es_prefix) as remote:
        (mine,) = local.search_runs(RunQuery(filter=f"run_id:{run_id}"))
        theirs = remote.search_runs(RunQuery(filter=f"run_id:{run_id}"))
    waiting = sorted(p.name for p in (home / "outbox").glob("*"))
    assert mine["updated_at"] == version, (SEED, kills, waiting)  # local write completed
    # the next process was killed while it drained: Elasticsearch may lag, never lead
    if theirs:
        assert theirs[0]["updated_at"] <= mine["updated_at"], (SEED, kills, waiting)
        if theirs[0]["updated_at"] == mine["updated_at"]:
            assert doc_digest.digest(theirs[0]) == doc_digest.digest(mine), (SEED, kills)
    synced = chaos.cli("sync", "-q")  # then what waits ships, and both sides are the same
    assert synced.returncode == 0, synced.stderr
    with ElasticStore(es_url, prefix=es_prefix) as remote:
        (shipped,) = remote.search_runs(RunQuery(filter=f"run_id:{run_id}"))
    assert doc_digest.digest(shipped) == doc_digest.digest(mine), (SEED, kills)
