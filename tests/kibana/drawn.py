"""What a Vega-Lite view draws in its dashboard panel, read from vl-convert's scenegraph.

:func:`drawn` renders a spec (its data inlined) at the pixels Kibana gives the panel
(:func:`warehouse.dashboards.kibana.panel_pixels`, ``autosize: fit`` as Kibana merges it) and
returns what a reader sees: the row labels of the vertical axis with the space each gets,
the legend's labels, every text mark, and whether anything falls outside the panel.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

import vl_convert

from warehouse.dashboards.vega import VL_VERSION


@dataclass
class Text:
    role: str
    text: str
    x: float  # absolute, the text's anchor
    y: float
    size: float


@dataclass
class Drawn:
    """A rendered view: texts by role, and the view's pixel size."""

    width: int
    height: int
    texts: list[Text] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)  # marktype -> items drawn

    def axis_labels(self) -> list[list[Text]]:
        """Each axis's labels (one list per axis, in drawing order)."""
        return [
            [t for t in self.texts if t.role == f"axis-label#{i}"]
            for i in sorted({int(t.role.split("#")[1]) for t in self.texts if "#" in t.role})
        ]

    def row_labels(self) -> list[Text]:
        """The labels of the vertical band axis (rows), top to bottom."""
        for labels in self.axis_labels():
            ys = {round(t.y, 1) for t in labels}
            xs = {round(t.x, 1) for t in labels}
            if len(labels) > 1 and len(ys) == len(labels) and len(xs) == 1:
                return sorted(labels, key=lambda t: t.y)
        return []

    def row_step(self) -> float:
        """The smallest vertical distance between two adjacent row labels (px)."""
        ys = [t.y for t in self.row_labels()]
        return min((b - a for a, b in itertools.pairwise(ys)), default=float("inf"))

    def legend_labels(self) -> list[Text]:
        return [t for t in self.texts if t.role == "legend-label"]

    def mark_texts(self) -> list[str]:
        return [t.text for t in self.texts if t.role == "mark"]

    def outside(self) -> list[Text]:
        """Texts whose box reaches past the panel's bottom or right edge."""
        return [t for t in self.texts if t.y + t.size / 2 > self.height + 0.5 or t.x > self.width]


def drawn(spec: dict[str, Any], size: tuple[int, int], vl_version: str = VL_VERSION) -> Drawn:
    """Render ``spec`` at ``size`` (width, height) as Kibana fits it, and read what it draws."""
    fitted = copy.deepcopy(spec)
    fitted["autosize"] = {"type": "fit", "contains": "padding"}
    fitted["width"], fitted["height"] = size
    graph = vl_convert.vegalite_to_scenegraph(fitted, vl_version=vl_version)["scenegraph"]
    out = Drawn(width=size[0], height=size[1])
    axes = [0]

    def walk(node: dict[str, Any], dx: float, dy: float, axis: int | None) -> None:
        role = node.get("role")
        if role == "axis":
            axes[0] += 1
            axis = axes[0]
        if node.get("marktype") == "text":
            for item in node.get("items", []):
                if item.get("text") in (None, ""):
                    continue
                name = f"axis-label#{axis}" if role == "axis-label" else str(role)
                text = item["text"]
                text = " ".join(text) if isinstance(text, list) else str(text)
                size_px = float(item.get("fontSize", 11))
                out.texts.append(
                    Text(name, text, dx + item.get("x", 0), dy + item.get("y", 0), size_px)
                )
        elif role == "mark" and node.get("marktype"):
            kind = str(node["marktype"])
            out.marks[kind] = out.marks.get(kind, 0) + len(node.get("items", []))
        for item in node.get("items", []):
            x, y = (item.get("x", 0), item.get("y", 0)) if "items" in item else (0, 0)
            walk(item, dx + x, dy + y, axis)

    walk(graph, 0.0, 0.0, None)
    return out
