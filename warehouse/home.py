"""The warehouse folder and its layout: one object instead of paths built by hand everywhere.

::

    <home>/
      .gitignore                 "*": the folder never ends up in the user's commits
      runs/<run_id>.json         run records (the local store's truth)
      samples/<run_id>/<split>.parquet
      steps/<run_id>.jsonl
      catalog/                   the local store's query index of runs
      outbox/                    records waiting for Elasticsearch / S3 (warehouse sync)
      objects/                   artifacts and model outputs (the local object store)

Nothing is created before the first write; :meth:`Home.ensure` creates the folder with its
self-ignoring ``.gitignore`` (as pytest's and ruff's caches do).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from warehouse.settings import Settings

GITIGNORE = "# created by results-warehouse: nothing in this folder belongs in git\n*\n"


@dataclass(frozen=True)
class Home:
    """The paths of one warehouse folder (``root``)."""

    root: Path
    _ready: list[bool] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> Home:
        return cls(settings.resolved_home)

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def samples(self) -> Path:
        return self.root / "samples"

    @property
    def steps(self) -> Path:
        return self.root / "steps"

    @property
    def catalog(self) -> Path:
        return self.root / "catalog"

    @property
    def outbox(self) -> Path:
        return self.root / "outbox"

    @property
    def objects(self) -> Path:
        return self.root / "objects"

    def run_file(self, run_id: str) -> Path:
        return self.runs / f"{run_id}.json"

    def sample_file(self, run_id: str, split: str) -> Path:
        return self.samples / run_id / f"{split}.parquet"

    def steps_file(self, run_id: str) -> Path:
        return self.steps / f"{run_id}.jsonl"

    def ensure(self) -> Path:
        """Create the folder (and its ``.gitignore``) if it does not exist yet; return it."""
        if self._ready:
            return self.root
        if not self.root.is_dir():
            self.root.mkdir(parents=True, exist_ok=True)
            ignore = self.root / ".gitignore"
            if not ignore.exists():
                ignore.write_text(GITIGNORE, encoding="utf-8")
        self._ready.append(True)
        return self.root


__all__ = ["Home"]
