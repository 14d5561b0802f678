"""The one exception tree of results-warehouse.

    WarehouseError                     exit 70 (a bug if it escapes un-subclassed)
     ├── ConfigurationError            exit 2  bad setting, flag or file
     ├── InvalidRecord                 exit 2  a metric, sample or run we refuse to store
     ├── QuerySyntaxError              exit 2  a filter we cannot parse or type-check
     │    └── UnknownField                     a field no record has (``field``: its name)
     ├── NotFound                      exit 4  no run with that id, no such file
     ├── BackendUnavailable            exit 3  a server cannot be reached (records are kept)
     │    ├── StoreUnavailable                 Elasticsearch / local store
     │    └── ObjectStoreUnavailable           S3 / MinIO / local folder
     └── SyncIncomplete                exit 5  the outbox still holds items after a sync

Every class pickles (Hydra launchers and multiprocessing move errors between processes):
constructors take the message first and optional keyword context after, and ``__reduce__``
rebuilds them from exactly that.
"""

from __future__ import annotations

from typing import Any


class WarehouseError(Exception):
    """Base of every error this package raises on purpose."""

    exit_code = 70

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = context
        for key, value in context.items():
            setattr(self, key, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.context))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[WarehouseError], message: str, context: dict[str, Any]) -> WarehouseError:
    return cls(message, **context)


class ConfigurationError(WarehouseError):
    """A setting, flag or config file is wrong; the message names it and the fix."""

    exit_code = 2


class InvalidRecord(WarehouseError):
    """A value we refuse to record (non-numeric metric, bad split name ...)."""

    exit_code = 2


class QuerySyntaxError(WarehouseError):
    """A filter or sort we cannot parse or that does not fit the fields' types."""

    exit_code = 2


class UnknownField(QuerySyntaxError):
    """A field (in a filter, a sort, or the metric a view ranks by) that no record has."""

    field: str = ""  # the dotted path asked for
    suggestions: list[str] | None = None  # the closest known fields


class NotFound(WarehouseError):
    """The run, sample or object asked for does not exist."""

    exit_code = 4


class BackendUnavailable(WarehouseError):
    """A server cannot be reached or refused us; nothing recorded is lost."""

    exit_code = 3


class StoreUnavailable(BackendUnavailable):
    """The store (Elasticsearch, or the local folder) cannot be used right now."""


class ObjectStoreUnavailable(BackendUnavailable):
    """The object store (S3/MinIO, or the local folder) cannot be used right now."""


class SyncIncomplete(WarehouseError):
    """`warehouse sync` finished with items still in the outbox (their reasons attached)."""

    exit_code = 5


__all__ = [
    "BackendUnavailable",
    "ConfigurationError",
    "InvalidRecord",
    "NotFound",
    "ObjectStoreUnavailable",
    "QuerySyntaxError",
    "StoreUnavailable",
    "SyncIncomplete",
    "UnknownField",
    "WarehouseError",
]
