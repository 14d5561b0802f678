"""Secrets found by value by detect-secrets, Yelp's maintained secrets detector.

Its regex plugins know the shapes of AWS, Azure storage, GitHub, GitLab, Slack (tokens and
webhook URLs), npm, PyPI, OpenAI, Stripe, Twilio, SendGrid, Square, Discord, Telegram,
Mailchimp, Artifactory, IBM and Cloudant credentials, JWTs and private keys. detect-secrets
scans source lines for a report; here each plugin's own regexes (its ``denylist``) find *spans*
of text to replace:

- a match counts when the plugin's own ``analyze_string`` finds a secret in it (the JWT plugin,
  for one, checks that the parts decode);
- what is replaced is the match's longest captured group of 8 or more characters, else the
  whole match without surrounding quotes, blanks, ``:`` or ``=``, and without a leading
  ``Name=`` (``AccountKey=***``); it is widened to the whole token it sits in, so a 107-character
  Stripe key whose first 32 characters the plugin matches goes whole;
- text longer than :data:`WINDOW` is searched in windows overlapping by :data:`OVERLAP` (no
  secret is longer), so a pathological line costs linear time whatever a plugin's regex does.

Plugins left out: the keyword plugin (the project's key rules, :mod:`secret_keys`, decide which
names hold secrets), public IP addresses (no secret) and the two high-entropy plugins (their
entropy measure and limits judge unquoted tokens in :mod:`secret_values`). The private key
plugin says *that* a text holds a key; :func:`~warehouse.capture.secret_values.redact_pem` cuts
the block's body.

More plugins (``WAREHOUSE_REDACT_PLUGINS``): a ``.py`` file of detect-secrets plugins, loaded by
detect-secrets itself, or ``module:Class``. detect-secrets is imported at the first scan
(about 80 ms, once per process), never by ``warehouse --help``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from detect_secrets.plugins.base import BasePlugin

WINDOW = 4096
"""Characters one plugin regex is run over at a time."""
OVERLAP = 1024
"""Characters consecutive windows share: a secret longer than this could be cut in two."""

LEFT_OUT = frozenset(
    {"Secret Keyword", "Public IP (ipv4)", "Base64 High Entropy String", "Hex High Entropy String"}
)
"""detect-secrets plugins (by ``secret_type``) this module does not run; see the docstring."""
PRIVATE_KEY = "Private Key"

_TOKEN_CHAR = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/")
_TRIM = " \t\r\n\"'=:"
_LEAD = re.compile(r"[^\s=]++=")
_MIN_GROUP = 8


@dataclasses.dataclass(frozen=True)
class Plugin:
    """One detect-secrets plugin and the regexes it finds candidates with."""

    name: str
    plugin: BasePlugin
    patterns: tuple[re.Pattern[str], ...]


@dataclasses.dataclass(frozen=True)
class Found:
    """A secret's span in a text and the plugin that found it."""

    start: int
    end: int
    kind: str


@functools.lru_cache(maxsize=8)
def plugins(extra: tuple[str, ...] = ()) -> tuple[Plugin, ...]:
    """detect-secrets' regex plugins (less :data:`LEFT_OUT`) and the user's ``extra`` ones."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes: dict[str, Any] = dict(get_mapping_from_secret_type_to_class())
    for source in extra:
        for cls in _load(source):
            classes[str(cls.secret_type)] = cls
    found = []
    for name, cls in sorted(classes.items()):
        denylist = getattr(cls, "denylist", None)
        if name in LEFT_OUT or not isinstance(denylist, list | tuple) or not denylist:
            continue
        found.append(Plugin(name, cls(), tuple(denylist)))
    return tuple(found)


def _load(source: str) -> list[Any]:
    """The plugin classes of ``source``: a ``.py`` file or ``module:Class``; ValueError when
    it names none."""
    from detect_secrets.core.plugins.util import get_plugins_from_file

    try:
        if source.endswith(".py"):
            classes: list[Any] = list(get_plugins_from_file(source))
        else:
            module, _, name = source.partition(":")
            classes = [getattr(importlib.import_module(module), name)] if name else []
    except Exception as exc:  # an import error of the user's module, a missing file
        raise ValueError(f"secret detector plugin {source!r} cannot be loaded: {exc}") from None
    if not classes:
        raise ValueError(
            f"secret detector plugin {source!r} names no detect-secrets plugin: give a .py "
            "file defining RegexBasedDetector subclasses, or module:Class"
        )
    return classes


def check_plugins(sources: Sequence[str]) -> None:
    """ValueError, saying what is wrong, when one of ``sources`` names no loadable plugin."""
    for source in sources:
        _load(source)


def find(text: str, extra: tuple[str, ...] = ()) -> list[Found]:
    """The secrets detect-secrets' plugins find in ``text``, as spans to replace."""
    found: list[Found] = []
    for plugin in plugins(extra):
        if plugin.name == PRIVATE_KEY:  # it matches the BEGIN line: redact_pem cuts the body
            continue
        for pattern in plugin.patterns:
            for start, match in _matches(pattern, text):
                span = _span(match, start, text)
                if span is None or not _confirmed(plugin.plugin, match[0]):
                    continue
                found.append(Found(span[0], span[1], plugin.name))
    return found


def _matches(pattern: re.Pattern[str], text: str) -> list[tuple[int, re.Match[str]]]:
    """``(offset, match)`` of ``pattern`` in ``text``, window by window."""
    if len(text) <= WINDOW:
        return [(0, m) for m in pattern.finditer(text)]
    out: list[tuple[int, re.Match[str]]] = []
    step = WINDOW - OVERLAP
    for offset in range(0, len(text) - OVERLAP, step):
        out.extend((offset, m) for m in pattern.finditer(text[offset : offset + WINDOW]))
    return out


def _confirmed(plugin: BasePlugin, candidate: str) -> bool:
    try:
        return any(plugin.analyze_string(candidate))
    except Exception:  # a plugin's own check failing on odd input: the regex match stands
        return True


def _span(match: re.Match[str], offset: int, text: str) -> tuple[int, int] | None:
    """The part of ``match`` to replace, in ``text``'s offsets, widened to its whole token."""
    groups = [i for i in range(1, (match.re.groups or 0) + 1) if match.start(i) >= 0]
    longest = max(groups, key=lambda i: match.end(i) - match.start(i), default=None)
    if longest is not None and match.end(longest) - match.start(longest) >= _MIN_GROUP:
        start, end = match.span(longest)
    else:
        start, end = match.span()
        part = match[0]
        start += len(part) - len(part.lstrip(_TRIM))
        end -= len(part) - len(part.rstrip(_TRIM))
        lead = _LEAD.match(match.string, start, end)
        if lead is not None and end - lead.end() >= _MIN_GROUP:
            start = lead.end()
    start, end = start + offset, end + offset
    if end <= start:
        return None
    while start > 0 and text[start - 1] in _TOKEN_CHAR:
        start -= 1
    while end < len(text) and (text[end] in _TOKEN_CHAR or text[end] == "="):
        end += 1
    return start, end


def has_private_key(text: str, extra: tuple[str, ...] = ()) -> bool:
    """Whether the private key plugin finds a key (its ``BEGIN ... PRIVATE KEY`` line)."""
    for plugin in plugins(extra):
        if plugin.name == PRIVATE_KEY:
            return any(pattern.search(text) for pattern in plugin.patterns)
    return False


__all__ = [
    "LEFT_OUT",
    "OVERLAP",
    "PRIVATE_KEY",
    "WINDOW",
    "Found",
    "Plugin",
    "check_plugins",
    "find",
    "has_private_key",
    "plugins",
]
