"""Heavy modules imported on first use, for modules that both write and query.

The local store's modules serve two kinds of caller. A training script (or ``warehouse
watch``) only writes: a JSON file, a journal line, a steps line — no table library. A query
reads Parquet and computes with numpy and pyarrow. Importing numpy and pyarrow costs
~0.15 s of CPU, which a short watched command would pay in wall time. So those modules
take the names from here::

    from warehouse.stores.lazy import np, pa, pc, pq

Type checkers see the real modules (imported under ``TYPE_CHECKING`` below). At run time
the first attribute read (``pa.table``) imports the module and caches the attribute on the
proxy, so later reads are one dict lookup, as with a module. ``tests/test_import_time.py``
checks that recording a run imports neither library.

pyarrow imports pandas (~0.2 s and ~35 MiB) the first time it converts a Python or numpy
value (``pa.scalar``, ``pc.equal(column, "x")``, ``to_numpy``), only to check whether the
value is a pandas object: :func:`without_pandas` tells it, for the length of a ``warehouse
query`` command, that there is no pandas (in a process that has not imported pandas, no
value can be one).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any


class LazyModule:
    """Stands for the module ``name`` until an attribute is read; then imports it."""

    def __init__(self, name: str) -> None:
        self._lazy_name = name
        self._lazy_module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_lazy_"):
            raise AttributeError(attr)
        module = self._lazy_module
        if module is None:
            module = self._lazy_module = importlib.import_module(self._lazy_name)
        value = getattr(module, attr)
        setattr(self, attr, value)  # the next read skips __getattr__
        return value

    def __repr__(self) -> str:
        state = "imported" if self._lazy_module is not None else "not imported yet"
        return f"<lazy module {self._lazy_name!r} ({state})>"


def lazy_module(name: str) -> Any:
    """A stand-in for ``import name`` that imports on the first attribute read."""
    return LazyModule(name)


class _NoPandas:
    """A meta path finder refusing pandas (see :func:`without_pandas`)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError(f"{name} is not imported while a warehouse query runs")


@contextmanager
def without_pandas() -> Iterator[None]:
    """Within: ``import pandas`` fails, unless pandas was imported before (then nothing
    changes). pyarrow then takes it that pandas is missing; after, pyarrow imports pandas
    again on the first call that needs it (``Table.to_pandas``)."""
    if "pandas" in sys.modules:
        yield
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
else:
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")
    pq = lazy_module("pyarrow.parquet")

__all__ = ["LazyModule", "lazy_module", "np", "pa", "pc", "pq", "without_pandas"]
