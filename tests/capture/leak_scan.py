"""Find planted secrets in text: every planting's random parts, a window at a time.

A :class:`Plantings` hands out fresh secrets (``fresh_secrets``) for named places and
remembers which secret went where. :meth:`Plantings.scan` then reads any text (a stored file,
a served answer) in one pass: each ``WINDOW``-character run of it is looked up among the
windows of every planted core, so a secret found whole or in part is attributed to its shape
and the place it was planted in, whatever the number of plantings.
"""

from __future__ import annotations

import collections
import dataclasses
import html
import json
import random
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path

from tests.capture.fresh_secrets import SHAPES, WINDOW, Secret, keyed_password, make

_SAMPLE = {name: make(name, random.Random(0)).text for name in SHAPES}
MULTILINE = frozenset(name for name, text in _SAMPLE.items() if "\n" in text)
SPACED = frozenset(name for name, text in _SAMPLE.items() if " " in text)


@dataclasses.dataclass(frozen=True)
class Planting:
    place: str
    secret: Secret

    @property
    def shape(self) -> str:
        return self.secret.shape


@dataclasses.dataclass
class Leak:
    planting: Planting
    where: set[str] = dataclasses.field(default_factory=set)


class Plantings:
    """Fresh secrets by place, from one seed; then where any of them turned up."""

    def __init__(self, seed: int, shapes: Iterable[str] | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.shape_names = list(shapes if shapes is not None else SHAPES)
        self.all: list[Planting] = []
        self._index: dict[str, int] | None = None
        self.leaks: dict[int, Leak] = {}

    def secret(self, place: str, shape: str) -> Secret:
        secret = make(shape, self.rng)
        self.all.append(Planting(place, secret))
        self._index = None
        return secret

    def each(self, place: str, *, single_line: bool = False, spaces: bool = True) -> list[Secret]:
        """A fresh secret of every shape for ``place`` (only the one-line, space-free ones
        where a place cannot hold more)."""
        return [
            self.secret(place, shape)
            for shape in self.shape_names
            if not (single_line and shape in MULTILINE) and not (not spaces and shape in SPACED)
        ]

    def some(self, place: str, n: int, *, single_line: bool = True) -> list[Secret]:
        """Fresh secrets of ``n`` one-line shapes drawn from the seed."""
        names = [s for s in self.shape_names if not single_line or s not in MULTILINE]
        return [self.secret(place, shape) for shape in self.rng.sample(names, min(n, len(names)))]

    def password(self, place: str) -> Secret:
        secret = keyed_password(self.rng)
        self.all.append(Planting(place, secret))
        self._index = None
        return secret

    # -- scanning --------------------------------------------------------------------------

    def _windows(self) -> dict[str, int]:
        if self._index is None:
            owners: dict[str, set[int]] = collections.defaultdict(set)
            for i, planting in enumerate(self.all):
                for window in planting.secret.windows():
                    owners[window].add(i)
            # a window two plantings share is a fixed part of a format, not a random one
            self._index = {w: next(iter(o)) for w, o in owners.items() if len(o) == 1}
        return self._index

    def scan(self, where: str, text: str) -> None:
        """Record every planted secret found in ``text`` (and in its decoded forms)."""
        index = self._windows()
        for form in _forms(text):
            for start in range(len(form) - WINDOW + 1):
                owner = index.get(form[start : start + WINDOW])
                if owner is not None:
                    self.leaks.setdefault(owner, Leak(self.all[owner])).where.add(where)

    def report(self) -> str:
        """The leaks by shape and by place, one line each, then every leak with where."""
        by_shape = collections.Counter(leak.planting.shape for leak in self.leaks.values())
        by_place = collections.Counter(leak.planting.place for leak in self.leaks.values())
        planted_place = collections.Counter(p.place for p in self.all)
        lines = [
            f"seed {self.seed}: {len(self.leaks)} of {len(self.all)} planted secrets leaked "
            f"({len(by_shape)} shapes, {len(by_place)} places)",
            "by place: "
            + ", ".join(
                f"{place} {n}/{planted_place[place]}" for place, n in by_place.most_common()
            ),
            "by shape: " + ", ".join(f"{shape} {n}" for shape, n in by_shape.most_common()),
        ]
        for leak in sorted(self.leaks.values(), key=lambda x: (x.planting.place, x.planting.shape)):
            text = leak.planting.secret.text.replace("\n", "\\n")[:90]
            lines.append(
                f"  {leak.planting.place} / {leak.planting.shape}: {text!r} "
                f"-> {', '.join(sorted(leak.where)[:4])}"
            )
        return "\n".join(lines)


def _forms(text: str) -> Iterator[str]:
    """The text and what it decodes to: JSON string escapes, URL quoting, HTML entities."""
    yield text
    seen = {text}
    for decode in (_json_unescape, urllib.parse.unquote_plus, html.unescape):
        form = decode(text)
        if form not in seen:
            seen.add(form)
            yield form


def _json_unescape(text: str) -> str:
    return text.replace("\\n", "\n").replace('\\"', '"').replace("\\/", "/").replace("\\\\", "\\")


def files_text(folder: Path) -> Iterator[tuple[str, str]]:
    """Each file under ``folder`` as text: Parquet and Arrow files by their values, names and
    metadata; every file by its raw bytes too."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = str(path.relative_to(folder))
        data = path.read_bytes()
        yield name, name + "\n" + data.decode("utf-8", errors="replace")
        table = None
        if data[:4] == b"PAR1":
            table = pq.read_table(path)
        elif data[:6] == b"ARROW1":
            table = pa.ipc.open_file(path).read_all()
        if table is not None:
            yield (
                name,
                json.dumps(
                    [table.schema.to_string(), table.to_pylist()], default=str, ensure_ascii=False
                ),
            )
