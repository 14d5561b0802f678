"""Issue 5 end to end: the digits example stores its images in S3, and `--download` gets them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import HANG_S
from tests.servers import S3Server

REPO = Path(__file__).parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_example_outputs_land_in_s3_and_download_as_pngs(
    tmp_path: Path, home: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    env = {**os.environ, **s3_server.settings_env(s3_bucket, prefix="wh")}
    app = subprocess.run(
        [
            sys.executable,
            str(REPO / "examples/digits/train.py"),
            "model=knn",
            f"hydra.run.dir={tmp_path}/hydra",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=HANG_S,
        check=False,
    )
    assert app.returncode == 0, app.stderr[-3000:]

    listed = s3_server.admin.list_objects_v2(Bucket=s3_bucket, Prefix="wh/digits-knn/")
    keys = [o["Key"] for o in listed.get("Contents", [])]
    outputs = [k for k in keys if "/outputs/val/" in k]
    assert len(outputs) == 359  # every validation image (outputs.save: all)

    out = tmp_path / "out"
    query = subprocess.run(
        [
            sys.executable,
            "-m",
            "warehouse",
            "query",
            "samples",
            "--best",
            "--split",
            "val",
            "--sort",
            "confidence",
            "--asc",
            "--limit",
            "20",
            "--download",
            str(out),
            "--format",
            "csv",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert query.returncode == 0, query.stderr
    assert query.stdout.count("s3://") == 20
    files = sorted(out.iterdir())
    assert len(files) == 20
    assert all(f.suffix == ".png" and f.read_bytes().startswith(PNG_MAGIC) for f in files)
