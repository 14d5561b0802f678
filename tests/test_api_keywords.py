"""The public API refuses what it does not know (issue 32, item 1).

Every call ``warehouse`` exports that takes keyword arguments refuses one it does not take
with a ``TypeError`` naming the closest valid keyword, before doing anything; the keywords the
README documents for ``start_run`` (``total_steps``, ``tokens_per_step``, ``flops_per_token``,
``peak_flops``) reach the step logger.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import warehouse
from warehouse.live.step_docs import is_tick
from warehouse.recording.recorder import RunOptions
from warehouse.settings import Settings
from warehouse.stores.base import RunQuery, StepRange
from warehouse.stores.local import LocalStore


def keywords_of(func: Callable[..., Any]) -> list[str]:
    params = inspect.signature(func).parameters.values()
    return [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def exported_functions() -> dict[str, Callable[..., Any]]:
    """The exported calls with a closed set of keywords (``log_step`` takes any metric)."""
    found = {}
    for name in warehouse.__all__:
        value = getattr(warehouse, name)
        if not inspect.isfunction(value) or name == "log_step":
            continue
        if keywords_of(value):
            found[name] = value
    return found


FUNCTIONS = exported_functions()
START_RUN_KEYWORDS = sorted({*RunOptions.__annotations__, "experiment", "config", "settings"})


def misspelt(name: str, position: int, kind: str) -> str:
    """``name`` with one slip at ``position``: a letter doubled, dropped or swapped."""
    i = position % len(name)
    if kind == "double":
        return name[: i + 1] + name[i:]
    if kind == "drop" and len(name) > 3:
        return name[:i] + name[i + 1 :]
    return name + "z"


def stored_runs(home: Path) -> list[dict[str, Any]]:
    if not home.exists():
        return []
    with LocalStore(home) as store:
        return store.search_runs(RunQuery(limit=None))


def test_every_public_call_with_keywords_is_covered() -> None:
    assert {"start_run", "runs", "best", "leaderboard", "samples", "diff"} <= set(FUNCTIONS)
    assert "StepOptions" in warehouse.__all__


@given(
    name=st.sampled_from(sorted(FUNCTIONS)),
    pick=st.integers(0, 50),
    position=st.integers(0, 50),
    kind=st.sampled_from(["double", "drop", "append"]),
)
def test_a_misspelt_keyword_is_refused_naming_the_closest_one(
    home: Path, name: str, pick: int, position: int, kind: str
) -> None:
    func = FUNCTIONS[name]
    valid = START_RUN_KEYWORDS if name == "start_run" else keywords_of(func)
    meant = valid[pick % len(valid)]
    typo = misspelt(meant, position, kind)
    if typo in valid:
        return
    with pytest.raises(TypeError) as caught:
        func(**{typo: None})
    message = str(caught.value)
    assert f"unexpected keyword argument {typo!r}" in message
    assert "did you mean '" in message
    closest = message.split("did you mean '", 1)[1].split("'", 1)[0]
    assert closest in valid
    assert closest == meant or typo not in (meant + "z", meant[:1] + meant)
    assert stored_runs(home) == []  # refused before doing anything


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        pytest.param("tagz", "tags", id="tagz"),
        pytest.param("total_step", "total_steps", id="total_step"),
        pytest.param("peak_flop", "peak_flops", id="peak_flop"),
        pytest.param("primary", "primary_metric", id="primary"),
    ],
)
def test_start_run_refuses_a_misspelt_keyword_and_records_nothing(
    home: Path, typo: str, meant: str
) -> None:
    with pytest.raises(TypeError, match=f"did you mean '{meant}'"):
        warehouse.start_run(experiment="e", **{typo: 1})
    recorder = warehouse.Recorder(Settings())
    with pytest.raises(TypeError, match=f"did you mean '{meant}'"):
        recorder.start_run("e", None, **{typo: 1})
    assert stored_runs(home) == []
    assert warehouse.current_run() is None


def test_notes_is_refused_too(home: Path) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'notes'"):
        warehouse.start_run(experiment="e", notes="a first try")
    assert stored_runs(home) == []


def test_a_misspelt_setting_is_refused_naming_the_setting() -> None:
    with pytest.raises(TypeError, match="did you mean 'es_url'"):
        Settings(es_urll="http://localhost:9200")


def test_a_misspelt_keyword_of_an_open_runs_method_is_refused(home: Path) -> None:
    with warehouse.start_run(experiment="e") as run:
        with pytest.raises(TypeError, match="did you mean 'metric_columns'"):
            run.log_samples("val", [{"sample_id": 1, "correct": 1}], metric_column={"a": "b"})
        with pytest.raises(TypeError, match="did you mean 'content_type'"):
            run.log_output("val", 1, b"x", contenttype="text/plain")
        run.log_step(0, loss=1.0, anything_goes=2.0)  # metrics are open keywords
    assert stored_runs(home)[0]["status"] == "completed"


def test_the_readme_step_keywords_give_progress_tokens_per_second_and_mfu(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WAREHOUSE_CONSOLE", "1")
    with warehouse.start_run(
        experiment="llm",
        total_steps=40,
        tokens_per_step=4096,
        flops_per_token=6e9,
        peak_flops=1e15,
    ) as run:
        for step in range(40):
            run.log_step(step, loss=1.0 / (step + 1))
    options = run.step_options
    assert (options.total_steps, options.tokens_per_step) == (40, 4096)
    assert (options.flops_per_token, options.peak_flops) == (6e9, 1e15)
    err = capsys.readouterr().err
    assert re.search(r"^step \d+/40 \(\d+%\) .*\| ETA ", err, re.M), err  # progress, ETA
    with LocalStore(home) as store:
        stored = store.steps(StepRange(run_id=run.run_id))
        docs = [d["metrics"] for d in stored if not is_tick(d)]
    assert len(docs) == 40
    timed = [d for d in docs if "tokens_per_s" in d]
    assert len(timed) == 39, "tokens/s from the second step on (the first has no duration)"
    for metrics in timed:
        assert metrics["mfu"] == pytest.approx(metrics["tokens_per_s"] * 6e9 / 1e15)


def test_step_keywords_override_the_fields_of_step_options(home: Path) -> None:
    base = warehouse.StepOptions(total_steps=10, system_per_step=True)
    with warehouse.start_run(experiment="e", steps=base, total_steps=99) as run:
        pass
    assert run.step_options.total_steps == 99
    assert run.step_options.system_per_step is True
