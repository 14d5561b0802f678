"""Randomized crashes at scale: SIGKILLs at seeded moments while Elasticsearch and S3 go down
and up, then what was lost, duplicated or divergent (issue 25).

The CI test (``tests/test_random_crashes.py``) kills 40 recorders in 3 slots; this runs the
same schedule generator (``tests/chaos.py``) as large as asked, on servers it starts itself
(noida-db, moto's S3 server), and prints the counts beside the findings. ``--repo`` runs the
recorders, shippers and syncs from another checkout (e.g. ``git archive <commit>``), to see
what an older version loses under the same schedule; the comparison always uses this one.

    python benchmarks/random_crashes.py --kills 150 --slots 4 --seed 7
    python benchmarks/random_crashes.py --kills 60 --repo /tmp/old-checkout

Prints one JSON object: the schedule's counts (kills, outages, syncs and syncs killed), the
settle step's exit codes, and the comparison (runs; records only remote, only local,
divergent, held twice), with the machine's load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=150)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repo", type=Path, default=None, help="checkout the processes run")
    args = parser.parse_args()

    import uuid

    from tests.chaos import REPO, Chaos, Gate, compare, settle
    from tests.servers import NoidaServer, S3Server, _start_moto, free_port, wipe_prefix
    from warehouse.settings import load
    from warehouse.stores.elastic import init_elasticsearch

    work = Path(tempfile.mkdtemp(prefix="wh-chaos-"))
    noida = NoidaServer(free_port(), work / "noida")
    noida.start()
    moto, s3_url = _start_moto()
    s3 = S3Server(s3_url, "testing", "testing", "us-east-1", moto=True)
    bucket, prefix = f"chaos-{uuid.uuid4().hex[:8]}", f"c{uuid.uuid4().hex[:8]}"
    s3.admin.create_bucket(Bucket=bucket)
    es, s3_parsed = urlparse(noida.url), urlparse(s3_url)
    gates = [
        Gate((es.hostname or "127.0.0.1", es.port or 80)),
        Gate((s3_parsed.hostname or "127.0.0.1", s3_parsed.port or 80)),
    ]
    env = {
        **s3.settings_env(bucket),
        "WAREHOUSE_S3_ENDPOINT": gates[1].url,
        "WAREHOUSE_ES_URL": gates[0].url,
        "WAREHOUSE_INDEX_PREFIX": prefix,
        "WAREHOUSE_ES_TIMEOUT_S": "5",
    }
    try:
        init_elasticsearch(load(cli={"es_url": noida.url, "index_prefix": prefix}))
        chaos = Chaos(
            work / "home",
            env,
            gates,
            seed=args.seed,
            slots=args.slots,
            kills=args.kills,
            repo=args.repo or REPO,
        )
        began = time.monotonic()
        counts = chaos.run()
        synced, verified = settle(chaos)
        found = compare(work / "home", noida.url, prefix, s3.admin, bucket)
        report = {
            "seed": args.seed,
            "repo": str(args.repo or REPO),
            "schedule": counts,
            "seconds": round(time.monotonic() - began, 1),
            "sync_exit": synced.returncode,
            "verify_exit": verified.returncode,
            "verify": verified.stderr.strip().splitlines()[-1:] if verified.stderr else [],
            "runs": found["runs"],
            **{k: len(found[k]) for k in ("remote_only", "local_only", "divergent", "twice")},
            "examples": {k: found[k][:5] for k in ("remote_only", "divergent", "twice")},
            "load_average": os.getloadavg(),
        }
        print(json.dumps(report, indent=1))
        if found.get("documents"):  # the first divergent run document, both copies, to read
            path = work / "divergent-documents.json"
            path.write_text(json.dumps(found["documents"][:3], indent=1, sort_keys=True))
            print(f"divergent documents: {path}", file=sys.stderr)
    finally:
        for gate in gates:
            gate.close()
        wipe_prefix(noida.url, prefix)
        noida.stop()
        moto.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
