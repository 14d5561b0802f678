"""Every table fits the width it is given and keeps the run id and the primary score
(issue 32, item 5).

The rule, from ``warehouse.output.write_table``: no line of a table is wider than the terminal
(or ``COLUMNS``); the run id (the first ``*run_id`` column) and the primary score are never
left out; a value is never cut short (long texts wrap); ``compare`` never leaves out a run
(its runs go into as many tables as they need); run ids are shortened to ``RUN_ID_WIDTH``
characters, never to another length.

It is checked twice: on ``write_table`` itself over generated rows and widths (Hypothesis),
and on every command that prints a table, at 60, 80 and 120 columns, over generated
warehouses: long experiment names (with and without places to break), many metrics in three
splits, many runs in ``compare``, long sample ids, labels, tags and config values.
"""

from __future__ import annotations

import io
import json
import random
import re
import string
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

import warehouse
from tests.helpers import run_main
from warehouse.filters.docpath import get_path
from warehouse.output import (
    RUN_ID_WIDTH,
    essential_columns,
    number_format,
    table_cell,
    write_table,
)

WIDTHS = (60, 80, 120)


def lines_over(text: str, width: int) -> list[str]:
    return [line for line in text.splitlines() if cell_len(line) > width]


def left_out(text: str) -> list[str]:
    """The columns the caption says were left out to fit."""
    flat = " ".join(text.split())
    found = re.search(r"left out to fit \d+ columns: (.*?) — ", flat)
    return [c.strip() for c in found.group(1).split(",")] if found else []


def short_ids_are_one_width(text: str, run_ids: list[str]) -> None:
    """A run id is printed whole or as its first RUN_ID_WIDTH characters, never otherwise
    (a word of its own: inside a link, ``.../objects/exp/<run id>/outputs/...``, it is the
    path and may be folded anywhere)."""
    for token in re.findall(r"(?<![\w/.-])[0-9a-f]{6,}(?![\w/.-])", text):
        if any(r.startswith(token) for r in run_ids):
            assert len(token) in (RUN_ID_WIDTH, len(run_ids[0])), token


# --- the layout rule on generated rows ---------------------------------------------------------

NAME = st.text(alphabet=string.ascii_lowercase + "_.-/", min_size=1, max_size=40).filter(
    lambda s: s.strip("_.-/")
)
TEXT = st.text(alphabet=string.ascii_letters + string.digits + "_-./: ", max_size=90)
NUMBER = st.one_of(
    st.floats(-1e12, 1e12, allow_nan=False),
    st.integers(-(10**12), 10**12),
)


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[dict[str, Any]], str, list[str]]:
    """Columns (a run id, a primary score, others), rows, the primary column, ``keep``."""
    id_col = draw(st.sampled_from(["run_id", "best_run_id"]))
    primary = draw(st.sampled_from(["score", "best_score", "metrics.val.acc", "mean"]))
    others = draw(st.lists(NAME, max_size=12, unique=True))
    others = [c for c in others if c not in (id_col, primary) and not c.endswith("run_id")]
    cols = others[:]
    cols.insert(draw(st.integers(0, len(cols))), id_col)
    cols.insert(draw(st.integers(0, len(cols))), primary)
    kinds = {c: draw(st.sampled_from(["number", "text", "mixed"])) for c in others}
    n = draw(st.integers(1, 6))
    rows = []
    for i in range(n):
        row: dict[str, Any] = {
            id_col: f"{i:04x}" + draw(st.text("0123456789abcdef", min_size=28, max_size=28)),
            primary: draw(st.floats(0, 1)),
        }
        for c in others:
            kind = kinds[c]
            if kind == "number":
                row[c] = draw(NUMBER)
            elif kind == "text":
                row[c] = draw(TEXT)
            else:
                row[c] = draw(st.one_of(st.none(), NUMBER, TEXT))
        rows.append(row)
    keep = draw(st.lists(st.sampled_from(cols), max_size=4, unique=True))
    return cols, rows, primary, keep


class Out(io.StringIO):
    def isatty(self) -> bool:
        return False


def drawn(
    rows: list[dict[str, Any]], width: int, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    out = Out()
    write_table(rows, out, **options)
    return out.getvalue()


@settings(max_examples=60)
@given(table=tables(), width=st.integers(50, 200))
@example(
    table=(
        ["rank", "experiment", "best_score", "best_run_id", "n", "ci_low", "ci_high"],
        [
            {
                "rank": 1,
                "experiment": "digits-" + "very_long_experiment_" * 4,
                "best_score": 0.99,
                "best_run_id": "a897853cdf30" + "0" * 20,
                "n": 359,
                "ci_low": 0.97,
                "ci_high": 0.995,
            }
        ],
        "best_score",
        ["rank", "experiment"],
    ),
    width=60,
).via("the leaderboard at 60 columns")
def test_a_table_fits_and_keeps_the_run_id_and_the_primary_score(
    table: tuple[list[str], list[dict[str, Any]], str, list[str]],
    width: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cols, rows, primary, keep = table
    text = drawn(rows, width, monkeypatch, columns=cols, primary=primary, keep=keep)
    assert not lines_over(text, width), text
    id_col, score_col = essential_columns(cols, primary)
    assert id_col not in left_out(text)
    assert score_col not in left_out(text)
    for row in rows:
        assert row[id_col][:RUN_ID_WIDTH] in text
    spec = number_format([r[score_col] for r in rows])
    for row in rows:
        assert table_cell(row[score_col], score_col, spec) in text


@settings(max_examples=40)
@given(
    runs=st.integers(1, 12),
    fields=st.lists(NAME, min_size=1, max_size=8, unique=True),
    width=st.integers(50, 200),
)
def test_compare_shows_every_run_in_as_many_tables_as_needed(
    runs: int, fields: list[str], width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [f"{i:012x}" for i in range(runs)]
    rows = [
        {"field": f, **{r: f"2026-11-20 10:{i:02d}:{j:02d}" for j, r in enumerate(ids)}}
        for i, f in enumerate(fields)
    ]
    text = drawn(rows, width, monkeypatch, repeat=("field",))
    assert not lines_over(text, width), text
    assert not left_out(text)
    for run_id in ids:
        assert run_id in text


# --- every table-printing command, over generated warehouses ---------------------------------

# command -> (argv with {id0} {id1} {ids}, the primary score column of its JSON rows or None)
TABLE_COMMANDS: dict[str, tuple[str, str | None]] = {
    "query runs": ("query runs", "metrics.val.acc"),
    "query best": ("query best", "score"),
    "query best -e": ("query best --per-experiment", "score"),
    "query leaderboard": ("query leaderboard", "best_score"),
    "query leaderboard --by-group": ("query leaderboard --by-group", "mean"),
    "query over-time": ("query over-time", "best_so_far"),
    "query over-time --every-run": ("query over-time --every-run", "best_so_far"),
    "query over-time --interval": ("query over-time --interval day", "best_so_far"),
    "query over-time --by-group": ("query over-time --by-group", "best_so_far"),
    "query decomposition": ("query decomposition", "score"),
    "query samples --best": ("query samples --best --split val", "correct"),
    "query samples --run": ("query samples --run {id0}", "correct"),
    "query samples --hardest": ("query samples --hardest", "error_rate"),
    "query show": ("query show {id0}", None),
    "query compare": ("query compare {ids}", None),
    "query steps": ("query steps {id0}", None),
    "query diff": ("query diff {id0} {id1}", None),
    "query slices": ("query slices --by label", "mean"),
    "query replicates": ("query replicates", "mean"),
    "status": ("status", None),
    "runs note": ("runs note {id0} a-note-that-is-long-enough-to-need-folding-" + "x" * 30, None),
    "runs tag": ("runs tag {id0} +a-tag-that-is-rather-long-too", None),
}
NO_TABLE = {
    "demo": "records the digits sweep; prints progress and the leaderboard command",
    "init": "prints a table against Elasticsearch only: tests/test_ops_cli.py",
    "sync": "one line of counts",
    "compact": "one line",
    "export-templates": "writes files",
    "watch": "passes a program's output through",
    "report": "writes an HTML file",
    "check": "one verdict line",
    "export": "writes files",
    "push": "one line of counts (tables only with --format)",
    "pull": "one line of counts (tables only with --format)",
    "ui": "serves a web page",
    "kibana import": "one line per saved object set",
    "kibana export": "writes a file",
    "kibana export-objects": "writes files",
    "runs rename-experiment": "one line",
    "runs delete": "one line",
}


def leaf_commands() -> Iterator[str]:
    import typer.main

    from warehouse.cli import full_app

    def walk(command: Any, prefix: list[str]) -> Iterator[str]:
        children = getattr(command, "commands", None)
        if children is None:
            yield " ".join(prefix)
            return
        for name, child in children.items():
            yield from walk(child, [*prefix, name])

    yield from walk(typer.main.get_command(full_app()), [])


def test_every_command_is_checked_or_said_to_print_no_table() -> None:
    checked = {name.split(" -")[0] for name in TABLE_COMMANDS}
    unknown = [c for c in leaf_commands() if c not in checked and c not in NO_TABLE]
    assert not unknown, (
        f"new command(s) {unknown}: add each to TABLE_COMMANDS (it prints a table) or to "
        "NO_TABLE with the reason"
    )


def record_world(seed: int) -> list[str]:
    """A generated warehouse: its run ids, newest first."""
    rng = random.Random(seed)
    words = ["resnet50", "augmentation", "baseline", "with", "dropout", "warmup", "cosine"]

    def experiment() -> str:
        if rng.random() < 0.3:  # no place to break the name
            return "exp" + "".join(rng.choice(string.ascii_lowercase) for _ in range(50))
        return "digits-" + "_".join(rng.choice(words) for _ in range(rng.randint(1, 9)))

    experiments = [experiment() for _ in range(rng.randint(2, 4))]
    metrics = [f"m{i}_" + "x" * rng.randint(0, 14) for i in range(rng.randint(1, 9))]
    ids = []
    for name in experiments:
        for seed_value in range(rng.randint(2, 3)):
            config = {
                "seed": seed_value,
                "lr": rng.random() / 1000,
                "model": {"name": name, "notes": "a long config value " * rng.randint(1, 8)},
            }
            tags = ["tag-" + "y" * rng.randint(1, 40)]
            with warehouse.start_run(name, config, tags=tags) as run:
                for split in ("train", "val", "test"):
                    values = {m: rng.random() * 10 ** rng.randint(-5, 7) for m in metrics}
                    run.log_metrics(split, {"acc": rng.random(), **values})
                rows = [
                    {
                        "sample_id": f"s{k:04d}-" + "z" * rng.randint(0, 40),
                        "correct": int(rng.random() < 0.8),
                        "label": rng.choice(["cat", "dog", "a-rather-long-label-name"]),
                        "confidence": rng.random(),
                    }
                    for k in range(24)
                ]
                run.log_samples("val", rows)
                for k in range(2):
                    run.log_output("val", rows[k]["sample_id"], b"png", content_type="image/png")
                for step in range(3):
                    run.log_step(step, loss=rng.random(), lr=1e-4)
            ids.append(run.run_id)
    return ids[::-1]


def argv_of(template: str, ids: list[str]) -> list[str]:
    filled = template.replace("{ids}", " ".join(ids[:9]))
    return filled.replace("{id0}", ids[0]).replace("{id1}", ids[1]).split()


def json_rows(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> list[Mapping[str, Any]]:
    code, out, err = run_main([*argv, "-f", "json"], monkeypatch, capsys)
    assert code == 0, err
    rows: list[Mapping[str, Any]] = json.loads(out)
    return rows


def run_ids_of(rows: list[Mapping[str, Any]]) -> list[str]:
    """The run ids a table of these rows must show: its first ``*run_id`` column's."""
    columns = essential_columns(list(rows[0]))[:1] if rows else []
    return [str(r[c]) for r in rows for c in columns if str(c).endswith("run_id") and r.get(c)]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_every_table_command_fits_60_80_120_columns_and_keeps_ids_and_scores(
    seed: int, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = record_world(seed)
    failures = []
    for name, (template, score) in TABLE_COMMANDS.items():
        argv = argv_of(template, ids)
        has_json = name not in ("runs note", "runs tag")
        rows = json_rows(argv, monkeypatch, capsys) if has_json else []
        for width in WIDTHS:
            monkeypatch.setenv("COLUMNS", str(width))
            code, out, err = run_main(argv, monkeypatch, capsys)
            if name == "query show":  # the config and overrides are text to copy, not tables
                out = re.split(r"^(?:overrides|config)$", out, maxsplit=1, flags=re.M)[0]
            problems = []
            if code != 0:
                problems.append(f"exit {code}: {err}")
            problems += [f"{cell_len(line)} > {width}: {line}" for line in lines_over(out, width)]
            wanted = ids[:9] if name == "query compare" else run_ids_of(rows)
            problems += [f"run {r[:RUN_ID_WIDTH]} not shown" for r in wanted
                         if r[:RUN_ID_WIDTH] not in out]  # fmt: skip
            if score is not None:
                values = [get_path(dict(r), score) for r in rows]
                spec = number_format(values)
                problems += [
                    f"{score} {v} not shown"
                    for v in values
                    if v is not None and table_cell(v, score, spec) not in out
                ]
                if score in left_out(out):
                    problems.append(f"{score} left out")
            links = any("output_uri" in r for r in rows)  # a link folds anywhere, ids too
            try:
                short_ids_are_one_width(err if links else out + err, ids)
            except AssertionError as exc:
                problems.append(f"a run id of another width: {exc}")
            failures += [f"{name} at {width}: {p}" for p in problems]
    assert not failures, "\n".join(failures[:40])
