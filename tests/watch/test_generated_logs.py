"""Logs generated from a grammar, with known values: the general reader recovers >= 95 % of
them, none wrong, none invented (issue 30).

A log picks, once, how its lines look: a step anchor (``[N]``, ``N/M``, ``iter N``,
``Iteration N``, ``step N``, ``[E][i/M]``, in any case, with ``:``/``=``/space), an epoch anchor
(``Epoch N``, ``epoch N:``, ...), random metric names (words, apostrophes, slashes, dots,
``@``, brackets, dashes; several words), separators, delimiters between pairs, a number style
and precision per metric, the meter form ``Loss 2.3e+00 (2.4e+00)``, an optional logging
prefix, and whether each epoch's values are printed with an anchor or as a line that repeats
(``val loss: 0.5, val acc: 0.8``). Around the metric lines go noise lines (a config print
once, ``done in 3.2 s``, banners, numbers with units, names in words), ``\\r`` redraws of a
step's line before its last drawing, and a stderr stream of its own. Each value is known with
its position by the README's rule; the parser runs in-process (the replays in
``test_replays.py`` cover the process path).
"""

from __future__ import annotations

import gc
import math
import re
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from warehouse.watch.parsers import OutputReader

RESERVED = frozenset(
    {"epoch", "step", "iter", "iteration", "global_step", "batch", "in", "of", "at", "to",
     "for", "from", "by", "with", "after", "took", "on", "and", "or", "nan", "inf", "infinity",
     "v_num", "eta", "e", "test", "val", "valid", "validation", "eval", "evaluation", "dev",
     "testing", "validate"}
)  # fmt: skip
WORD = st.from_regex(r"[a-z][a-z_]{0,7}[a-z0-9]?", fullmatch=True).filter(
    lambda w: w not in RESERVED and not w.startswith(("epoch", "step", "iter", "batch"))
)


@st.composite
def names(draw: st.DrawFn, spaced: bool) -> str:
    """One metric name: a word, or words with punctuation (``valid_0's l2``, ``Acc@1``...)."""
    a, b = draw(WORD), draw(WORD)
    forms = ["{a}", "{a}_{b}", "{a}/{b}", "{a}.{b}", "{A}@{k}", "{a}-{b}", "{a}[{k}]", "{A}"]
    if spaced:
        forms += ["{a}'s {b}", "{A} {b}", "{a} {b}"]
    form = draw(st.sampled_from(forms))
    return form.format(a=a, b=b, A=a.capitalize(), k=draw(st.integers(1, 5)))


@dataclass
class Style:
    sep: str
    delim: str
    kinds: dict[str, tuple[str, int]]  # metric -> (number style, precision)
    meter: bool


@dataclass
class Log:
    out: list[str] = field(default_factory=list)  # stdout, as written (lines end "\n" or "\r")
    err: list[str] = field(default_factory=list)
    # (stream, step, metric) -> the values printed there, of those the rule says are read (an
    # epoch's values placed at a step that already holds that metric form a point of their own)
    truth: dict[tuple[int, int, str], list[float]] = field(default_factory=dict)

    def add(self, step: int, name: str, value: float, placed: bool = False) -> None:
        """A value printed at ``step``; ``placed``: put there by the rule (an epoch's)."""
        values = self.truth.setdefault((0, step, name), [])
        if placed or not values:
            values.append(value)
        else:
            values[-1] = value  # the step printed again: its last value


def printed(value: float, kind: str, precision: int) -> tuple[str, float]:
    """The text of a value, and the number that text says."""
    if kind == "f":
        text = f"{value:.{precision}f}"
    elif kind == "e":
        text = f"{value:.{precision}e}"
    elif kind == "g":
        text = f"{value:.{precision}g}"
    else:
        text = f"{value:.{precision}f}%"
    return text, float(text.rstrip("%"))


def pairs(style: Style, values: dict[str, float]) -> tuple[str, dict[str, float]]:
    parts, shown = [], {}
    for name, value in values.items():
        kind, precision = style.kinds[name]
        text, number = printed(value, kind, precision)
        if style.meter:
            avg, _ = printed(value * 1.1, kind, precision)
            parts.append(f"{name} {text} ({avg})")
        else:
            parts.append(f"{name}{style.sep}{text}")
        shown[name] = number
    return style.delim.join(parts), shown


STEP_ANCHORS = [
    "[{n}]",
    "{n}/{m}",
    "iter {n}",
    "Iteration {n}",
    "step {n}",
    "Step: {n}",
    "STEP={n}",
    "step {n}/{m}",
    "iteration={n}",
]
EPOCH_ANCHORS = ["Epoch {e}", "epoch {e}:", "EPOCH {e}/{E}", "Epoch: {e}", "epoch={e}"]
AFTER_ANCHOR = [" ", ": ", "\t", " - ", " | ", ", "]
PREFIXES = ["", "", "INFO:root:", "2026-11-27 05:52:00,158 - trainer - INFO - ", "[rank0]: "]
NOISE = [
    "Loading data from /tmp/data_v2 ...",
    "done in {x:.1f} s",
    "Saving checkpoint to ckpt_{i}.pt",
    "==========",
    "Elapsed {i} ms",
    "Using {i} workers",
    "",
]


@st.composite
def logs(draw: st.DrawFn) -> Log:
    log = Log()
    epochs = draw(st.integers(1, 4))
    batches = draw(st.integers(1, 6))
    every = draw(st.integers(1, 3))  # a step line every k batches
    shape = draw(st.sampled_from(["steps+epochs", "steps", "epochs", "rounds", "table"]))
    sep = draw(st.sampled_from([": ", "=", " = ", ":", " ", "\t"]))
    delim = draw(st.sampled_from([", ", " | ", "\t", "  ", " - ", " "]))
    meter = sep == " " and delim in ("\t", "  ") and draw(st.booleans())
    spaced = sep.strip() != "" or delim.strip() != "" or delim == "\t"
    step_names = draw(st.lists(names(spaced), min_size=1, max_size=4, unique_by=str.lower))
    epoch_names = draw(st.lists(names(spaced), min_size=1, max_size=3, unique_by=str.lower))
    epoch_names = [n for n in epoch_names if n.lower() not in {s.lower() for s in step_names}]
    kinds = {
        name: (draw(st.sampled_from("fefgp")), draw(st.integers(2, 6)))
        for name in [*step_names, *epoch_names]
    }
    style = Style(sep, delim, kinds, meter)
    anchor = draw(st.sampled_from(STEP_ANCHORS)).replace("{m}", str(batches * epochs))
    case = draw(st.sampled_from([str, str.lower, str.upper]))
    epoch_anchor = draw(st.sampled_from(EPOCH_ANCHORS)).replace("{E}", str(epochs))
    after = draw(st.sampled_from(AFTER_ANCHOR))
    prefix = "" if anchor.startswith(("[", "{")) else draw(st.sampled_from(PREFIXES))
    series = shape == "steps+epochs" and epochs > 1 and draw(st.booleans())
    redraw = draw(st.booleans())
    first = draw(st.sampled_from([0, 1]))
    rnd = draw(st.randoms(use_true_random=False))  # the bulk: values, noise, redraws

    def value() -> float:
        v = rnd.uniform(-500, 500) * 10 ** rnd.randint(-3, 0)
        return v if abs(v) > 1e-3 else 0.5

    config = draw(st.lists(WORD, max_size=3))
    config_values = {f"{n}_{i}": value() for i, n in enumerate(config)}
    if config_values:  # printed once: a config print is no point of the run
        kinds.update(dict.fromkeys(config_values, ("g", 3)))
        log.out.append(pairs(style, config_values)[0] + "\n")
    clock: int | None = None
    first_round: int | None = None
    shown_series: list[dict[str, float]] = []
    if shape == "table":
        header = ["Iter", *[n for n in step_names if " " not in n and "'" not in n]]
        if len(header) < 2:
            header.append("Train Loss")
            kinds["Train Loss"] = ("f", 4)
        log.out.append("  ".join(f"{h:>12}" for h in header) + "\n")
    for epoch in range(first, first + epochs):
        for batch in range(1, batches + 1):
            n = (epoch - first) * batches + batch
            if n % every:
                continue
            values = {name: value() for name in step_names}
            if shape == "epochs":
                break
            if shape == "table":
                cells = [str(n)]
                for name in header[1:]:
                    text, number = printed(value(), "f", kinds[name][1])
                    cells.append(text)
                    log.add(n, name, number)
                log.out.append("  ".join(f"{c:>12}" for c in cells) + "\n")
                continue
            if shape == "rounds":  # [E][i/M]: rounds counted from the first one shown
                head = f"Epoch: [{epoch}][{batch:>3}/{batches}]"
                first_round = epoch if first_round is None else first_round
                step = (epoch - first_round) * batches + batch
            else:
                head = case(anchor.format(n=n))
                step = n
            if redraw and rnd.random() < 0.5:  # drawn before with other values
                text, _ = pairs(style, {k: v * 0.5 + 1 for k, v in values.items()})
                log.out.append(f"{prefix}{head}{after}{text}\r")
            text, shown = pairs(style, values)
            log.out.append(f"{prefix}{head}{after}{text}\n")
            for name, number in shown.items():
                log.add(step, name, number)
            clock = step
            if rnd.random() < 0.2:
                noise = rnd.choice(NOISE)
                log.err.append(noise.format(x=value(), i=rnd.randint(0, 999)) + "\n")
        if shape in ("steps", "rounds", "table"):
            continue
        values = {name: value() for name in epoch_names}
        text, shown = pairs(style, values)
        place = clock if clock is not None else epoch
        if series:  # at the clock; before any step: its k-th showing is step k
            place = clock if clock is not None else len(shown_series) + 1
            log.out.append(f"{text}\n")
            shown_series.append({f"{place}\0{k}": v for k, v in shown.items()})
        else:
            e_head = epoch_anchor.format(e=epoch)
            log.out.append(f"{prefix}{e_head}{after}{text}\n")
            for name, number in shown.items():
                log.add(place, name, number, placed=True)
        if rnd.random() < 0.5:
            noise = rnd.choice(NOISE)
            log.out.append(noise.format(x=value(), i=rnd.randint(0, 999)) + "\n")
    texts = [sorted(s.values()) for s in shown_series]
    if len(shown_series) > 1 and any(t != texts[0] for t in texts):  # a series: read
        for showing in shown_series:
            for key, number in showing.items():
                place, name = key.split("\0")
                log.add(int(place), name, number, placed=True)
    return log


def read(log: Log) -> dict[tuple[int, int, str], list[float]]:
    got: dict[tuple[int, int, str], list[float]] = {}
    for index, lines in enumerate((log.out, log.err)):
        reader = OutputReader()
        data = "".join(lines).encode()
        points = []
        for start in range(0, len(data), 97):  # chunked anywhere
            points += reader.feed(data[start : start + 97])
        points += reader.close()
        for step, _, metrics in points:
            for name, value in metrics.items():
                got.setdefault((index, step, name), []).append(value)
    return got


def check(log: Log) -> tuple[int, int]:
    """(values expected, values recovered); asserts none wrong and none invented."""
    got = read(log)
    recovered = 0
    for key, values in got.items():
        assert key in log.truth, f"invented {key}={values}\n{''.join(log.out)}"
        want = log.truth[key]
        for v in values:
            assert any(math.isclose(v, w, rel_tol=1e-12, abs_tol=1e-12) for w in want), (
                f"wrong {key}={values}, printed {want}\n{''.join(log.out)}"
            )
        recovered += sum(any(math.isclose(v, w, rel_tol=1e-12) for v in values) for w in want)
    return sum(map(len, log.truth.values())), recovered


TOTALS = {"logs": 0, "expected": 0, "recovered": 0}


@settings(
    max_examples=int(__import__("os").environ.get("WATCH_GENERATED", "1000")),
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),  # no tracing "explain"
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(logs())
def generated(log: Log) -> None:
    expected, recovered = check(log)
    TOTALS["logs"] += 1
    TOTALS["expected"] += expected
    TOTALS["recovered"] += recovered


def test_generated_logs_are_read_95_percent_none_wrong_none_invented() -> None:
    TOTALS.update(logs=0, expected=0, recovered=0)
    callbacks = list(gc.callbacks)
    try:
        generated()
    finally:  # Hypothesis times the collector with a callback it leaves installed: tests that
        gc.callbacks[:] = callbacks  # count every Python call (tests/live) would see it
    assert TOTALS["logs"] >= 1000
    assert TOTALS["recovered"] >= 0.95 * TOTALS["expected"], TOTALS


_ = (re, example)
