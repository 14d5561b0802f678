"""The step logger: documents, derived figures, handing over to the sink, and every exit path."""

from __future__ import annotations

import gc
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from warehouse.live.step_docs import (
    DocBuilder,
    flops_utilisation,
    is_tick,
    step_duration,
    tokens_per_second,
)
from warehouse.live.steps import StepLogger, StepOptions
from warehouse.stores.step_lines import encode_lines


class Collect:
    """A sink keeping what it gets; it can be made to fail (a store that is down)."""

    def __init__(self) -> None:
        self.docs: list[dict[str, Any]] = []
        self.batches: list[list[dict[str, Any]]] = []
        self.calls = 0
        self.down = False
        self.lock = threading.Lock()

    def __call__(self, docs: list[dict[str, Any]]) -> None:
        with self.lock:
            self.calls += 1
            if self.down:
                raise ConnectionError("store is down")
            self.docs.extend(docs)
            self.batches.append(docs)


def logger(sink: Any, tmp_path: Path, **kw: Any) -> StepLogger:
    kw.setdefault("console", False)
    kw.setdefault("system_interval_s", 0)
    kw.setdefault("flush_interval_s", 0.05)
    return StepLogger("run1", "exp", sink, StepOptions(**kw))


def items(
    *rows: tuple[float, int, dict[str, Any]],
) -> list[tuple[float, int, None, dict[str, Any]]]:
    return [(t, step, None, m) for t, step, m in rows]


# ---- documents ---------------------------------------------------------------------------------
def test_documents_have_the_step_shape_in_seq_order(tmp_path: Path) -> None:
    sink = Collect()
    before = time.time()
    with logger(sink, tmp_path) as steps:
        steps.log_step(0, loss=1.0)
        steps.log_step(1, 0, loss=0.5, lr=0.1)
    after = time.time()
    a, b = sink.docs
    assert [a["seq"], b["seq"]] == [0, 1]
    assert {k: a[k] for k in ("run_id", "experiment", "step", "epoch")} == {
        "run_id": "run1",
        "experiment": "exp",
        "step": 0,
        "epoch": None,
    }
    assert b["epoch"] == 0
    assert b["metrics"] == {"loss": 0.5, "lr": 0.1}
    assert "duration_s" not in a
    assert b["duration_s"] >= 0
    stamp = datetime.fromisoformat(b["@timestamp"])
    assert stamp.utcoffset() is not None
    assert before - 1e-3 <= stamp.timestamp() <= after + 1e-3  # when it was logged, in UTC


def test_duration_is_per_step_when_steps_are_skipped() -> None:
    b = DocBuilder("r", "e")
    docs = b.build(items((100.0, 0, {}), (102.0, 10, {}), (103.0, 10, {})), [])
    assert [d.get("duration_s") for d in docs] == [None, pytest.approx(0.2), pytest.approx(1.0)]


def test_non_finite_and_non_numeric_metrics_are_dropped_with_one_warning_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    b = DocBuilder("r", "e")
    with caplog.at_level(logging.WARNING):
        docs = b.build(
            items(
                (1.0, 0, {"loss": float("nan"), "acc": 0.5, "name": "x"}),
                (2.0, 1, {"loss": float("inf"), "acc": 0.6, "name": "y"}),
            ),
            [],
        )
    assert [d["metrics"] for d in docs] == [{"acc": 0.5}, {"acc": 0.6}]
    assert len([r for r in caplog.records if "'loss'" in r.getMessage()]) == 1
    assert len([r for r in caplog.records if "'name'" in r.getMessage()]) == 1
    json.dumps(docs, allow_nan=False)  # what Elasticsearch needs


def test_numpy_like_scalars_bools_and_odd_names_are_recorded() -> None:
    class Scalar:
        def __float__(self) -> float:
            return 0.25

    b = DocBuilder("r", "e")
    [doc] = b.build(items((1.0, 0, {"loss": Scalar(), "ok": True, "top-1 acc": 0.9})), [])
    assert doc["metrics"] == {"loss": 0.25, "ok": 1.0, "top-1_acc": 0.9}


def test_a_step_that_is_not_an_integer_is_dropped_not_fatal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    b = DocBuilder("r", "e")
    docs = b.build([(1.0, "ten", None, {"loss": 1.0}), (2.0, 11, None, {"loss": 1.0})], [])
    assert [d["step"] for d in docs] == [11]
    assert [d["seq"] for d in docs] == [0]


@pytest.mark.parametrize(
    ("prev_t", "prev_step", "t", "step", "expected"),
    [
        pytest.param(None, None, 5.0, 0, None, id="first-step"),
        pytest.param(10.0, 0, 12.0, 10, 0.2, id="every-10th-step"),
        pytest.param(10.0, 5, 11.5, 5, 1.5, id="same-step-again"),
    ],
)
def test_step_duration_is_per_step(
    prev_t: float | None, prev_step: int | None, t: float, step: int, expected: float | None
) -> None:
    assert step_duration(prev_t, prev_step, t, step) == (
        None if expected is None else pytest.approx(expected)
    )


def test_throughput_and_mfu_need_what_they_are_made_of() -> None:
    assert tokens_per_second(4096, 0.5) == 8192
    assert tokens_per_second(None, 0.5) is None
    assert tokens_per_second(4096, 0.0) is None
    assert flops_utilisation(1000.0, 6e9, 1.2e13) == pytest.approx(0.5)
    assert flops_utilisation(1000.0, None, 1.2e13) is None


def test_tokens_per_second_and_mfu_are_derived() -> None:
    b = DocBuilder("r", "e", tokens_per_step=4096, flops_per_token=6e9, peak_flops=1e15)
    docs = b.build(items((10.0, 0, {}), (10.5, 1, {}), (10.9, 2, {"tokens_per_s": 1.0})), [])
    assert "tokens_per_s" not in docs[0]["metrics"]
    assert docs[1]["metrics"]["tokens_per_s"] == pytest.approx(8192)
    assert docs[1]["metrics"]["mfu"] == pytest.approx(8192 * 6e9 / 1e15)
    assert docs[2]["metrics"]["tokens_per_s"] == 1.0  # the caller's own figure wins


def test_a_gradient_norm_spike_is_flagged_against_its_moving_average() -> None:
    b = DocBuilder("r", "e")
    norms = [1.0] * 20 + [6.0, 1.0, 4.0, float("inf")]
    docs = b.build(items(*((float(i), i, {"grad_norm": g}) for i, g in enumerate(norms))), [])
    flags = [d["flags"]["grad_norm_spike"] for d in docs]
    assert flags == [False] * 20 + [True, False, False, True]
    assert "grad_norm" not in docs[-1]["metrics"]


@pytest.mark.parametrize(
    ("losses", "trend"),
    [
        pytest.param([2.0 - 0.02 * i for i in range(50)], "down", id="down"),
        pytest.param([1.0 + 0.02 * i for i in range(50)], "up", id="up"),
        pytest.param([1.0 + 0.001 * (-1) ** i for i in range(50)], "flat", id="flat"),
    ],
)
def test_the_loss_trend_compares_the_newer_and_older_halves(
    losses: list[float], trend: str
) -> None:
    b = DocBuilder("r", "e")
    docs = b.build(items(*((float(i), i, {"loss": v}) for i, v in enumerate(losses))), [])
    assert "loss_trend" not in docs[0].get("flags", {})
    assert docs[-1]["flags"]["loss_trend"] == trend


def test_a_sample_attaches_once_to_the_next_step_and_lonely_samples_become_ticks() -> None:
    b = DocBuilder("r", "e")
    s1 = {"system": {"cpu_pct": 1.0}}
    s2 = {"system": {"cpu_pct": 2.0}, "gpus": [{"index": 0, "util_pct": 50.0}]}
    s3 = {"system": {"cpu_pct": 3.0}}
    docs = b.build(items((1.0, 0, {"loss": 1.0})), [(0.5, s1)])
    docs += b.build(items((5.0, 1, {"loss": 0.9})), [(2.0, s2), (3.0, s3)])
    docs += b.build([], [(6.0, {"system": {"cpu_pct": 4.0}})])
    docs += b.finish()
    assert [(d["step"], d["metrics"] != {}, d.get("system", {}).get("cpu_pct")) for d in docs] == [
        (0, True, 1.0),
        (0, False, 2.0),  # s2: no step came before s3 was taken -> a tick at the last step
        (1, True, 3.0),
        (1, False, 4.0),  # after the last step, left at close
    ]
    assert [d["seq"] for d in docs] == [0, 1, 2, 3]
    assert docs[1]["gpus"] == [{"index": 0, "util_pct": 50.0}]
    assert [is_tick(d) for d in docs] == [False, True, False, True]


# ---- shipping ------------------------------------------------------------------------------------
def test_every_step_is_handed_over_exactly_once_through_an_outage(tmp_path: Path) -> None:
    sink = Collect()
    steps = logger(sink, tmp_path)
    for i in range(300):
        steps.log_step(i, loss=1.0)
    assert steps.flush(10)
    sink.down = True
    for i in range(300, 3000):
        steps.log_step(i, loss=1.0)
    assert not steps.flush(10)  # the sink refused: the steps wait in memory
    assert steps.stats["sink_errors"] >= 1
    sink.down = False
    for i in range(3000, 5000):
        steps.log_step(i, loss=1.0)
    assert steps.flush(30)
    steps.close()
    seqs = [d["seq"] for d in sink.docs]
    assert len(seqs) == 5000
    assert sorted(seqs) == list(range(5000))
    assert sorted(d["step"] for d in sink.docs) == list(range(5000))
    assert seqs == sorted(seqs)  # the waiting batches went first: order kept


def test_a_sink_down_through_close_is_reported_with_the_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The logger keeps nothing on disk: durability is the sink's (the run's store writes
    an outbox entry first). What the sink never took is said, with the number."""
    sink = Collect()
    sink.down = True
    steps = logger(sink, tmp_path)
    for i in range(1234):
        steps.log_step(i, loss=0.5)
    with caplog.at_level(logging.WARNING):
        steps.close()
    assert sink.docs == []
    assert "1234 step document(s) could not be recorded" in caplog.text


def test_memory_stays_bounded_while_the_sink_keeps_failing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = Collect()
    sink.down = True
    steps = logger(sink, tmp_path, max_buffered=1000)
    with caplog.at_level(logging.ERROR):
        for i in range(5000):
            steps.log_step(i, loss=1.0)
        steps.flush(10)
        assert len(steps._pending) <= 1000
        assert steps.stats["dropped"] >= 4000
        sink.down = False
        steps.close()
    assert "oldest step document(s) dropped" in caplog.text
    kept = sorted(d["seq"] for d in sink.docs)
    assert kept == list(range(5000 - len(kept), 5000))  # the newest were kept, in order


def test_log_step_never_waits_for_a_hung_store(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()
    shipped: list[dict[str, Any]] = []

    def hung_sink(docs: list[dict[str, Any]]) -> None:
        entered.set()
        release.wait()  # the store hangs until the test lets it go
        shipped.extend(docs)

    steps = logger(hung_sink, tmp_path)
    steps.log_step(0, loss=1.0)
    assert entered.wait(60), "the first step never reached the sink"
    for i in range(1, 20_000):
        steps.log_step(i, loss=1.0)
    assert not release.is_set()  # 20k calls returned while the store was hung inside a write
    release.set()
    steps.close()
    assert sorted(d["seq"] for d in shipped) == list(range(20_000))


def test_log_step_only_reads_the_clock_and_appends(tmp_path: Path) -> None:
    """The hot path's whole work, counted: no Python call, lock, I/O or conversion."""
    import gc
    from collections import Counter

    steps = logger(Collect(), tmp_path, flush_interval_s=60)
    calls: Counter[str] = Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls[frame.f_code.co_name] += 1
        elif event == "c_call":
            calls[f"C {arg.__name__}"] += 1

    log_step = steps.log_step
    gc.collect()  # no earlier object's finaliser (a generator's close) may run in the loop
    gc.disable()  # nor the collector's callbacks (Hypothesis registers one)
    try:
        sys.setprofile(profile)
        for i in range(1000):
            log_step(i, loss=0.5)
        sys.setprofile(None)
    finally:
        gc.enable()
    steps.close()
    calls.pop("C setprofile", None)
    python_calls = {name: n for name, n in calls.items() if not name.startswith("C ")}
    builtin_calls = {name: n for name, n in calls.items() if name.startswith("C ")}
    assert python_calls == {"log_step": 1000}
    assert sum(builtin_calls.values()) == 2 * 1000, builtin_calls  # the clock and one extend
    assert builtin_calls.get("C extend") == 1000, builtin_calls


def test_waiting_steps_hold_nothing_the_garbage_collector_tracks(tmp_path: Path) -> None:
    """A burst of logged steps waiting for the logger's thread adds no object the collector
    must walk (a tuple holding the metrics dict would be one per step)."""
    import gc

    steps = logger(Collect(), tmp_path, flush_interval_s=60)
    for i in range(1000):
        steps.log_step(i, 0, loss=0.5, lr=1e-3)
    waiting = list(steps._buf)
    assert len(waiting) == 4 * 1000
    assert not [x for x in waiting if gc.is_tracked(x)]
    steps.close()


def test_log_step_after_close_is_dropped_quietly(tmp_path: Path) -> None:
    sink = Collect()
    steps = logger(sink, tmp_path)
    steps.close()
    steps.log_step(1, loss=1.0)
    steps.close()
    assert sink.docs == []


def test_a_failing_sampler_or_sink_never_reaches_the_training_thread(tmp_path: Path) -> None:
    def broken(docs: list[dict[str, Any]]) -> None:
        raise RuntimeError("bug in a sink")

    steps = logger(broken, tmp_path, system_interval_s=0.01)
    for i in range(100):
        steps.log_step(i, loss=1.0)  # returns: the errors stay on the logger's thread
    steps.close()
    assert steps.stats["sink_errors"] >= 1
    assert steps.stats["logged"] == 100


def test_the_console_prints_the_line_and_a_final_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = logger(Collect(), tmp_path, console=True, total_steps=100)
    for i in range(100):
        steps.log_step(i, loss=1.0 / (i + 1))
        time.sleep(0.002)
    steps.close()
    err = capsys.readouterr().err
    assert "step " in err
    assert "/100 (" in err
    assert err.rstrip().splitlines()[-1].startswith("done: 100 steps in ")


# ---- exit paths (subprocesses: atexit and signals act on a whole interpreter) -----------------
SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from pathlib import Path
    from warehouse.live.steps import StepLogger, StepOptions

    out = Path(sys.argv[1])
    mode = sys.argv[2]

    def sink(docs):
        with open(out, "a") as f:
            for d in docs:
                f.write(json.dumps(d) + "\\n")

    if mode == "chain":
        def mine(signum, frame):
            with open(str(out) + ".handler", "w") as f:
                f.write("called")
            sys.exit(7)
        signal.signal(signal.SIGTERM, mine)

    steps = StepLogger("r", "e", sink, StepOptions(console=False, system_interval_s=0,
                                                  flush_interval_s=60))
    for i in range(5000):
        steps.log_step(i, loss=0.1)
    if mode == "exit":
        sys.exit(0)  # no close(): atexit must flush
    print("ready", flush=True)
    time.sleep(60)
    """
)


def run_script(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[str], Path]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / "steps.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(out), mode], stdout=subprocess.PIPE, text=True
    )
    return proc, out


def shipped(out: Path) -> list[int]:
    return sorted(json.loads(line)["seq"] for line in out.read_text().splitlines())


def test_normal_interpreter_exit_flushes_through_atexit(tmp_path: Path) -> None:
    proc, out = run_script(tmp_path, "exit")
    assert proc.wait(60) == 0
    assert shipped(out) == list(range(5000))


def test_sigterm_flushes_then_the_process_still_dies_of_sigterm(tmp_path: Path) -> None:
    proc, out = run_script(tmp_path, "sleep")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == -signal.SIGTERM
    assert shipped(out) == list(range(5000))


def test_sigterm_chains_to_the_handler_installed_before(tmp_path: Path) -> None:
    proc, out = run_script(tmp_path, "chain")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 7
    assert (tmp_path / "steps.jsonl.handler").read_text() == "called"
    assert shipped(out) == list(range(5000))


def test_no_sigterm_handler_is_installed_from_another_thread(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    made: list[StepLogger] = []
    thread = threading.Thread(target=lambda: made.append(logger(Collect(), tmp_path)))
    thread.start()
    thread.join()
    assert signal.getsignal(signal.SIGTERM) == before
    made[0].close()


def test_close_restores_the_previous_sigterm_handler(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    steps = logger(Collect(), tmp_path)
    assert signal.getsignal(signal.SIGTERM) != before
    steps.close()
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_forked_child_ships_nothing_and_exits_cleanly(tmp_path: Path) -> None:
    sink = Collect()
    steps = logger(sink, tmp_path)
    steps.log_step(0, loss=1.0)
    with warnings.catch_warnings():  # 3.12+ warns about fork() with threads running
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: logs and exits through atexit, as a DataLoader worker might
        steps.log_step(1, loss=1.0)
        steps.close()
        os._exit(0 if steps._closed else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    steps.log_step(2, loss=1.0)
    steps.close()
    assert [d["step"] for d in sink.docs] == [0, 2]


# ---- the column-wise path gives the documents the item-by-item path gives -----------------------
def _random_items(seed: int, n: int) -> tuple[list[Any], list[tuple[float, dict[str, Any]]]]:
    import random

    rng = random.Random(seed)
    t = 1_700_000_000.0
    out: list[Any] = []
    step = 0
    for i in range(n):
        t += rng.choice((0.001, 0.01, 0.0, 0.5))
        step += rng.choice((1, 1, 1, 10, 0))
        metrics: dict[str, Any] = {"loss": 2.0 * 0.999**i + rng.random() * 0.01, "lr": 3e-4}
        if rng.random() < 0.9:
            metrics["grad_norm"] = rng.choice((1.0, 1.1, 0.9, 8.0, 50.0))
        odd = rng.random()
        if odd < 0.001:
            metrics["loss"] = float("nan")
        elif odd < 0.002:
            metrics["val acc"] = 0.5  # a name to normalise
        elif odd < 0.003:
            metrics["count"] = 3  # an int
        elif odd < 0.0035:
            out.append((t, "x", None, {"loss": 1.0}))  # a step that is not an int
            continue
        out.append((t, step, i // 100, metrics))
    samples = [(out[k][0] + 0.0005, {"system": {"cpu_pct": float(k)}}) for k in range(5, n, 97)]
    return out, samples


def _slow_builder(monkeypatch: pytest.MonkeyPatch, **kw: Any) -> DocBuilder:
    b = DocBuilder("r", "e", **kw)
    monkeypatch.setattr(b, "_fast_docs", lambda items: None)
    return b


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("tokens", [None, 4096.0])
def test_column_wise_documents_equal_the_item_by_item_ones(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, seed: int, tokens: Any
) -> None:
    import copy

    kw = {"tokens_per_step": tokens, "flops_per_token": 6e9, "peak_flops": 1e15}
    items, samples = _random_items(seed, 2000)
    chunks = [items[k : k + 137] for k in range(0, len(items), 137)]  # as the thread drains
    fast, slow = DocBuilder("r", "e", **kw), _slow_builder(monkeypatch, **kw)
    taken = []
    column_wise = fast._fast_docs
    monkeypatch.setattr(fast, "_fast_docs", lambda its: taken.append(column_wise(its)) or taken[-1])
    got: list[dict[str, Any]] = []
    want: list[dict[str, Any]] = []
    sample_chunks: list[list[Any]] = [[] for _ in chunks]
    for sample in samples:  # taken while the chunk's steps were logged
        sample_chunks[next(k for k, c in enumerate(chunks) if c[-1][0] >= sample[0])].append(sample)
    for number, (chunk, chunk_samples) in enumerate(zip(chunks, sample_chunks, strict=True)):
        more = number % 3 != 2
        got += fast.build(copy.deepcopy(chunk), chunk_samples, more=more)
        want += slow.build(copy.deepcopy(chunk), chunk_samples, more=more)
    got += fast.finish()
    want += slow.finish()
    assert len(want) > 1900
    assert sum("flags" in d for d in want) > 100  # spikes and trends were computed
    assert got == want
    assert sum(d is not None for d in taken) >= 5  # both paths were taken
    assert sum(d is None for d in taken) >= 2
    for attr in ("seq", "steps", "last_step", "last_epoch", "last_metrics", "last_duration"):
        assert getattr(fast, attr) == getattr(slow, attr), attr


def test_a_burst_drained_in_chunks_gives_the_documents_of_one_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items, samples = _random_items(9, 3000)
    one = _slow_builder(monkeypatch)
    want = one.build([(t, s, e, dict(m)) for t, s, e, m in items], samples) + one.finish()
    chunked = DocBuilder("r", "e")
    got: list[dict[str, Any]] = []
    for k in range(0, len(items), 500):
        chunk = [(t, s, e, dict(m)) for t, s, e, m in items[k : k + 500]]
        got += chunked.build(chunk, samples if k == 0 else [], more=k + 500 < len(items))
    got += chunked.finish()
    assert got == want


def test_a_burst_larger_than_the_buffer_bound_is_all_shipped(tmp_path: Path) -> None:
    sink = Collect()
    steps = logger(sink, tmp_path, flush_interval_s=60.0, max_buffered=3000)
    steps.batch_size = 1000
    for i in range(10_000):  # logged faster than one tick: drained in chunks of 1000
        steps.log_step(i, loss=1.0)
    steps.close()
    assert steps.stats["dropped"] == 0
    assert [d["step"] for d in sink.docs] == list(range(10_000))
    assert max(len(b) for b in sink.batches) <= 1000


def test_encoded_lines_hold_what_the_store_would_write() -> None:
    import json

    items, samples = _random_items(4, 500)
    b = DocBuilder("r", "e")
    docs = b.build(items, samples) + b.finish()
    docs[3]["odd"] = {1: object()}  # a value JSON has no type for, a key that is not a string
    data = encode_lines(docs, "run9", "exp9")
    lines = data.decode().splitlines()
    want = [
        json.loads(json.dumps({**d, "run_id": "run9", "experiment": "exp9"}, default=str))
        for d in docs
    ]
    assert [json.loads(line) for line in lines] == want
    assert data.endswith(b"\n")
    assert encode_lines([], "r", "e") == b""


def test_step_metrics_that_become_one_name_are_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``top-1 acc`` and ``top-1.acc`` are both stored as ``top-1_acc``: the builder says so
    (once, however many steps), instead of silently keeping one value."""
    b = DocBuilder("r", "e")
    with caplog.at_level(logging.WARNING):
        for step in range(3):
            b.build(items((100.0 + step, step, {"top-1 acc": 0.5, "top-1.acc": 0.6})), [])
    said = [r.getMessage() for r in caplog.records if "both stored as" in r.getMessage()]
    assert len(said) == 1
    assert "'top-1 acc'" in said[0]
    assert "'top-1.acc'" in said[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        DocBuilder("r", "e").build(items((1.0, 0, {"loss": 1.0, "lr": 0.1})), [])
    assert not caplog.records  # distinct names: nothing to say


# ---- work counted: a batch at a time, not a step at a time --------------------------------------
class CountingOrjson:
    """orjson with its ``dumps`` calls counted (encode_lines imports it on each call)."""

    def __init__(self) -> None:
        import orjson

        self.real = orjson
        self.calls = 0
        self.JSONEncodeError = orjson.JSONEncodeError
        self.OPT_APPEND_NEWLINE = orjson.OPT_APPEND_NEWLINE

    def dumps(self, *args: Any, **kw: Any) -> bytes:
        self.calls += 1
        return self.real.dumps(*args, **kw)


def test_a_batch_is_encoded_with_one_orjson_call_into_the_lines_of_one_call_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counting = CountingOrjson()
    items, samples = _random_items(5, 3000)
    b = DocBuilder("r", "e")
    docs = b.build(items, samples) + b.finish()
    want = b"".join(counting.real.dumps(d, option=counting.OPT_APPEND_NEWLINE) for d in docs)
    monkeypatch.setitem(sys.modules, "orjson", counting)
    assert encode_lines(docs, "r", "e") == want  # the bytes one call per document gave
    assert counting.calls == 1
    # a document holding the boundary text itself: found by the count, one call per document
    from warehouse.stores.step_lines import _BOUNDARY

    docs[7] = {**docs[7], "more": [1, _BOUNDARY, 2]}  # written as ,"<boundary>",
    counting.calls = 0
    data = encode_lines(docs, "r", "e")
    assert [json.loads(line) for line in data.splitlines()] == docs
    assert counting.calls == 1 + len(docs)


def test_the_column_wise_path_makes_no_python_call_per_step() -> None:
    """Documents of a warm builder, 5,000 steps: a fixed number of Python-level calls (the
    comprehensions and helpers of one batch), none per step."""
    b = DocBuilder("r", "e")
    t = 1_700_000_000.0
    b.build([(t + i * 1e-3, i, 0, {"loss": 1.0, "grad_norm": 1.0}) for i in range(100)], [])
    batch = [
        (t + i * 1e-3, i, 0, {"loss": 1.0 / i, "lr": 0.1, "grad_norm": 1.0})
        for i in range(100, 5100)
    ]
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls.append(frame.f_code.co_name)

    gc.collect()  # no earlier object's finaliser may run in the profiled call
    gc.disable()  # nor the collector's callbacks (Hypothesis registers one)
    try:
        sys.setprofile(profile)
        docs = b.build(batch, [])
        sys.setprofile(None)
    finally:
        gc.enable()
    assert len(docs) == 5000
    assert [d["seq"] for d in docs] == list(range(100, 5100))
    assert len(calls) < 40, sorted(set(calls))
    assert "_step_doc" not in calls
    assert "push" not in calls


def test_the_column_wise_documents_keep_the_item_by_item_key_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Same dicts and the same key order: the stored lines are byte for byte the same."""
    items, samples = _random_items(11, 1500)
    fast, slow = DocBuilder("r", "e"), _slow_builder(monkeypatch)
    got = fast.build([(t, s, e, dict(m)) for t, s, e, m in items], samples) + fast.finish()
    want = slow.build([(t, s, e, dict(m)) for t, s, e, m in items], samples) + slow.finish()
    assert got == want
    assert encode_lines(got, "r", "e") == encode_lines(want, "r", "e")


def test_the_store_path_encodes_once_per_batch_handed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warehouse.stores.local import LocalStore

    counting = CountingOrjson()
    monkeypatch.setitem(sys.modules, "orjson", counting)
    store = LocalStore(tmp_path / "home")
    batches: list[int] = []

    def sink(docs: list[dict[str, Any]]) -> None:
        batches.append(len(docs))
        store.write_steps("run1", "exp", docs)

    steps = logger(sink, tmp_path, flush_interval_s=60)
    steps.batch_size = 1000
    for i in range(4500):
        steps.log_step(i, loss=1.0, grad_norm=1.0)
    steps.close()
    assert sum(batches) == 4500
    assert counting.calls == len(batches) <= 10  # one encoder call per batch, none per step
    lines = (tmp_path / "home" / "steps" / "run1.jsonl").read_bytes().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == list(range(4500))
