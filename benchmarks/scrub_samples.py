"""The secrets scrub on per-sample text: 1M rows of prompt-like text (issue 28, item 2).

    python benchmarks/scrub_samples.py                  # 1,000,000 rows, 3 repeats
    python benchmarks/scrub_samples.py --rows 200000 --repeats 5

The rows: a ``sample_id`` and a ``prompt`` of 8 to 60 words drawn (seeded) from an ML
vocabulary, with numbers, file paths, URLs, model names and ``key=value`` pairs mixed in, and
one row in 1,000 holding a secret of a shape the scrub knows. Printed, as medians over the
repeats with the load average:

- ``scrub_batch`` over the whole table (both columns), what ``log_samples`` adds;
- its first stage alone (the RE2 shape scan in Arrow) and the share of rows it sends to the
  full scan;
- the full scan of every row (``RedactPolicy.text`` on each, as with no shape scan), measured
  on 20,000 rows and scaled to the row count;
- peers from the same run: ``pc.utf8_lower`` (one Arrow pass over the same text) and
  ``pq.write_table`` of the table (what storing it costs).
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_TEXT = (
    "the model predicts a label for each image in the validation split and we compare "
    "accuracy loss precision recall across seeds while the tokenizer splits every prompt into "
    "tokens before the transformer encoder reads them batch size learning rate warmup "
    "schedule checkpoint epoch gradient norm dropout attention head layer embedding vector "
    "please summarise the following passage answer the question translate into french "
    "classify the sentiment of this review explain why the code fails to compile "
)
WORDS = _TEXT.split()
EXTRAS = (
    "/data/imagenet/train/n01440764/img_0042.JPEG",
    "https://huggingface.co/bert-base-uncased/resolve/main/config.json",
    "resnet50_imagenet_baseline_lr0001_bs256",
    "max_tokens=512",
    "temperature: 0.7",
    "sentence-transformers/all-MiniLM-L6-v2",
    "2024-05-01T12:30:00Z",
    "3f786850e387550fdab836ed7e6dc881de23001b",
)


def make_rows(n: int) -> dict[str, list[str]]:
    rng = random.Random(28)
    prompts = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 60))]
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words)), rng.choice(EXTRAS))
        if i % 1000 == 7:
            words.insert(rng.randrange(len(words)), "sk-proj-" + secrets.token_urlsafe(40))
        prompts.append(" ".join(words))
    return {"sample_id": [f"s{i:07d}" for i in range(n)], "prompt": prompts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from warehouse.capture.redact import RedactPolicy
    from warehouse.capture.redact_samples import scrub_batch, shape_pattern

    table = pa.table(make_rows(args.rows))
    batch = table.combine_chunks().to_batches()[0]
    policy = RedactPolicy()
    shape = shape_pattern(policy)
    assert shape is not None
    policy.text("warm the detector up: AKIAIOSFODNN7EXAMPLE")
    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {}
    marked = changed = 0

    def timed(name: str, call: Any, *call_args: Any) -> Any:
        started = time.perf_counter()
        result = call(*call_args)
        times.setdefault(name, []).append(time.perf_counter() - started)
        return result

    sample = batch.column("prompt").to_pylist()[:20_000]
    for _ in range(args.repeats):
        hits = timed("stage 1: RE2 shape scan", pc.match_substring_regex, batch["prompt"], shape)
        marked = pc.sum(pc.fill_null(hits, False)).as_py() or 0
        _, counts = timed("scrub_batch (whole table)", scrub_batch, batch, policy)
        changed = sum(counts.values())
        started = time.perf_counter()
        for text in sample:
            policy.text(text)
        per_row = (time.perf_counter() - started) / len(sample)
        times.setdefault("full scan of every row (scaled)", []).append(per_row * args.rows)
        timed("peer: pc.utf8_lower", pc.utf8_lower, batch["prompt"])
        with tempfile.TemporaryDirectory() as folder:
            timed("peer: pq.write_table", pq.write_table, table, Path(folder) / "t.parquet")
    size = sum(len(t) for t in batch.column("prompt").to_pylist()[:100_000]) / 100_000
    cpus = os.cpu_count()
    print(f"{args.rows:,} rows (prompt ~{size:.0f} chars), {args.repeats} repeats, {cpus} CPUs")
    for name, values in times.items():
        print(f"{name:36} {statistics.median(values):7.2f} s")
    share = marked / args.rows
    print(f"rows sent to the full scan: {marked:,} ({share:.1%}); values changed: {changed:,}")
    print(f"load {load_before:.2f} -> {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
