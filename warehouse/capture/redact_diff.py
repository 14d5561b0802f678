"""Git diff redaction: a patch without secret files or secret values, still applicable.

See :func:`redact_diff`, and :mod:`warehouse.capture.redact` for the policy it applies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from warehouse.capture.redact import REDACTED, RedactPolicy, as_policy

_DIFF_FILE = re.compile(r"^diff --git ", re.MULTILINE)
_DIFF_PATH = re.compile(r"^(?:---|\+\+\+) (?:[ab]/)?(?P<path>[^\n]+)$", re.MULTILINE)
_DIFF_RENAME = re.compile(r"^(?:rename|copy) (?:from|to) (?P<path>[^\n]+)$", re.MULTILINE)
DIFF_NOTE = "# warehouse:"
"""The start of the note lines a redacted diff begins with."""


def redact_diff(diff: str, patterns: Sequence[str] | RedactPolicy) -> tuple[str, list[str]]:
    """A ``git diff`` with its secrets gone, and the paths whose changes were redacted.

    A file whose name looks secret (:attr:`RedactPolicy.files`) loses its whole section; other
    files keep their lines, each secret value on them replaced by ``***`` (line count and
    prefixes unchanged, so the patch still parses and every file not listed still applies).
    One note line per redacted file (``# warehouse: redacted ...``) goes before the first
    ``diff --git`` line, where ``git apply`` ignores it.
    """
    policy = as_policy(patterns)
    starts = [m.start() for m in _DIFF_FILE.finditer(diff)]
    if not starts:
        return policy.text(diff), []
    preamble = diff[: starts[0]]
    notes: list[str] = []
    redacted_paths: list[str] = []
    kept: list[str] = []
    for begin, end in zip(starts, [*starts[1:], len(diff)], strict=True):
        section = diff[begin:end]
        paths = _section_paths(section)
        shown = paths[-1] if paths else section.split("\n", 1)[0]
        if any(policy.is_secret_file(path) for path in paths):
            notes.append(
                f"{DIFF_NOTE} redacted {shown}: secret-looking file name; changes left out"
            )
            redacted_paths.append(shown)
            continue
        clean = policy.text(section)
        if clean != section:
            notes.append(f"{DIFF_NOTE} redacted {shown}: secret values replaced by {REDACTED}")
            redacted_paths.append(shown)
        kept.append(clean)
    head = "".join(f"{note}\n" for note in notes)
    return head + policy.text(preamble) + "".join(kept), redacted_paths


def _section_paths(section: str) -> list[str]:
    """The file paths one ``diff --git`` section is about (old and new)."""
    header = section.split("\n@@", 1)[0]
    paths = [m["path"] for m in _DIFF_PATH.finditer(header) if m["path"] != "/dev/null"]
    paths += [m["path"] for m in _DIFF_RENAME.finditer(header)]
    if not paths:  # a mode change, a binary file: only the "diff --git a/x b/x" line names it
        first = header.split("\n", 1)[0].removeprefix("diff --git ")
        _left, sep, right = first.partition(" b/")
        paths = [right] if sep else [first]
    return [_unquote(p.strip()) for p in paths]


def _unquote(path: str) -> str:
    """A path as git quotes unusual ones (``"a/sp\\303\\251cial"``), unquoted."""
    if len(path) >= 2 and path[0] == path[-1] == '"':
        try:
            raw = path[1:-1].encode("latin-1").decode("unicode_escape").encode("latin-1")
            path = raw.decode("utf-8", errors="replace")
        except (UnicodeError, ValueError):
            path = path[1:-1]
        for prefix in ("a/", "b/"):
            if path.startswith(prefix):
                return path[len(prefix) :]
    return path


__all__ = ["DIFF_NOTE", "redact_diff"]
