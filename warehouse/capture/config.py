"""Config capture: any config object → the recorded config, params, overrides and Hydra job.

:func:`capture_config` turns an OmegaConf ``DictConfig``/``ListConfig``, a mapping, a dataclass,
a pydantic model or an ``argparse.Namespace`` into plain JSON data, redacted
(:mod:`warehouse.capture.redact`), plus its flat ``params``. Decisions, in one place:

- **Interpolations** are resolved. One that cannot be (unknown key or resolver, a missing
  ``???`` value, an interpolation to one) keeps its text as written (``"${oops.key}"``,
  ``"???"``), its dotted key goes to ``unresolved``, and one warning names the keys; the rest of
  the config is resolved as usual.
- **Values** become JSON: ``Path``/``UUID`` → ``str``, ``Enum`` → its *name* (as OmegaConf and
  Hydra write it), ``datetime``/``date``/``time`` → ISO 8601, ``timedelta`` → seconds, numpy
  and torch scalars, ``Decimal`` and ``Fraction`` → Python numbers, arrays → lists, sets →
  sorted lists, ``bytes`` → UTF-8 text, integers beyond 64 bits → ``str``, anything else →
  ``str(value)``. A non-mapping top level
  (a ``ListConfig``, a list) is recorded under the key ``value``.
- **Non-finite floats** (JSON and Elasticsearch have no NaN): in ``config`` they are the strings
  ``"nan"``, ``"inf"`` and ``"-inf"``; in ``params`` they are ``None`` (``null``), so a numeric
  param never turns into a string that a ``double`` field would reject.
- **params** (:func:`flatten_params`): every scalar leaf under its dotted path
  (``model.C``). A list of scalars is one param holding its JSON text (``"[64, 128]"``); a list
  holding mappings or lists is indexed (``layers.0.units``). Empty mappings give no param, an
  empty list gives ``"[]"``. A dot inside a key becomes ``_`` (``{"db.host": 1}`` →
  ``db_host``), an empty key ``_``; should two keys still collide, the first wins and a warning
  names the key.
- Nesting deeper than 200 levels is cut (recorded as the string ``"<too deep>"``, with a
  warning); reference cycles in plain containers become ``"<cycle>"``. Values too large to
  record are cut to a note (:mod:`warehouse.capture.limits`).

:func:`hydra_info` (:mod:`warehouse.capture.hydra_job`) reads the running Hydra job
(overrides, job name/number, sweep and run directories, a ``sweep_id`` shared by all jobs of
one multirun). OmegaConf and Hydra are imported inside the functions, and only when the given
object or process already uses them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import logging
import math
import numbers
import uuid
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from warehouse.capture.hydra_job import hydra_info, hydra_meta, hydra_node, is_omegaconf
from warehouse.capture.limits import (
    MAX_DEPTH,
    cap_config,
    cap_overrides,
    dotted,
    is_scalar,
)
from warehouse.capture.redact import (
    RedactPolicy,
    as_policy,
    override_secrets,
    redact_config,
    redact_overrides,
)

log = logging.getLogger(__name__)

Scalar = str | int | float | bool | None

_ARRAY_MODULES = frozenset({"numpy", "torch", "jax", "jaxlib", "tensorflow", "cupy", "mlx"})
_INT64 = 2**63
_ROOT_KEY = "value"


@dataclasses.dataclass
class CapturedConfig:
    """A config ready to record: redacted JSON ``config``, flat ``params`` and what went wrong."""

    config: dict[str, Any]
    params: dict[str, Any]
    unresolved: list[str]
    overrides: list[str]
    hydra: dict[str, Any]
    secrets: frozenset[str] = dataclasses.field(default=frozenset(), repr=False)
    """The secret strings redacted (in memory only): to scrub text made later, e.g. errors."""
    cut: list[str] = dataclasses.field(default_factory=list)
    """Dotted keys of values too large to record, cut to a note (``prompt (52,428,800 bytes)``)."""


def capture_config(cfg: Any, patterns: Sequence[str] | RedactPolicy) -> CapturedConfig:
    """The recordable form of ``cfg``: resolved, JSON-safe, redacted (``patterns``: the key
    patterns, or a whole :class:`~warehouse.capture.redact.RedactPolicy`), capped in size.

    ``overrides`` and ``hydra`` are filled only when ``cfg`` carries Hydra's own ``hydra``
    node (``compose(..., return_hydra_config=True)``); that node is not part of ``config``.
    Use :func:`hydra_info` for the running Hydra job.
    """
    capture = _Converter()
    overrides: list[str] = []
    hydra: dict[str, Any] = {}
    secrets: set[str] = set()
    hydra_root = hydra_node(cfg)
    policy = as_policy(patterns)
    if hydra_root is not None:
        raw_overrides, raw_hydra = hydra_meta(hydra_root)
        secrets = override_secrets(raw_overrides, policy)
        overrides = cap_overrides(redact_overrides(raw_overrides, policy))
        hydra = redact_config(raw_hydra, policy, secrets=secrets)
        data = capture.omegaconf(cfg, (), 0, skip_key="hydra")
    elif cfg is None:
        data = {}
    else:
        data = capture.top_level(cfg)
    if not isinstance(data, dict):
        data = {_ROOT_KEY: data}
        capture.unresolved = [f"{_ROOT_KEY}.{key}" for key in capture.unresolved]
    if capture.unresolved:
        shown = ", ".join(capture.unresolved[:20])
        more = len(capture.unresolved) - 20
        log.warning(
            "config values that could not be resolved are recorded as written: %s%s",
            shown,
            f" (and {more} more)" if more > 0 else "",
        )
    found: set[str] = set()
    redacted: dict[str, Any] = redact_config(data, policy, secrets=secrets, found_into=found)
    redacted, cut = cap_config(redacted)
    params = flatten_params(redacted)
    config = _finite(redacted) if capture.non_finite else redacted
    return CapturedConfig(
        config, params, capture.unresolved, overrides, hydra, secrets=frozenset(found), cut=cut
    )


def flatten_params(config: Mapping[str, Any]) -> dict[str, Scalar]:
    """The scalar leaves of ``config`` under dotted keys (``{"model": {"C": 1}}`` → ``model.C``).

    See the module docstring for lists, dots in keys and non-finite floats (→ ``None``).
    """
    out: dict[str, Scalar] = {}
    _flatten(config, "", out, 0)
    return out


def _flatten(node: Any, prefix: str, out: dict[str, Scalar], depth: int) -> None:
    if isinstance(node, Mapping):
        if depth > MAX_DEPTH:
            _put(out, prefix, "<too deep>")
            return
        for key, value in node.items():
            name = _param_segment(key)
            _flatten(value, f"{prefix}.{name}" if prefix else name, out, depth + 1)
        return
    if isinstance(node, list | tuple):
        if all(is_scalar(item) for item in node):
            _put(
                out,
                prefix or _ROOT_KEY,
                json.dumps([_param_scalar(i) for i in node], ensure_ascii=False),
            )
        else:
            for index, item in enumerate(node):
                _flatten(item, f"{prefix}.{index}" if prefix else str(index), out, depth + 1)
        return
    if is_scalar(node):
        _put(out, prefix or _ROOT_KEY, _param_scalar(node))
        return
    # not plain data yet (flatten_params called on a raw object): convert, then flatten
    _flatten(_Converter().plain(node, (), depth), prefix, out, depth)


def _param_scalar(value: Scalar) -> Scalar:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _param_segment(key: object) -> str:
    text = key.name if isinstance(key, enum.Enum) else str(key)
    return text.replace(".", "_") or "_"


def _put(out: dict[str, Scalar], key: str, value: Scalar) -> None:
    if key in out:
        log.warning("config keys collide as param %r once dots become '_'; keeping the first", key)
        return
    out[key] = value


def _finite(node: Any) -> Any:
    """``node`` with non-finite floats as the strings ``"nan"``, ``"inf"``, ``"-inf"``."""
    if isinstance(node, float):
        if math.isfinite(node):
            return node
        return "nan" if math.isnan(node) else ("inf" if node > 0 else "-inf")
    if isinstance(node, dict):
        return {key: _finite(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_finite(item) for item in node]
    return node


class _Converter:
    """Turns arbitrary config objects into plain JSON data, noting what it could not resolve."""

    def __init__(self) -> None:
        self.unresolved: list[str] = []
        self.non_finite = False
        self._too_deep_warned = False
        self._on_path: set[int] = set()

    def top_level(self, cfg: Any) -> Any:
        data = self.plain(cfg, (), 0)
        if not isinstance(data, dict | list):
            from warehouse.errors import InvalidRecord

            raise InvalidRecord(
                f"config must be a mapping, an OmegaConf config, a dataclass, a pydantic model "
                f"or an argparse.Namespace, not {type(cfg).__name__}; pass config={{...}}"
            )
        return data

    def plain(self, obj: Any, path: tuple[str, ...], depth: int) -> Any:
        kind = type(obj)
        if obj is None or kind is str or kind is bool:
            return obj
        if kind is float:
            if not math.isfinite(obj):
                self.non_finite = True
            return obj
        if kind is int:
            return obj if -_INT64 <= obj < _INT64 else str(obj)
        if isinstance(obj, enum.Enum):
            return obj.name
        # subclasses of the JSON types (numpy.float64, IntFlag ...) become the plain type
        if isinstance(obj, bool):
            return bool(obj)
        if isinstance(obj, str):
            return str(obj)
        if isinstance(obj, float):
            return self.plain(float(obj), path, depth)
        if isinstance(obj, int):
            return self.plain(int(obj), path, depth)
        if depth > MAX_DEPTH:
            if not self._too_deep_warned:
                log.warning(
                    "config nested deeper than %d levels is cut at %s", MAX_DEPTH, dotted(path)
                )
                self._too_deep_warned = True
            return "<too deep>"
        if is_omegaconf(obj):
            return self.omegaconf(obj, path, depth)
        if isinstance(obj, Mapping):
            return self._container(obj, path, depth, is_mapping=True)
        if isinstance(obj, list | tuple):
            return self._container(obj, path, depth, is_mapping=False)
        if isinstance(obj, set | frozenset):
            try:
                items = sorted(obj)
            except TypeError:
                items = sorted(obj, key=repr)
            return self._container(items, path, depth, is_mapping=False)
        return self._other(obj, path, depth)

    def _container(self, obj: Any, path: tuple[str, ...], depth: int, *, is_mapping: bool) -> Any:
        if id(obj) in self._on_path:
            return "<cycle>"
        self._on_path.add(id(obj))
        try:
            if is_mapping:
                out = {}
                for key, value in obj.items():
                    name = _key(key)
                    out[name] = self.plain(value, (*path, name), depth + 1)
                return out
            return [self.plain(item, (*path, str(i)), depth + 1) for i, item in enumerate(obj)]
        finally:
            self._on_path.discard(id(obj))

    def _other(self, obj: Any, path: tuple[str, ...], depth: int) -> Any:
        if isinstance(obj, dt.datetime | dt.date | dt.time):
            return obj.isoformat()
        if isinstance(obj, dt.timedelta):
            return obj.total_seconds()
        if isinstance(obj, PurePath | uuid.UUID):
            return str(obj)
        if isinstance(obj, bytes | bytearray):
            return bytes(obj).decode("utf-8", errors="replace")
        if type(obj).__module__.partition(".")[0] in _ARRAY_MODULES:
            if getattr(obj, "shape", None) == () and hasattr(obj, "item"):
                return self.plain(obj.item(), path, depth)
            if hasattr(obj, "tolist"):
                return self.plain(obj.tolist(), path, depth)
        if isinstance(obj, numbers.Integral):
            return self.plain(int(obj), path, depth)
        if isinstance(obj, numbers.Real | decimal.Decimal):
            return self.plain(float(obj), path, depth)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
            return self._container(fields, path, depth, is_mapping=True)
        if hasattr(obj, "model_dump") and hasattr(type(obj), "model_fields"):
            return self.plain(obj.model_dump(), path, depth)  # pydantic v2 model
        if type(obj).__name__ == "Namespace" and hasattr(obj, "__dict__"):
            return self._container(vars(obj), path, depth, is_mapping=True)
        return str(obj)

    def omegaconf(
        self, node: Any, path: tuple[str, ...], depth: int, *, skip_key: str | None = None
    ) -> Any:
        """A resolved OmegaConf container; unresolvable leaves kept as written and noted."""
        from omegaconf import DictConfig, OmegaConf

        if node._is_none():
            return None
        if node._is_missing():
            self.unresolved.append(dotted(path))
            return "???"
        if skip_key is None:
            try:  # fast path: the whole subtree resolves
                data = OmegaConf.to_container(node, resolve=True, throw_on_missing=True)
            except Exception:  # any resolution failure: walk the subtree leaf by leaf
                pass
            else:
                return self.plain(data, path, depth)
        if isinstance(node, DictConfig):
            out = {}
            for key in node:
                if key == skip_key:
                    continue
                name = _key(key)
                out[name] = self._omegaconf_child(node, key, (*path, name), depth + 1)
            return out
        return [
            self._omegaconf_child(node, i, (*path, str(i)), depth + 1) for i in range(len(node))
        ]

    def _omegaconf_child(self, parent: Any, key: Any, path: tuple[str, ...], depth: int) -> Any:
        from omegaconf import Container

        child = parent._get_node(key)
        if child._is_interpolation():
            try:
                value = parent[key]
            except Exception:  # unknown key or resolver, missing value, a resolver's error
                self.unresolved.append(dotted(path))
                return child._value()
            if isinstance(value, Container):
                return self.omegaconf(value, path, depth)
            return self.plain(value, path, depth)
        if isinstance(child, Container):
            return self.omegaconf(child, path, depth)
        if child._is_missing():
            self.unresolved.append(dotted(path))
            return "???"
        return self.plain(child._value(), path, depth)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, enum.Enum):
        return key.name
    return str(key)


__all__ = ["MAX_DEPTH", "CapturedConfig", "capture_config", "flatten_params", "hydra_info"]
