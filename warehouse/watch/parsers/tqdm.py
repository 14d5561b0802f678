"""tqdm bars, plain or nested, and PyTorch Lightning's tqdm bar::

    epoch 0:  50%|█████     | 20/40 [00:01<00:01, 20.0it/s, loss=0.123, lr=0.001]
    Epoch 1:  31%|███▏      | 5/16 [00:00<00:00, 93.26it/s, v_num=0, train_loss_step=0.115]
    eval: 15it [00:00, 47411.12it/s, acc=0.5]

The postfix (``name=value`` after the rate) holds the metrics; the bar's label (or, without
one, its total) names the bar (an inner bar drawn on the next line is another bar), its counter
the position. A bar
cut at the terminal's width has no closing ``]``: its last pair may be cut anywhere (mid-name
or mid-value), so only the pairs before it are read. Text after the ``]`` is other output that
a ``print`` put on the bar's line. Unit-scaled counters (``1.2k/5k``) give
no position.
"""

from __future__ import annotations

import re

from warehouse.watch.parsers.frames import Frame
from warehouse.watch.parsers.reading import NAME, NOT_METRICS, LineParser, Reading, number

# the counter and the opening of the stats: "20/40 [00:01<" or "15it [00:00,"
_STATS = re.compile(
    r"(?:^|[|\s])(?P<n>\d+(?:\.\d+)?[kMGTPEZY]?)(?:/(?P<total>\d+(?:\.\d+)?[kMGTPEZY]?|\?))?"
    r"(?:[A-Za-z]\w*)?\s?\[(?=\d+:\d\d|\?)"
)
_PAIR = re.compile(r"(" + NAME + r")=(.*)\Z", re.DOTALL)
_LABEL_TAIL = re.compile(r"[:\s]*(?:\d+%)?\|.*\Z|[:\s]+\Z", re.DOTALL)
_DIGITS = re.compile(r"\d+")
_COMMA = re.compile(r",\s*")
EPOCH_IN_LABEL = re.compile(r"(?i)\bepoch\s*(\d+)")


def bar_label(prefix: str) -> str:
    """The label of a bar (``Epoch 3``), from the text before its counter."""
    return _LABEL_TAIL.sub("", prefix).strip()


def bar_key(label: str, total: str | None) -> str:
    """Which bar a frame belongs to: its label with the numbers masked (``Epoch #``: every
    epoch's bar is one series, whatever its length: the last epoch of a ``max_steps`` run is
    shorter); an unlabelled bar by its total (a training loop's bar and an evaluation loop's)."""
    masked = _DIGITS.sub("#", label)
    return masked if masked else f"/{total or ''}"


class Tqdm(LineParser):
    """tqdm bar frames carrying a postfix."""

    family = "tqdm"

    def parse(self, frame: Frame) -> list[Reading] | None:
        reading = self._read(frame)
        return None if reading is None else [reading]

    def _read(self, frame: Frame) -> Reading | None:
        text = frame.text
        if "[" not in text:
            return None
        m = _STATS.search(text)
        if m is None:
            return None
        inside = text[m.end() :]
        end = inside.find("]")  # what follows it is other output on the same line (a print)
        closed = end >= 0
        parts = _COMMA.split(inside[:end] if closed else inside)
        if not closed:
            parts = parts[:-1]  # cut at the terminal's width: the last pair may be cut
        metrics: dict[str, float] = {}
        texts: dict[str, str] = {}
        for part in parts[2:]:  # after "elapsed<remaining" and the rate
            pair = _PAIR.match(part)
            if pair is None:
                continue
            name, raw = pair.group(1), pair.group(2).strip()
            value = number(raw)
            if value is None or name in NOT_METRICS:
                continue
            metrics[name] = value
            texts[name] = raw
        label = bar_label(text[: m.start() + 1])
        total_text = m.group("total")
        counter = int(m.group("n")) if m.group("n").isdigit() else None
        total = int(total_text) if total_text and total_text.isdigit() else None
        epoch = EPOCH_IN_LABEL.search(label)
        return Reading(
            self.family,
            metrics,
            epoch=int(epoch.group(1)) if epoch else None,
            bar=bar_key(label, total_text),
            counter=counter,
            total=total,
            texts=texts,
        )


__all__ = ["EPOCH_IN_LABEL", "Tqdm", "bar_key", "bar_label"]
