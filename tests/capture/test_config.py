"""Config capture: resolution, JSON values, params flattening, redaction and Hydra job info."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import decimal
import enum
import hashlib
import json
import logging
import math
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pydantic
import pytest
from omegaconf import OmegaConf

from warehouse.capture.config import MAX_DEPTH, capture_config, flatten_params, hydra_info
from warehouse.errors import InvalidRecord
from warehouse.settings import DEFAULT_REDACT_PATTERNS as PATTERNS

SECRET = "s3cr3t-planted-value"


def dumps(value: Any) -> str:
    """JSON as a store writes it: NaN is not allowed."""
    return json.dumps(value, allow_nan=False)


# --- resolution -------------------------------------------------------------------------------


def test_interpolations_are_resolved(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPTURE_TEST_DATA", "/data/x")
    cfg = OmegaConf.create(
        {
            "lr": 0.1,
            "model": {"lr": "${lr}", "name": "net_${lr}"},
            "data": "${oc.env:CAPTURE_TEST_DATA}",
            "layers": [8, "${lr}"],
            "copy": "${model}",
        }
    )
    captured = capture_config(cfg, PATTERNS)
    assert captured.config == {
        "lr": 0.1,
        "model": {"lr": 0.1, "name": "net_0.1"},
        "data": "/data/x",
        "layers": [8, 0.1],
        "copy": {"lr": 0.1, "name": "net_0.1"},
    }
    assert captured.unresolved == []


def test_an_unresolvable_interpolation_keeps_its_text_and_warns_naming_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = OmegaConf.create(
        {"a": 1, "b": "${oops.key}", "c": {"d": "${a}", "e": "x_${nope}"}, "f": ["${a}", "${bad}"]}
    )
    with caplog.at_level(logging.WARNING, logger="warehouse.capture.config"):
        captured = capture_config(cfg, PATTERNS)
    assert captured.config == {
        "a": 1,
        "b": "${oops.key}",
        "c": {"d": 1, "e": "x_${nope}"},
        "f": [1, "${bad}"],
    }
    assert captured.unresolved == ["b", "c.e", "f.1"]
    assert captured.params["b"] == "${oops.key}"
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    for key in ("b", "c.e", "f.1"):
        assert key in record.getMessage()


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("${unknown_resolver:1}", id="unknown-resolver"),
        pytest.param("${oc.env:CAPTURE_TEST_SURELY_UNSET}", id="unset-env"),
        pytest.param("${missing_value}", id="interpolation-to-missing"),
    ],
)
def test_failing_resolvers_keep_the_text_as_written(value: str) -> None:
    cfg = OmegaConf.create({"missing_value": "???", "x": value, "ok": 2})
    captured = capture_config(cfg, PATTERNS)
    assert captured.config["x"] == value
    assert captured.config["ok"] == 2
    assert "x" in captured.unresolved


def test_a_missing_value_is_recorded_as_question_marks_and_listed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = OmegaConf.create({"model": {"C": "???", "kernel": "rbf"}, "lr": 0.1})
    with caplog.at_level(logging.WARNING):
        captured = capture_config(cfg, PATTERNS)
    assert captured.config == {"model": {"C": "???", "kernel": "rbf"}, "lr": 0.1}
    assert captured.unresolved == ["model.C"]
    assert "model.C" in caplog.text


class Color(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Schema:
    color: Color = Color.RED
    root: Path = Path("/data")
    lr: float = 0.1
    lr2: float = "${lr}"  # type: ignore[assignment]


def test_a_structured_config_with_enums_and_paths_resolves() -> None:
    captured = capture_config(OmegaConf.structured(Schema), PATTERNS)
    assert captured.config == {"color": "RED", "root": "/data", "lr": 0.1, "lr2": 0.1}


# --- inputs and values -----------------------------------------------------------------------


def test_plain_mappings_dataclasses_pydantic_models_and_namespaces_are_accepted() -> None:
    @dataclasses.dataclass
    class Opt:
        lr: float = 0.1
        betas: tuple[float, float] = (0.9, 0.99)

    class Model(pydantic.BaseModel):
        depth: int = 3
        opt: dict[str, float] = {"wd": 0.01}

    expected_opt = {"lr": 0.1, "betas": [0.9, 0.99]}
    assert capture_config({"opt": Opt()}, PATTERNS).config == {"opt": expected_opt}
    assert capture_config(Opt(), PATTERNS).config == expected_opt
    assert capture_config(Model(), PATTERNS).config == {"depth": 3, "opt": {"wd": 0.01}}
    namespace = argparse.Namespace(lr=0.1, epochs=3)
    assert capture_config(namespace, PATTERNS).config == {"lr": 0.1, "epochs": 3}


def test_no_config_records_an_empty_one() -> None:
    captured = capture_config(None, PATTERNS)
    assert (captured.config, captured.params, captured.unresolved) == ({}, {}, [])


def test_a_list_at_the_top_level_is_recorded_under_value() -> None:
    captured = capture_config(OmegaConf.create([1, {"a": 2}, "${nope}"]), PATTERNS)
    assert captured.config == {"value": [1, {"a": 2}, "${nope}"]}
    assert captured.params == {"value.0": 1, "value.1.a": 2, "value.2": "${nope}"}
    assert captured.unresolved == ["value.2"]


@pytest.mark.parametrize("cfg", [pytest.param("lr=0.1", id="str"), pytest.param(3, id="int")])
def test_a_scalar_config_is_refused_with_a_clear_error(cfg: Any) -> None:
    with pytest.raises(InvalidRecord, match="config must be a mapping"):
        capture_config(cfg, PATTERNS)


def test_values_json_cannot_hold_become_json() -> None:
    class Mode(enum.Enum):
        FAST = "fast-mode"

    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    config = {
        "path": Path("/data/set"),
        "mode": Mode.FAST,
        "when": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        "day": dt.date(2024, 1, 2),
        "timeout": dt.timedelta(minutes=2),
        "np_float": np.float32(0.5),
        "np_int": np.int64(7),
        "np_bool": np.bool_(True),
        "array": np.arange(3),
        "tags": {"b", "a"},
        "raw": b"bytes\xff",
        "huge": 2**70,
        "dec": decimal.Decimal("1.5"),
        "id": ident,
        "obj": object,
        Mode.FAST: "enum key",
        3: "int key",
    }
    captured = capture_config(config, PATTERNS)
    assert captured.config == {
        "path": "/data/set",
        "mode": "FAST",
        "when": "2024-01-02T03:04:05+00:00",
        "day": "2024-01-02",
        "timeout": 120.0,
        "np_float": 0.5,
        "np_int": 7,
        "np_bool": True,
        "array": [0, 1, 2],
        "tags": ["a", "b"],
        "raw": "bytes\ufffd",
        "huge": str(2**70),
        "dec": 1.5,
        "id": str(ident),
        "obj": str(object),
        "FAST": "enum key",
        "3": "int key",
    }
    assert type(captured.config["np_int"]) is int
    assert type(captured.params["np_float"]) is float
    dumps(captured.config)
    dumps(captured.params)


def test_non_finite_floats_are_strings_in_config_and_null_in_params() -> None:
    cfg = OmegaConf.create({"a": float("nan"), "b": float("inf"), "c": [float("-inf"), 1.0]})
    captured = capture_config(cfg, PATTERNS)
    assert captured.config == {"a": "nan", "b": "inf", "c": ["-inf", 1.0]}
    assert captured.params == {"a": None, "b": None, "c": "[null, 1.0]"}
    dumps(captured.config)
    dumps(captured.params)


def test_a_reference_cycle_in_a_plain_config_does_not_recurse_forever() -> None:
    config: dict[str, Any] = {"a": 1}
    config["self"] = config
    assert capture_config(config, PATTERNS).config == {"a": 1, "self": "<cycle>"}


# --- params ----------------------------------------------------------------------------------


def test_params_are_the_scalar_leaves_under_dotted_keys() -> None:
    config = {
        "model": {"C": 1.0, "kernel": "rbf", "opt": {"name": "sgd", "nesterov": True}},
        "sizes": [64, 128],
        "names": ["a", "é"],
        "layers": [{"units": 32}, {"units": 16, "act": None}],
        "grid": [[1, 2], [3]],
        "empty_map": {},
        "empty_list": [],
        "seed": None,
    }
    assert flatten_params(config) == {
        "model.C": 1.0,
        "model.kernel": "rbf",
        "model.opt.name": "sgd",
        "model.opt.nesterov": True,
        "sizes": "[64, 128]",
        "names": '["a", "é"]',
        "layers.0.units": 32,
        "layers.1.units": 16,
        "layers.1.act": None,
        "grid.0": "[1, 2]",
        "grid.1": "[3]",
        "empty_list": "[]",
        "seed": None,
    }


def test_a_dot_inside_a_key_becomes_an_underscore_so_paths_stay_unambiguous() -> None:
    assert flatten_params({"db.host": "h", "db": {"port": 1}, "": 0}) == {
        "db_host": "h",
        "db.port": 1,
        "_": 0,
    }


def test_keys_that_still_collide_keep_the_first_and_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        params = flatten_params({"a.b": 1, "a_b": 2})
    assert params == {"a_b": 1}
    assert "a_b" in caplog.text


def test_a_config_with_10000_keys_keeps_every_key() -> None:
    config = {f"group{g}": {f"key{k}": k * 0.5 for k in range(100)} for g in range(100)}
    params = flatten_params(config)
    assert len(params) == 10_000
    assert params["group99.key99"] == 49.5
    captured = capture_config(config, PATTERNS)
    assert len(captured.params) == 10_000
    assert captured.config == config


def test_a_10000_key_omegaconf_config_with_one_broken_value_records_the_rest() -> None:
    cfg = OmegaConf.create({f"g{g}": {f"k{k}": k for k in range(100)} for g in range(100)})
    cfg.g42.k7 = "${does.not.exist}"
    captured = capture_config(cfg, PATTERNS)
    assert len(captured.params) == 10_000
    assert captured.unresolved == ["g42.k7"]
    assert captured.params["g42.k7"] == "${does.not.exist}"
    assert captured.params["g99.k99"] == 99


@pytest.mark.parametrize(
    ("depth", "omegaconf"),
    [pytest.param(150, False, id="dict-150"), pytest.param(50, True, id="omegaconf-50")],
)
def test_deep_nesting_is_recorded_to_the_leaf(depth: int, omegaconf: bool) -> None:
    config: dict[str, Any] = {"leaf": 1}
    for level in range(depth):
        config = {f"l{level}": config}
    captured = capture_config(OmegaConf.create(config) if omegaconf else config, PATTERNS)
    [(key, value)] = captured.params.items()
    assert key.count(".") == depth
    assert value == 1
    dumps(captured.config)


def test_nesting_beyond_the_limit_is_cut_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    config: dict[str, Any] = {"leaf": 1}
    for level in range(MAX_DEPTH + 50):
        config = {f"l{level}": config}
    with caplog.at_level(logging.WARNING):
        captured = capture_config(config, PATTERNS)
    assert list(captured.params.values()) == ["<too deep>"]
    assert "deeper than" in caplog.text
    dumps(captured.config)


# --- secrets ---------------------------------------------------------------------------------


def test_planted_secrets_are_gone_from_config_and_params(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CAPTURE_TEST_TOKEN", SECRET)
    cfg = OmegaConf.create(
        {
            "db": {"PASSWORD": SECRET, "url": f"postgres://admin:{SECRET}@db/x"},
            "API_KEY": SECRET,
            "a": {"b": {"c": {"d": {"aws_secret_access_key": SECRET}}}},
            "clients": [{"name": "x", "Auth_Token": SECRET}],
            "hub": {"hf_token": "${oc.env:CAPTURE_TEST_TOKEN}"},
            "dsn": "password=${db.PASSWORD}",
            "remote": f"https://{SECRET}@github.com/org/repo.git",
            "fallback": {"password": "${oc.env:CAPTURE_TEST_SURELY_UNSET}"},
            "tokenizer": "bert-base-uncased",
        }
    )
    with caplog.at_level(logging.DEBUG):
        captured = capture_config(cfg, PATTERNS)
    assert SECRET not in dumps(captured.config)
    assert SECRET not in dumps(captured.params)
    assert SECRET not in caplog.text
    assert captured.params["db.PASSWORD"] == "***"
    assert captured.params["db.url"] == "postgres://***@db/x"
    assert captured.params["clients.0.Auth_Token"] == "***"
    assert captured.params["dsn"] == "password=***"
    assert captured.params["remote"] == "https://***@github.com/org/repo.git"
    assert captured.params["fallback.password"] == "***"
    assert captured.unresolved == ["fallback.password"]
    assert captured.params["tokenizer"] == "bert-base-uncased"


# --- Hydra -----------------------------------------------------------------------------------


def test_outside_a_hydra_job_there_is_no_hydra_info() -> None:
    assert hydra_info() == ([], {})


def test_a_composed_config_with_its_hydra_node_gives_overrides_and_job_info(
    tmp_path: Path,
) -> None:
    from hydra import compose, initialize_config_dir

    (tmp_path / "config.yaml").write_text("lr: 0.1\ndb:\n  password: x\n  host: h\n")
    with initialize_config_dir(str(tmp_path), version_base="1.3", job_name="composed"):
        cfg = compose(
            "config", overrides=["lr=0.3", f"db.password={SECRET}"], return_hydra_config=True
        )
    captured = capture_config(cfg, PATTERNS)
    assert captured.config == {"lr": 0.3, "db": {"password": "***", "host": "h"}}
    assert captured.overrides == ["lr=0.3", "db.password=***"]
    assert captured.hydra["job_name"] == "composed"
    assert captured.hydra["job_num"] is None
    assert captured.hydra["sweep_id"] is None
    assert SECRET not in dumps(captured.hydra)


APP = """
import json, sys
import hydra
from warehouse.capture.config import capture_config, hydra_info
from warehouse.settings import DEFAULT_REDACT_PATTERNS

@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg):
    overrides, meta = hydra_info()
    captured = capture_config(cfg, DEFAULT_REDACT_PATTERNS)
    line = {"overrides": overrides, "meta": meta, "config": captured.config}
    print("HYDRA_INFO " + json.dumps(line), flush=True)

main()
"""


def run_hydra_app(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    (tmp_path / "conf").mkdir(exist_ok=True)
    (tmp_path / "conf" / "config.yaml").write_text("lr: 0.1\ndb:\n  password: x\n")
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    proc = subprocess.run(
        [sys.executable, "app.py", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "HYDRA_FULL_ERROR": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout  # what the app printed (our captures) holds no secret
    return [
        json.loads(line.removeprefix("HYDRA_INFO "))
        for line in proc.stdout.splitlines()
        if line.startswith("HYDRA_INFO ")
    ]


def test_a_single_hydra_run_reports_its_job_and_redacted_overrides(tmp_path: Path) -> None:
    [info] = run_hydra_app(
        tmp_path,
        "lr=0.5",
        f"db.password={SECRET}",
        "hydra.run.dir=out/${hydra.job.override_dirname}",
        "hydra.job.name=single",
    )
    meta = info["meta"]
    assert info["overrides"] == [  # as typed: hydra.* overrides too, interpolations unresolved
        "lr=0.5",
        "db.password=***",
        "hydra.run.dir=out/${hydra.job.override_dirname}",
        "hydra.job.name=single",
    ]
    assert info["config"] == {"lr": 0.5, "db": {"password": "***"}}
    assert meta["mode"] == "RUN"
    assert meta["job_name"] == "single"
    assert meta["job_num"] is None
    assert meta["sweep_dir"] is None
    assert meta["sweep_id"] is None
    assert meta["original_cwd"] == str(tmp_path)
    assert meta["run_dir"] == str(tmp_path / "out" / "db.password=***,lr=0.5")


def test_every_job_of_a_multirun_shares_one_sweep_id(tmp_path: Path) -> None:
    infos = run_hydra_app(tmp_path, "-m", "lr=0.1,0.2,0.3", "hydra.sweep.dir=multi")
    assert len(infos) == 3
    sweep_dir = str(tmp_path / "multi")
    expected_id = hashlib.sha1(sweep_dir.encode(), usedforsecurity=False).hexdigest()[:12]
    assert [i["meta"]["job_num"] for i in infos] == [0, 1, 2]
    assert {i["meta"]["sweep_id"] for i in infos} == {expected_id}
    assert {i["meta"]["sweep_dir"] for i in infos} == {sweep_dir}
    assert {i["meta"]["mode"] for i in infos} == {"MULTIRUN"}
    assert [i["meta"]["run_dir"] for i in infos] == [f"{sweep_dir}/{n}" for n in range(3)]
    assert [i["overrides"] for i in infos] == [  # Hydra's own hydra.mode=MULTIRUN is no override
        [f"lr={lr}", "hydra.sweep.dir=multi"] for lr in ("0.1", "0.2", "0.3")
    ]


def test_non_finite_values_in_a_hydra_yaml_survive_as_strings() -> None:
    cfg = OmegaConf.create("clip: .inf\nfloor: -.inf\nmissing: .nan\n")
    captured = capture_config(cfg, PATTERNS)
    assert captured.config == {"clip": "inf", "floor": "-inf", "missing": "nan"}
    assert all(v is None for v in captured.params.values())
    assert math.isinf(cfg.clip)
