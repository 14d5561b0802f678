"""Every capture, replayed end to end: a live process under ``warehouse watch``, its output
passed through byte for byte, its exit code kept, and the metrics that reach the STORE scored
against the library's own records (the claim: ≥ 95 % of visible values, 0 wrong, 0 invented).

The replaying child writes a capture's stdout and stderr bytes in chunks to its own stdout and
stderr, then exits with a code of the capture's (0, or 1-3 for a quarter of them: the run is
then ``failed``). The parser-only score (``test_parsers.py``) is a quick check; this is the
process path: pipes, the parser thread, ``log_step``, the step logger and the store.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.watch.test_watch import watch
from warehouse.live.step_docs import is_tick
from warehouse.models import normalise_name
from warehouse.stores.base import RunQuery, StepRange
from warehouse.stores.local import LocalStore
from warehouse.watch import UNSURE_NOTE
from warehouse.watch.parsers import SPLITS, OutputReader, Point

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
import scoring

FIXTURES = Path(__file__).parent / "fixtures"
CHILD = """
import os, sys, time
from pathlib import Path
stem, code = sys.argv[1], int(sys.argv[2])
out = (Path(sys.argv[3]) / f"{stem}.stdout").read_bytes()
err = (Path(sys.argv[3]) / f"{stem}.stderr").read_bytes()
size = 1 + len(out + err) // 40  # about 40 writes, cut anywhere (mid-line, mid-character)
for start in range(0, max(len(out), len(err)), size):
    for fd, data in ((1, out), (2, err)):
        view = memoryview(data[start : start + size])
        while view:
            view = view[os.write(fd, view) :]
    time.sleep(0.001)
sys.exit(code)
"""


def exit_code_of(stem: str) -> int:
    """0 for three captures in four, else 1-3 (the same every run)."""
    n = zlib.crc32(stem.encode())
    return 0 if n % 4 else 1 + n % 3


def replay(stem: str, root: Path) -> dict[str, Any]:
    """One capture through ``warehouse watch`` in its own warehouse; what came out and in."""
    home = root / stem
    home.mkdir()
    code = exit_code_of(stem)
    env = {**os.environ, "WAREHOUSE_HOME": str(home / "warehouse"), "WAREHOUSE_CONSOLE": "0"}
    out = watch(home, CHILD, stem, str(code), str(FIXTURES), env=env)
    with LocalStore(home / "warehouse") as store:
        [run] = store.search_runs(RunQuery())
        steps = [s for s in store.steps(StepRange(run_id=run["run_id"])) if not is_tick(s)]
    return {"code": code, "out": out, "run": run, "steps": steps}


def final_of(run: dict[str, Any]) -> scoring.Final:
    """The run's final value of a metric, found as ``watch`` files it (``val_*`` → val)."""

    def final(name: str) -> float | None:
        split, metric = "train", name
        for prefix, target in SPLITS:
            if name.startswith(prefix) and len(name) > len(prefix):
                split, metric = target, name[len(prefix) :]
                break
        value = run["metrics"].get(split, {}).get(normalise_name(metric))
        return None if value is None else float(value)

    return final


def unsure_steps(stem: str) -> int:
    """Steps the parser leaves out as drawn once by a lagging bar, over both streams."""
    count = 0
    for suffix in ("stdout", "stderr"):
        reader = OutputReader()
        reader.feed((FIXTURES / f"{stem}.{suffix}").read_bytes())
        reader.close()
        count += reader.assembler.unsure_steps
    return count


def parser_points(stem: str) -> list[Point]:
    points, _ = scoring.replay(stem)
    out: list[Point] = []
    for step, epoch, metrics in points:
        kept = {normalise_name(k): v for k, v in metrics.items() if math.isfinite(v)}
        if kept:  # the store keeps finite values only
            out.append((step, epoch, kept))
    return out


@pytest.mark.timeout(1800)  # ~170 live runs of watch: 1-6 minutes on 2 busy cores
def test_every_capture_replayed_through_watch_reaches_the_store(tmp_path: Path) -> None:
    stems = scoring.captures()
    assert len(stems) >= 150
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(stems, pool.map(lambda s: replay(s, tmp_path), stems), strict=True))
    scores = []
    problems: list[str] = []
    for stem in stems:
        got = results[stem]
        out: subprocess.CompletedProcess[bytes] = got["out"]
        if out.returncode != got["code"]:
            problems.append(f"{stem}: exit {out.returncode}, the command's was {got['code']}")
        if out.stdout != (FIXTURES / f"{stem}.stdout").read_bytes():
            problems.append(f"{stem}: stdout not passed through byte for byte")
        if not out.stderr.startswith((FIXTURES / f"{stem}.stderr").read_bytes()):
            problems.append(f"{stem}: stderr not passed through byte for byte")
        if b"Traceback" in out.stderr[len((FIXTURES / f"{stem}.stderr").read_bytes()) :]:
            problems.append(f"{stem}: watch printed a traceback")
        run = got["run"]
        unsure = unsure_steps(stem)  # steps a lagging bar drew once: said, and noted
        said = f"warehouse watch: {unsure} step(s) drawn only once".encode()
        noted = [n for n in run.get("recording_notes") or [] if "drawn only once" in n]
        if bool(unsure) != (said in out.stderr) or noted != (
            [UNSURE_NOTE.format(steps=unsure)] if unsure else []
        ):
            problems.append(f"{stem}: {unsure} unsure step(s), noted {noted}")
        want_status = "completed" if got["code"] == 0 else "failed"
        if run["status"] != want_status or (got["code"] == 0 and run["error"] is not None):
            problems.append(f"{stem}: run {run['status']} ({run['error']})")
        stored = [(s["step"], s["epoch"], s["metrics"]) for s in got["steps"]]
        if sorted(map(repr, stored)) != sorted(map(repr, parser_points(stem))):
            # the process path loses and adds nothing, whatever the timing (stdout's and
            # stderr's points interleave as the bytes arrive)
            problems.append(f"{stem}: the store's steps differ from the parser's points")
        rename = normalise_name
        score = scoring.score(stem, replayed=(stored, final_of(run), rename))
        scores.append(score)
        if score.wrong or score.invented:
            problems.append(f"{stem}: wrong {score.wrong[:3]}, invented {score.invented[:3]}")
    table = scoring.table(scores)
    visible = sum(s.visible for s in scores)
    recovered = sum(s.recovered_visible for s in scores)
    assert not problems, "\n".join(problems) + "\n" + table
    assert recovered >= 0.95 * visible, table
    (tmp_path / "table.txt").write_text(table)
    print(json.dumps({"visible": visible, "recovered": recovered}))
