"""Size limits of a recorded config and run: how deep, how large one value, how large in all.

A config value (a string, a list of scalars) over :data:`MAX_VALUE_BYTES` as JSON, and the
largest values of a config over :data:`MAX_CONFIG_BYTES`, are cut to a note saying what was
there (:func:`cap_config`, :func:`cap_overrides`); nesting deeper than :data:`MAX_DEPTH` is
cut by :mod:`warehouse.capture.config`.

:func:`fit_run` holds a whole run document to the record's limits just before it is written,
whatever logged it (issue 25, items 6 and 7), and never raises: a lone surrogate character
anywhere becomes U+FFFD, a name (a key at any depth) over :data:`MAX_NAME_CHARS` is cut, a
text over :data:`MAX_VALUE_BYTES` is cut to a note, params past :data:`MAX_PARAMS` and
metrics past :data:`MAX_METRICS` are dropped, and a document still over
:data:`MAX_DOCUMENT_BYTES` loses its largest sections. What was changed is listed in the
document's ``recording_notes``, so no reader is left to guess.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Any

log = logging.getLogger(__name__)

MAX_DEPTH = 200
"""Containers nested deeper than this are recorded as ``"<too deep>"``."""

MAX_VALUE_BYTES = 64 * 1024
"""A config value (a string, a list of scalars) longer than this as JSON is cut to a note."""

MAX_CONFIG_BYTES = 1024 * 1024
"""The recorded config never takes more than this as JSON: the largest values are cut first."""

CUT_PREVIEW = 200
"""Characters of a cut value kept in its note."""

MAX_NAME_CHARS = 256
"""A name (a metric, a param, a config key, a split) longer than this is cut, keeping its
start and a digest of the whole (so two long names stay two)."""

MAX_PARAMS = 10_000
"""Params (the config's scalar leaves) kept on a run; the config itself keeps the rest."""

MAX_METRICS = 10_000
"""Metric names kept on a run, over all its splits."""

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
"""A run document never takes more than this as JSON: its largest sections go first."""

NOTES = "recording_notes"
"""The run document's list of what :func:`fit_run` changed."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_SAID: set[tuple[str, tuple[str, ...]]] = set()  # the warnings given, once each
_CUTTABLE = ("config", "params", "hydra", "environment", "metrics_ci", "overrides")


def cap_config(
    config: dict[str, Any],
    *,
    per_value: int = MAX_VALUE_BYTES,
    total: int = MAX_CONFIG_BYTES,
) -> tuple[dict[str, Any], list[str]]:
    """``config`` with no value above ``per_value`` bytes and no more than ``total`` in all,
    and the dotted keys of what was cut (with their sizes).

    A value is a string or a list of scalars (one param). A cut value becomes a note string
    saying what it was (``[cut by warehouse: 52,428,800 bytes ...; it began: '...']``) and
    one warning names the keys. Over ``total``, the largest values go first; a config of
    countless small values loses its largest top-level entries, whole."""
    cut: list[str] = []
    leaves: list[tuple[int, Any, Any, str]] = []  # size, container, key, dotted path

    def walk(node: Any, path: tuple[str, ...], depth: int) -> tuple[Any, int]:
        if isinstance(node, str) or (
            isinstance(node, list) and node and all(is_scalar(i) for i in node)
        ):
            size = _json_size(node)
            if size > per_value:
                cut.append(f"{dotted(path)} ({size:,} bytes)")
                note = _cut_note(node, size, f"{per_value:,}-byte limit per value")
                return note, _json_size(note)
            return node, size
        if isinstance(node, dict) and depth <= MAX_DEPTH:
            out: dict[str, Any] = {}
            size = 2
            for key, value in node.items():
                out[key], child = walk(value, (*path, str(key)), depth + 1)
                size += child + _json_size(str(key)) + 2
                if _is_leaf(out[key]):
                    leaves.append((child, out, key, dotted((*path, str(key)))))
            return out, size
        if isinstance(node, list) and depth <= MAX_DEPTH:
            items: list[Any] = []
            size = 2
            for index, value in enumerate(node):
                item, child = walk(value, (*path, str(index)), depth + 1)
                items.append(item)
                size += child + 1
                if _is_leaf(item):
                    leaves.append((child, items, index, dotted((*path, str(index)))))
            return items, size
        return node, _json_size(node)

    capped, size = walk(config, (), 0)
    if size > total:
        for leaf_size, container, key, leaf_path in sorted(leaves, key=lambda x: -x[0]):
            if size <= total or leaf_size < 256:
                break
            note = _cut_note(container[key], leaf_size, f"{total:,}-byte limit for the config")
            container[key] = note
            size -= leaf_size - _json_size(note)
            cut.append(f"{leaf_path} ({leaf_size:,} bytes)")
        for key in sorted(capped, key=lambda k: -_json_size(capped[k])):
            if size <= total:
                break
            entry = _json_size(capped[key])
            note = _cut_note(None, entry, f"{total:,}-byte limit for the config")
            capped[key] = note
            size -= entry - _json_size(note)
            cut.append(f"{key} ({entry:,} bytes)")
    if cut:
        log.warning(
            "config values too large to record were cut (a note in the record says what was "
            "there): %s",
            ", ".join(cut[:20]) + (f" (and {len(cut) - 20} more)" if len(cut) > 20 else ""),
        )
    return capped, cut


def cap_overrides(overrides: list[str], per_value: int = MAX_VALUE_BYTES) -> list[str]:
    """Overrides with any one longer than ``per_value`` bytes cut to a note."""
    out = []
    for item in overrides:
        size = _json_size(item)
        if size > per_value:
            key = item.partition("=")[0]
            log.warning("override %s is %s bytes; recorded cut", key[:200], f"{size:,}")
            item = f"{key}={_cut_note(item, size, f'{per_value:,}-byte limit per value')}"
        out.append(item)
    return out


def fit_run(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a run document) held to the record's limits (see the module docstring), with
    what was changed added to its ``recording_notes``; ``doc`` itself is not modified."""
    notes: list[str] = []
    fitted: dict[str, Any] = _fit_node(doc, (), notes)
    params = fitted.get("params")
    if isinstance(params, dict) and len(params) > MAX_PARAMS:
        kept = sorted(params)[:MAX_PARAMS]
        fitted["params"] = {key: params[key] for key in kept}
        notes.append(
            f"params: {len(params) - MAX_PARAMS:,} of {len(params):,} not kept as params (over "
            f"the {MAX_PARAMS:,}-param limit; the first {MAX_PARAMS:,} by name are)"
        )
    _cap_metrics(fitted, notes)
    size = len(json.dumps(fitted, ensure_ascii=False, default=str).encode("utf-8", "replace"))
    if size > MAX_DOCUMENT_BYTES:
        for name in sorted(_CUTTABLE, key=lambda n: -_json_size(fitted.get(n))):
            if size <= MAX_DOCUMENT_BYTES or not fitted.get(name):
                continue
            part = _json_size(fitted[name])
            fitted[name] = [] if isinstance(fitted[name], list) else {}
            size -= part
            notes.append(
                f"{name}: {part:,} bytes cut (the run document was over the "
                f"{MAX_DOCUMENT_BYTES:,}-byte limit)"
            )
    if notes:
        earlier = [n for n in fitted.get(NOTES) or [] if isinstance(n, str)]
        fitted[NOTES] = earlier + [n for n in notes if n not in earlier]
        said = (str(fitted.get("run_id")), tuple(notes))
        if said in _SAID:
            return fitted  # each save of a run would say it again (heartbeats)
        _SAID.add(said)
        log.warning(
            "run %s was recorded with changes (listed under %s): %s",
            fitted.get("run_id"),
            NOTES,
            "; ".join(notes[:5]) + (f" (and {len(notes) - 5} more)" if len(notes) > 5 else ""),
        )
    return fitted


def clean_text(text: str) -> str:
    """``text`` with its lone surrogate characters (not storable as UTF-8) as U+FFFD; a
    surrogate pair becomes the character it encodes."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def cut_name(name: str) -> str:
    """``name`` if short enough, else its start, ``…`` and a digest of the whole."""
    if len(name) <= MAX_NAME_CHARS:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{name[: MAX_NAME_CHARS - 13]}…{digest}"


def _fit_node(node: Any, path: tuple[str, ...], notes: list[str]) -> Any:
    if isinstance(node, str):
        return _fit_text(node, path, notes)
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            name = _fit_key(str(key), path, notes)
            out[name] = _fit_node(value, (*path, name), notes)
        return out
    if isinstance(node, list):
        return [_fit_node(item, path, notes) for item in node]
    return node


def _fit_key(key: str, path: tuple[str, ...], notes: list[str]) -> str:
    clean = clean_text(key)
    if clean != key:
        notes.append(
            f"{dotted((*path, clean))}: a name held characters UTF-8 cannot store, "
            "replaced with U+FFFD"
        )
    name = cut_name(clean)
    if name != clean:
        notes.append(
            f"{dotted((*path, name))}: a name of {len(clean):,} characters cut to "
            f"{MAX_NAME_CHARS} (over the name limit)"
        )
    return name


def _fit_text(text: str, path: tuple[str, ...], notes: list[str]) -> str:
    clean = clean_text(text)
    if clean != text:
        notes.append(f"{dotted(path)}: characters UTF-8 cannot store replaced with U+FFFD")
    if path and path[0] in (NOTES, "error"):  # the error has its own caps (run.py)
        return clean
    size = _json_size(clean)
    if size > MAX_VALUE_BYTES:
        notes.append(f"{dotted(path)}: a text of {size:,} bytes cut to a note")
        return _cut_note(clean, size, f"{MAX_VALUE_BYTES:,}-byte limit per value")
    return clean


def _cap_metrics(doc: dict[str, Any], notes: list[str]) -> None:
    metrics = doc.get("metrics")
    if not isinstance(metrics, dict):
        return
    names = [
        (split, name)
        for split, values in sorted(metrics.items())
        if isinstance(values, dict)
        for name in sorted(values)
    ]
    if len(names) <= MAX_METRICS:
        return
    dropped = names[MAX_METRICS:]
    for split, name in dropped:
        metrics[split].pop(name, None)
        ci = doc.get("metrics_ci", {}).get(split)
        if isinstance(ci, dict):
            ci.pop(name, None)
    notes.append(
        f"metrics: {len(dropped):,} of {len(names):,} not kept (over the {MAX_METRICS:,}-metric "
        "limit; the first by split and name are)"
    )


def _is_leaf(node: Any) -> bool:
    return isinstance(node, str) or (
        isinstance(node, list) and bool(node) and all(is_scalar(i) for i in node)
    )


def _json_size(node: Any) -> int:
    """The bytes ``node`` takes as JSON (exact for strings, close for the rest)."""
    if isinstance(node, str):
        return (
            len(node.encode("utf-8", errors="replace")) + 2 if not node.isascii() else len(node) + 2
        )
    if isinstance(node, bool) or node is None:
        return 5
    if isinstance(node, int | float):
        return len(repr(node))
    if isinstance(node, dict):
        return 2 + sum(_json_size(str(k)) + 2 + _json_size(v) for k, v in node.items())
    if isinstance(node, list):
        return 2 + sum(_json_size(i) + 1 for i in node)
    return len(str(node)) + 2


def _cut_note(value: Any, size: int, limit: str) -> str:
    kind = "text" if isinstance(value, str) else "a list" if isinstance(value, list) else "entry"
    began = ""
    if isinstance(value, str):
        began = f"; it began: {value[:CUT_PREVIEW]!r}"
    elif isinstance(value, list):
        began = f"; it began: {json.dumps(value[:10], ensure_ascii=False)[:CUT_PREVIEW]}"
    return f"[cut by warehouse: {kind} of {size:,} bytes, over the {limit}{began}]"


def is_scalar(value: Any) -> bool:
    """Whether ``value`` is a JSON scalar: ``None``, a string or a number."""
    return value is None or isinstance(value, str | int | float)


def dotted(path: tuple[str, ...]) -> str:
    """A key path as it is named in warnings: ``model.opt.lr``, ``<root>`` for the top."""
    return ".".join(path) or "<root>"


__all__ = [
    "CUT_PREVIEW",
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "MAX_METRICS",
    "MAX_NAME_CHARS",
    "MAX_PARAMS",
    "MAX_VALUE_BYTES",
    "NOTES",
    "cap_config",
    "cap_overrides",
    "clean_text",
    "cut_name",
    "dotted",
    "fit_run",
    "is_scalar",
]
