"""Bad input never crashes training, and oversized records are cut with a note (issue 25,
items 6 and 7).

Before: a lone surrogate character in a config value, an experiment name or a tag raised
UnicodeEncodeError out of ``start_run`` (nothing recorded); in a sample it marked the run
``failed`` with a raw codec error. A 10 MB metric name and 100,000 config keys were accepted
whole. The rule, tested on generated text: whatever the text, the run is recorded, every
stored document is valid UTF-8 JSON, and what was changed is listed in ``recording_notes``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import warehouse
from warehouse.capture.limits import (
    MAX_DOCUMENT_BYTES,
    MAX_NAME_CHARS,
    MAX_PARAMS,
    NOTES,
    clean_text,
    fit_run,
)
from warehouse.errors import InvalidRecord
from warehouse.objects.base import object_key
from warehouse.recording.recorder import normalise_experiment
from warehouse.settings import load

# any code point, lone surrogates (category Cs, which Hypothesis leaves out by default) often
CHARACTER = st.one_of(st.characters(), st.characters(categories=["Cs"]))
TEXT = st.lists(CHARACTER, min_size=1, max_size=12).map("".join)  # st.text drops the Cs


def stored(home: Path, run_id: str) -> dict[str, Any]:
    raw = (home / "runs" / f"{run_id}.json").read_bytes()
    return dict(json.loads(raw.decode("utf-8")))  # strict UTF-8: no surrogate got through


def _settings(home: Path) -> Any:
    return load(cli={"home": str(home), "system_interval_s": 0, "console": False})


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=TEXT, key=TEXT, name=TEXT, tag=TEXT, sample=TEXT)
def test_any_text_anywhere_records_the_run_with_notes_of_what_changed(
    tmp_path_factory: pytest.TempPathFactory,
    value: str,
    key: str,
    name: str,
    tag: str,
    sample: str,
) -> None:
    home = tmp_path_factory.mktemp("bad-input")
    experiment = name
    try:
        object_key(normalise_experiment(clean_text(name)), "run", "git", "git.diff")
    except InvalidRecord:
        experiment = "x"  # a name refused on purpose (it names folders), not by accident
    with warehouse.start_run(
        experiment, {"cfg": {key: value}}, tags=[tag], settings=_settings(home)
    ) as run:
        run.log_metrics("val", {"acc": 0.5})
        run.log_samples("val", [{"sample_id": "1", "label": sample}, {"sample_id": "2"}])
    doc = stored(home, run.run_id)
    assert doc["status"] == "completed"
    notes = " ".join(doc.get(NOTES, []))
    for text, where in ((value, "config"), (key, "config"), (tag, "tags"), (sample, "samples")):
        if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            assert where in notes, (where, notes)
    if any(0xD800 <= ord(c) <= 0xDFFF for c in experiment):
        assert "experiment" in notes


def test_a_surrogate_in_a_config_value_is_recorded_as_the_replacement_character(
    tmp_path: Path,
) -> None:
    with warehouse.start_run(
        "e", {"name": "a\ud800b"}, tags=["t\udcff"], settings=_settings(tmp_path)
    ) as run:
        run.log_metrics("val", {"acc": 0.5})
    doc = stored(tmp_path, run.run_id)
    assert doc["config"]["name"] == "a\ufffdb"
    assert doc["tags"] == ["t\ufffd"]
    assert any(n.startswith("config.name:") for n in doc[NOTES])


def test_a_surrogate_in_a_sample_leaves_the_run_completed_with_a_note(tmp_path: Path) -> None:
    with warehouse.start_run("e", settings=_settings(tmp_path)) as run:
        count = run.log_samples("val", [{"sample_id": "1", "label": "x\ud800"}])
    assert count == 1
    doc = stored(tmp_path, run.run_id)
    assert doc["status"] == "completed"  # was failed, with the codec error
    assert "samples val: characters UTF-8 cannot store replaced with U+FFFD in label" in doc[NOTES]


def test_a_ten_megabyte_metric_name_is_cut_and_noted(tmp_path: Path) -> None:
    huge = "m" * 10_000_000
    with warehouse.start_run("e", settings=_settings(tmp_path)) as run:
        run.log_metrics("val", {huge: 0.5, "acc": 0.9})
    doc = stored(tmp_path, run.run_id)
    names = list(doc["metrics"]["val"])
    assert max(len(n) for n in names) <= MAX_NAME_CHARS
    assert "acc" in names
    assert any("10,000,000 characters cut" in n for n in doc[NOTES])
    assert (tmp_path / "runs" / f"{run.run_id}.json").stat().st_size < 100_000


def test_a_config_of_countless_keys_keeps_the_params_limit_and_says_so(tmp_path: Path) -> None:
    config = {f"k{i:06d}": i for i in range(MAX_PARAMS + 5_000)}
    with warehouse.start_run("e", config, settings=_settings(tmp_path)) as run:
        pass
    doc = stored(tmp_path, run.run_id)
    assert len(doc["params"]) == MAX_PARAMS
    assert any(n.startswith("params: 5,000 of 15,000 not kept") for n in doc[NOTES])


def test_a_document_over_the_size_limit_loses_its_largest_sections_first() -> None:
    doc = {
        "run_id": "r",
        "experiment": "e",
        "environment": {f"pkg{i}": "v" * 1000 for i in range(MAX_DOCUMENT_BYTES // 900)},
        "metrics": {"val": {"acc": 0.5}},
    }
    fitted = fit_run(doc)
    assert len(json.dumps(fitted).encode()) <= MAX_DOCUMENT_BYTES
    assert fitted["environment"] == {}
    assert fitted["metrics"] == {"val": {"acc": 0.5}}  # the smaller sections stay
    assert any(n.startswith("environment: ") for n in fitted[NOTES])
    assert fit_run(fitted) == fitted  # fitting a fitted document changes nothing
