"""Size limits of a recorded config: how deep, how large one value, how large in all.

A config value (a string, a list of scalars) over :data:`MAX_VALUE_BYTES` as JSON, and the
largest values of a config over :data:`MAX_CONFIG_BYTES`, are cut to a note saying what was
there (:func:`cap_config`, :func:`cap_overrides`); nesting deeper than :data:`MAX_DEPTH` is
cut by :mod:`warehouse.capture.config`.
"""

from __future__ import annotations

import json
import logging
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
    "MAX_VALUE_BYTES",
    "cap_config",
    "cap_overrides",
    "dotted",
    "is_scalar",
]
