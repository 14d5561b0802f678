"""The Elasticsearch index templates of the warehouse, generated for one index prefix.

Everything `warehouse init` installs comes from :func:`templates`; the JSON files in
``index_templates/`` are the same bodies for the default prefix, written by
``warehouse export-templates`` (a test checks that they never drift from this module).

Names, for a prefix ``P`` (``WAREHOUSE_INDEX_PREFIX``, default ``warehouse``)::

    P-runs     alias -> P-runs-000001      one document per run      (_id = run_id)
    P-samples  alias -> P-samples-000001   one document per sample   (_id = run_id:split:sample_id)
    P-steps    data stream                 one document per step     (_id = run_id:seq)

Mapping choices, so that thousands of experiments with different configs share one index:

* ``config`` is kept whole in ``_source`` only (``enabled: false``): it is never mapped.
* ``params`` (the flat ``{"dotted.key": scalar}`` leaves of the config) is an object with
  ``subobjects: false``: a key is one field named by its dotted path, so ``model`` being a leaf
  in one run and ``model.depth`` in another never conflicts. Numbers map to ``double`` (ranges
  and sorts are numeric), strings and booleans to ``keyword``. A key whose type changes later
  (number, then ``"auto"``) does not reject the run: ``ignore_malformed`` keeps the value in
  ``_source`` and leaves it out of the index; a number sent to a ``keyword`` key is indexed as
  its text (ranges on it are then alphabetical).
* A run with more than :data:`MAX_TYPED_PARAMS` params (a huge config) sends the rest under
  ``params_extra`` (``flattened``: one mapped field however many keys, exact/prefix search).
  The store merges them back into ``params`` when it reads, so documents come back unchanged.
* ``metrics.<split>.<name>`` and numeric sample columns are ``double`` through dynamic
  templates (a first value ``1`` would otherwise make a ``long`` that truncates ``0.93``).
* Strings are ``keyword`` (``ignore_above`` 1024), never analysed ``text`` + ``.keyword``.
  ``date_detection`` is off, so a string that looks like a date never makes a ``date`` field.
* The field-count guard: ``index.mapping.total_fields.limit`` with
  ``ignore_dynamic_beyond_limit``: past the limit new fields are left unindexed (kept in
  ``_source``) instead of failing the document.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from warehouse.models import Decomposition

TEMPLATE_VERSION = 1
"""Bumped whenever a template body changes; `warehouse init` updates older installs."""

MAX_TYPED_PARAMS = 1000
"""Params typed per run; the rest of a huge config goes to the ``params_extra`` keyword field."""

PRIORITY = 500
"""Above Elastic's built-in templates (100-200), so ours win if a pattern ever overlaps."""

FIELD_LIMITS = {"runs": 5000, "samples": 2000, "steps": 2000}
KEYWORD = {"type": "keyword", "ignore_above": 1024}
Kind = Literal["runs", "samples", "steps"]
KINDS: tuple[Kind, ...] = ("runs", "samples", "steps")


@dataclass(frozen=True)
class Template:
    """One template to install: ``component`` or ``index``, its name and its body."""

    kind: Literal["component", "index"]
    name: str
    body: dict[str, Any]

    @property
    def file_name(self) -> str:
        """The name of its JSON file in ``index_templates/``."""
        return f"{self.name}.{self.kind}-template.json"


def index_names(prefix: str) -> dict[Kind, str]:
    """The name every reader and writer uses: the aliases and the data stream."""
    return {"runs": f"{prefix}-runs", "samples": f"{prefix}-samples", "steps": f"{prefix}-steps"}


def first_index(prefix: str, kind: Kind) -> str:
    """The concrete index behind the runs/samples alias (``warehouse-runs-000001``)."""
    return f"{prefix}-{kind}-000001"


def _settings(kind: Kind) -> dict[str, Any]:
    return {
        "index": {
            "number_of_shards": 1,
            "auto_expand_replicas": "0-1",  # 0 on a laptop's single node, 1 on a cluster
            "mapping": {
                "total_fields": {
                    "limit": FIELD_LIMITS[kind],
                    "ignore_dynamic_beyond_limit": True,
                }
            },
        }
    }


def _dyn(name: str, match_type: str | list[str], mapping: dict[str, Any], **where: str) -> Any:
    return {name: {**where, "match_mapping_type": match_type, "mapping": mapping}}


_DOUBLE = {"type": "double"}
_LENIENT_DOUBLE = {"type": "double", "ignore_malformed": True}
_NUMBERS = ["long", "double"]
_STRINGS_KEYWORD = _dyn("strings_as_keyword", "string", KEYWORD)


def _runs_mappings() -> dict[str, Any]:
    return {
        "date_detection": False,
        "dynamic_templates": [
            _dyn("metrics_as_double", _NUMBERS, _DOUBLE, path_match="metrics.*"),
            _dyn("params_numbers", _NUMBERS, _LENIENT_DOUBLE, path_match="params.*"),
            _dyn("params_booleans", "boolean", KEYWORD, path_match="params.*"),
            _dyn("params_strings", "string", KEYWORD, path_match="params.*"),
            _dyn("sample_counts_as_long", _NUMBERS, {"type": "long"}, path_match="sample_counts.*"),
            _dyn("metrics_ci_n", _NUMBERS, {"type": "long"}, path_match="metrics_ci.*.n"),
            _dyn("metrics_ci_bounds", _NUMBERS, _DOUBLE, path_match="metrics_ci.*"),
            _STRINGS_KEYWORD,
        ],
        "properties": {
            "run_id": {"type": "keyword"},
            "experiment": {"type": "keyword"},
            "config_hash_noseed": {"type": "keyword"},
            "project": {"type": "keyword"},
            "tags": {"type": "keyword"},
            "note": {"type": "text"},
            "user": {"type": "keyword"},
            "host": {"type": "keyword"},
            "status": {"type": "keyword"},
            "error": {
                "properties": {
                    "type": {"type": "keyword"},
                    "message": {"type": "text"},
                    "traceback": {"type": "text", "index": False},
                }
            },
            "started_at": {"type": "date"},
            "ended_at": {"type": "date"},
            "heartbeat_at": {"type": "date"},
            "updated_at": {"type": "date"},
            "lost_at": {"type": "date"},
            "duration_s": {"type": "double"},
            "git": {
                "properties": {
                    "commit": {"type": "keyword"},
                    "branch": {"type": "keyword"},
                    "dirty": {"type": "boolean"},
                    "remote": {"type": "keyword"},
                    "message": {"type": "text"},
                    "committed_at": {"type": "date"},
                    "diff_uri": {"type": "keyword"},
                }
            },
            "config": {"type": "object", "enabled": False},
            "overrides": KEYWORD,
            "hydra": {
                "type": "object",
                "dynamic": False,
                "properties": {
                    "job_name": {"type": "keyword"},
                    "job_num": {"type": "long"},
                    "sweep_dir": {"type": "keyword"},
                    "sweep_id": {"type": "keyword"},
                    "run_dir": {"type": "keyword"},
                },
            },
            "params": {"type": "object", "subobjects": False},
            "params_extra": {"type": "flattened", "ignore_above": 1024},
            "metrics": {"type": "object"},
            "invalid_metrics": {"type": "keyword"},
            "primary_metric": {
                "properties": {
                    "name": {"type": "keyword"},
                    "split": {"type": "keyword"},
                    "metric": {"type": "keyword"},
                    "direction": {"type": "keyword"},
                    "value": {"type": "double"},
                }
            },
            "decomposition": {
                "properties": {name: {"type": "double"} for name in Decomposition.model_fields}
            },
            "artifacts": {
                "properties": {
                    "name": KEYWORD,
                    "uri": KEYWORD,
                    "kind": {"type": "keyword"},
                    "size_bytes": {"type": "long"},
                    "sha256": {"type": "keyword"},
                    "content_type": {"type": "keyword"},
                }
            },
            "sample_counts": {"type": "object"},
            "environment": {
                "type": "object",
                "dynamic": False,
                "properties": {
                    "python": {"type": "keyword"},
                    "platform": {"type": "keyword"},
                    "packages": {"type": "flattened"},
                },
            },
            "schema_version": {"type": "integer"},
        },
    }


def _samples_mappings() -> dict[str, Any]:
    return {
        "date_detection": False,
        "dynamic_templates": [
            _dyn("sample_numbers", _NUMBERS, _LENIENT_DOUBLE),
            _dyn("sample_booleans", "boolean", {"type": "boolean"}),
            _STRINGS_KEYWORD,
        ],
        "properties": {
            "run_id": {"type": "keyword"},
            "experiment": {"type": "keyword"},
            "split": {"type": "keyword"},
            "sample_id": {"type": "keyword"},
            "output_uri": KEYWORD,
            "recorded_at": {"type": "date"},
            "warehouse_row": {"type": "long"},  # write order, for unsorted reads
        },
    }


_SYSTEM_FIELDS = {
    "cpu_pct": "double",
    "ram_used_bytes": "long",
    "ram_total_bytes": "long",
    "rss_bytes": "long",
    "disk_used_pct": "double",
    "gpu_util_pct": "double",
    "gpu_mem_used_bytes": "long",
    "gpu_mem_total_bytes": "long",
    "gpu_power_w": "double",
    "gpu_temperature_c": "double",
    "torch_allocated_bytes": "long",
    "torch_reserved_bytes": "long",
}
_GPU_FIELDS = {
    "index": "long",
    "name": "keyword",
    "util_pct": "double",
    "mem_used_bytes": "long",
    "mem_total_bytes": "long",
    "power_w": "double",
    "power_limit_w": "double",
    "temperature_c": "double",
    "sm_clock_mhz": "double",
    "throttle_reasons": "keyword",
}


def _steps_mappings() -> dict[str, Any]:
    return {
        "date_detection": False,
        "dynamic_templates": [
            _dyn("step_metrics_as_double", _NUMBERS, _LENIENT_DOUBLE, path_match="metrics.*"),
            _dyn("system_as_double", _NUMBERS, _LENIENT_DOUBLE, path_match="system.*"),
            _dyn("gpus_as_double", _NUMBERS, _LENIENT_DOUBLE, path_match="gpus.*"),
            _STRINGS_KEYWORD,
        ],
        "properties": {
            "@timestamp": {"type": "date"},
            "run_id": {"type": "keyword"},
            "experiment": {"type": "keyword"},
            "seq": {"type": "long"},
            "step": {"type": "long"},
            "epoch": {"type": "long"},
            "duration_s": {"type": "double"},
            "metrics": {"type": "object"},
            "flags": {
                "properties": {
                    "grad_norm_spike": {"type": "boolean"},
                    "loss_trend": {"type": "keyword"},
                }
            },
            "system": {"properties": {k: {"type": t} for k, t in _SYSTEM_FIELDS.items()}},
            "gpus": {"properties": {k: {"type": t} for k, t in _GPU_FIELDS.items()}},
        },
    }


_MAPPINGS = {"runs": _runs_mappings, "samples": _samples_mappings, "steps": _steps_mappings}


def mappings(kind: Kind) -> dict[str, Any]:
    """The mapping an index of ``kind`` gets (what Kibana checks its field names against)."""
    return _MAPPINGS[kind]()


def _meta(body: dict[str, Any]) -> dict[str, Any]:
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    return {"managed_by": "results-warehouse", "template_version": TEMPLATE_VERSION, "hash": digest}


def templates(prefix: str = "warehouse", *, steps_retention: str = "90d") -> list[Template]:
    """Every component and index template for ``prefix``, in installation order.

    Each body carries ``_meta.hash`` (a digest of the rest of the body), which `warehouse init`
    compares to decide between *kept* and *updated*.
    """
    out: list[Template] = []
    for kind in KINDS:
        body: dict[str, Any] = {
            "template": {"settings": _settings(kind), "mappings": mappings(kind)},
            "version": TEMPLATE_VERSION,
        }
        body["_meta"] = _meta(body)
        out.append(Template("component", f"{prefix}-{kind}-mappings", body))
    names = index_names(prefix)
    for kind in KINDS:
        pattern = names[kind] if kind == "steps" else f"{names[kind]}-*"
        index_body: dict[str, Any] = {
            "index_patterns": [pattern],
            "composed_of": [f"{prefix}-{kind}-mappings"],
            "priority": PRIORITY,
            "version": TEMPLATE_VERSION,
        }
        if kind == "steps":
            index_body["data_stream"] = {}
            index_body["template"] = {"lifecycle": {"data_retention": steps_retention}}
        index_body["_meta"] = {**_meta(index_body), "description": _DESCRIPTIONS[kind]}
        out.append(Template("index", names[kind], index_body))
    return out


_DESCRIPTIONS = {
    "runs": "results-warehouse: one document per training run (_id = run_id)",
    "samples": "results-warehouse: per-sample results (_id = run_id:split:sample_id)",
    "steps": "results-warehouse: per-step training and system metrics (data stream)",
}


def export(folder: Path, prefix: str = "warehouse", *, steps_retention: str = "90d") -> list[Path]:
    """Write every template as ``<name>.<kind>-template.json`` into ``folder``; return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for template in templates(prefix, steps_retention=steps_retention):
        path = folder / template.file_name
        path.write_text(json.dumps(template.body, indent=2, sort_keys=True) + "\n", "utf-8")
        written.append(path)
    return written


__all__ = [
    "KINDS",
    "MAX_TYPED_PARAMS",
    "TEMPLATE_VERSION",
    "Template",
    "export",
    "first_index",
    "index_names",
    "mappings",
    "templates",
]
