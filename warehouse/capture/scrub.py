"""The scrub of one run: every string the run takes in passes here before it is stored.

:class:`RunScrub` applies one :class:`~warehouse.capture.redact.RedactPolicy` (with the run's
own secrets, e.g. the config's passwords, to scrub wherever they turn up) to text, names,
mappings and per-sample batches, and remembers *where* it replaced something. The run stores
those places as ``redacted`` (:meth:`RunScrub.places_of`): the ones noted on the way in
(metric, step and sample column names, sample columns, the git diff), plus every field of the
record that holds the :data:`~warehouse.capture.redact.REDACTED` mark. Never the values.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from warehouse.capture.redact import REDACTED, RedactPolicy

if TYPE_CHECKING:
    import pyarrow as pa

V = TypeVar("V")

_NOT_SCANNED = frozenset({"run_id", "redacted", "schema_version"})
"""Record fields the warehouse writes itself, never redacted."""


class RunScrub:
    """One run's scrub: text and names in, secrets out, places remembered."""

    def __init__(self, policy: RedactPolicy, secrets: Iterable[str] = ()) -> None:
        self.policy = policy.with_secrets(s for s in secrets if s != REDACTED)
        self.places: set[str] = set()
        self._names: dict[str, str] = {}
        self._clean: set[str] = set()  # names seen and found clean
        self._lock = threading.Lock()

    def text(self, value: str, place: str) -> str:
        """``value`` without secrets; ``place`` is remembered when something was replaced."""
        clean = self.policy.text(value)
        if clean != value:
            self.note(place)
        return clean

    def name(self, value: str, place: str) -> str:
        """A name (a metric, a split, a column) without secrets, each name scrubbed once."""
        clean = self._names.get(value)
        if clean is None:
            clean = self.policy.text(value)
            with self._lock:
                self._names[value] = clean
                if clean == value:
                    self._clean.add(value)
        if clean != value:
            self.note(place)
        return clean

    def known(self, names: Iterable[str]) -> bool:
        """Whether every one of ``names`` was seen before and held no secret (the step logger's
        hot path asks this, one set operation, before anything else)."""
        return self._clean.issuperset(names)

    def names(self, mapping: Mapping[str, V], place: str) -> dict[str, V]:
        """``mapping`` with its keys scrubbed as names."""
        return {self.name(str(key), place): value for key, value in mapping.items()}

    def batch(self, batch: pa.RecordBatch, place: str, skip: Iterable[str] = ()) -> pa.RecordBatch:
        """A per-sample batch with its column names and text scrubbed
        (:func:`~warehouse.capture.redact_samples.scrub_batch`); each column changed is noted
        as ``<place>.<column>``."""
        from warehouse.capture.redact_samples import scrub_batch

        clean, changed = scrub_batch(batch, self.policy, skip=skip)
        for column in changed:
            self.note(f"{place}.{column.removesuffix(' (name)')}")
        return clean

    def note(self, place: str) -> None:
        """Remember that something was replaced at ``place``."""
        with self._lock:
            self.places.add(place)

    def places_of(self, doc: Mapping[str, Any]) -> list[str]:
        """Where the run ``doc`` had secrets replaced: the places noted, and every field that
        holds the redaction mark (a list of strings counts as one place)."""
        found = set(self.places)
        stack: list[tuple[str, Any]] = [
            (key, value) for key, value in doc.items() if key not in _NOT_SCANNED
        ]
        while stack:
            path, value = stack.pop()
            if isinstance(value, str):
                if REDACTED in value:
                    found.add(path)
            elif isinstance(value, Mapping):
                stack.extend((f"{path}.{key}", item) for key, item in value.items())
            elif isinstance(value, list):
                if any(isinstance(item, str) and REDACTED in item for item in value):
                    found.add(path)
                else:
                    stack.extend((f"{path}.{i}", item) for i, item in enumerate(value))
        return sorted(found)


__all__ = ["RunScrub"]
