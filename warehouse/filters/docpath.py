"""Dotted paths into documents: ``metrics.val.acc``, ``params.model.C``, ``git.commit``.

A run document nests by its first dots (``metrics`` → ``val`` → ``acc``) but keys may hold dots
themselves (``params`` keys are dotted config paths: ``params["model.C"]``), so a path is
resolved by trying each split point. These are the only functions that walk paths.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any


def get_path(doc: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``path`` of ``doc`` (None when absent); keys may hold dots."""
    found = _pick(doc, path)
    return None if found is None else found[1]


def _pick(doc: Mapping[str, Any], path: str) -> tuple[list[str], Any] | None:
    """``(keys, value)`` of the first way ``path`` resolves in ``doc``."""
    if path in doc:
        return [path], doc[path]
    for i, char in enumerate(path):
        if char == "." and isinstance(doc.get(path[:i]), Mapping):
            hit = _pick(doc[path[:i]], path[i + 1 :])
            if hit is not None:
                return [path[:i], *hit[0]], hit[1]
    return None


def project(doc: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """Only the given dotted paths of ``doc``, nested as in ``doc`` (absent ones left out)."""
    out: dict[str, Any] = {}
    for field in fields:
        hit = _pick(doc, field)
        if hit is None:
            continue
        keys, value = hit
        node = out
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return out


def flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one level of dotted keys; lists, scalars and empty mappings are
    leaves."""
    flat: dict[str, Any] = {}
    for key, inner in value.items():
        name = f"{prefix}{key}"
        if isinstance(inner, Mapping) and inner:
            flat.update(flatten(inner, f"{name}."))
        else:
            flat[name] = inner
    return flat


def strings(value: Any) -> Iterator[str]:
    """Every string anywhere in a document (mapping values and list items, depth first)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for inner in value.values():
            yield from strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from strings(inner)


__all__ = ["flatten", "get_path", "project", "strings"]
