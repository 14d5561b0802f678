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
  ``Name=`` (``AccountKey=***``); it is widened to the whole token it sits in (to the left over
  letters and digits only), so a 107-character Stripe key whose first 32 characters the plugin
  matches goes whole;
- text longer than :data:`WINDOW` is searched in windows overlapping by :data:`OVERLAP` (no
  secret is longer), so a pathological line costs linear time whatever a plugin's regex does;
- a regex runs only on text holding one of the literals every match of it holds
  (:func:`required_literals`, read from the regex itself: ``AccountKey=``, ``T3BlbkFJ``,
  ``eyJ`` ...; compared without case where the regex ignores case): a substring test costs far
  less than a regex pass, and most texts hold none.

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
from collections.abc import Iterable, Sequence
from re import _constants as sre_constants  # type: ignore[attr-defined]  # the stdlib's parser
from re import _parser as sre_parse  # type: ignore[attr-defined]
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

_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_TOKEN_CHAR = _ALNUM | frozenset("_-+/=")
_TRIM = " \t\r\n\"'=:"
_LEAD = re.compile(r"[^\s=]++=")
_MIN_GROUP = 8


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity: one per process
class Plugin:
    """One detect-secrets plugin and the regexes it finds candidates with."""

    name: str
    plugin: BasePlugin
    patterns: tuple[re.Pattern[str], ...]
    gates: tuple[Gate, ...]
    """Per pattern, what a text must hold to be searched (:func:`required_literals`)."""


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
        gates = tuple(required_literals(pattern) for pattern in denylist)
        found.append(Plugin(name, cls(), tuple(denylist), gates))
    return tuple(found)


@dataclasses.dataclass(frozen=True)
class Gate:
    """What a text must hold for a regex to be worth running on it: for each of ``needs``, one
    of its literals (a literal with ``lower`` set is looked for in the lower-cased text)."""

    needs: tuple[frozenset[str], ...]
    lower: bool

    def opens(self, present: frozenset[str]) -> bool:
        """Whether the literals ``present`` in a text (:func:`present_literals`) let it in."""
        return all(need & present for need in self.needs)

    @property
    def literals(self) -> frozenset[str]:
        return frozenset().union(*self.needs)


def required_literals(pattern: re.Pattern[str]) -> Gate:
    """The literals every match of ``pattern`` holds, read off the pattern itself: for each
    part of it that is always there, the strings one of which it always holds (``AKIA`` or
    ``ASIA`` ...). Lower case where the pattern ignores case anywhere; no needs (every text
    lets it in) when nothing can be read off."""
    lower = bool(pattern.flags & re.IGNORECASE) or "(?i" in pattern.pattern
    try:
        items = sre_parse.parse(pattern.pattern, pattern.flags)
    except Exception:  # a pattern the parser of this Python cannot read again: always search
        return Gate((), lower)
    needs = {frozenset(x.lower() if lower else x for x in need) for need in _required(items)}
    strongest = sorted(needs, key=lambda need: -min(map(len, need)))[:3]
    return Gate(tuple(strongest), lower)


class Gates:
    """Many gates, asked together which of them a text opens: each literal is looked for once,
    and only gates whose strongest need was met are checked further."""

    def __init__(self, gates: Iterable[Gate]) -> None:
        self.gates = tuple(gates)
        self.always = [i for i, gate in enumerate(self.gates) if not gate.needs]
        first: dict[str, list[int]] = {}
        for i, gate in enumerate(self.gates):
            for literal in gate.needs[0] if gate.needs else ():
                first.setdefault(literal, []).append(i)
        self._first = first
        self._exact = _by_rarest({x for g in self.gates if not g.lower for x in g.literals})
        self._lowered = _by_rarest({x for g in self.gates if g.lower for x in g.literals})

    def opened(self, text: str) -> list[int]:
        """The indices of the gates ``text`` opens, in order."""
        present = _present(self._exact, text)
        if self._lowered:
            present.update(_present(self._lowered, text.lower()))
        candidates = {i for literal in present for i in self._first.get(literal, ())}
        frozen = frozenset(present)
        opened = [i for i in candidates if self.gates[i].opens(frozen)]
        return sorted([*self.always, *opened])


# letters by how common they are in English text: a literal is filed under its rarest character
# (one not here is rarer than all: a capital, a digit, "_", "-", "."), which most texts lack
_COMMON = " etaoinsrhldcumfpgwybvkxjqz"


def _by_rarest(literals: Iterable[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``literals`` filed by their rarest character: what :func:`_present` reads."""
    files: dict[str, list[str]] = {}
    for literal in sorted(literals):
        rarest = max(literal, key=lambda c: _COMMON.find(c) if c in _COMMON else len(_COMMON))
        files.setdefault(rarest, []).append(literal)
    return tuple((char, tuple(found)) for char, found in sorted(files.items()))


def _present(files: tuple[tuple[str, tuple[str, ...]], ...], text: str) -> set[str]:
    """The literals of ``files`` (:func:`_by_rarest`) in ``text``: a file whose character the
    text lacks is passed over whole."""
    return {x for char, found in files if char in text for x in found if x in text}


def _required(items: Any) -> list[frozenset[str]]:
    """What a parsed sequence always holds: a list of needs, each a set of alternatives."""
    needs: list[frozenset[str]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            needs.append(frozenset({"".join(run)}))
            run.clear()

    for op, arg in items:
        if op is sre_constants.LITERAL:
            run.append(chr(arg))
            continue
        flush()
        if op is sre_constants.SUBPATTERN:
            needs.extend(_required(arg[-1]))
        elif op is sre_constants.BRANCH:
            best = [_strongest(_required(branch)) for branch in arg[1]]
            if all(best):
                needs.append(frozenset().union(*best))
        elif op in _REPEATS and arg[0] >= 1:
            needs.extend(_required(arg[2]))
    flush()
    return needs


def _strongest(needs: list[frozenset[str]]) -> frozenset[str]:
    return max(needs, key=lambda need: min(map(len, need)), default=frozenset())


_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT)


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
    searched = _searched(extra)
    for index in searched.gates.opened(text):
        plugin, pattern = searched.patterns[index]
        for start, match in _matches(pattern, text):
            span = _span(match, start, text)
            if span is None or not _confirmed(plugin.plugin, match[0]):
                continue
            found.append(Found(span[0], span[1], plugin.name))
    return found


@dataclasses.dataclass(frozen=True, eq=False)
class _Searched:
    patterns: tuple[tuple[Plugin, re.Pattern[str]], ...]
    gates: Gates


@functools.lru_cache(maxsize=8)
def _searched(extra: tuple[str, ...]) -> _Searched:
    """Every pattern :func:`find` runs (not the private key plugin's: it matches the BEGIN
    line, and :func:`~warehouse.capture.secret_values.redact_pem` cuts the body), gated."""
    pairs = [
        (plugin, pattern, gate)
        for plugin in plugins(extra)
        if plugin.name != PRIVATE_KEY
        for pattern, gate in zip(plugin.patterns, plugin.gates, strict=True)
    ]
    return _Searched(tuple((p, r) for p, r, _ in pairs), Gates(g for _, _, g in pairs))


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
    while start > 0 and text[start - 1] in _ALNUM:  # not over "_": "acc_" is no part of it
        start -= 1
    while end < len(text) and text[end] in _TOKEN_CHAR:
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
    "Gate",
    "Gates",
    "Plugin",
    "check_plugins",
    "find",
    "has_private_key",
    "plugins",
    "required_literals",
]
