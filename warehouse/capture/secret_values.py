"""Secret values: strings that look like secrets whatever their key, as spans to replace.

:func:`find_secrets` joins three kinds of evidence:

1. **detect-secrets' plugins** (:mod:`warehouse.capture.secret_library`): AWS, Azure, GitHub,
   GitLab, Slack, npm, PyPI, OpenAI, Stripe, Twilio, JWTs ... the shapes a maintained library
   knows.
2. **The project's own shapes, only where the library has none** (:data:`VALUE_PATTERNS`):
   HTTP ``Authorization``/``Bearer``/``Basic`` credentials, cookies, connection-string
   passwords, Hugging Face, Anthropic and other ``sk-`` keys, GitHub fine-grained tokens,
   Slack app tokens, Google API keys, bare npm tokens, Stripe test keys and AWS secret access
   keys without their key name; plus the user's own regexes (``WAREHOUSE_REDACT_VALUE_PATTERNS``;
   a group named ``secret`` limits what is replaced).
3. **Random-looking tokens** (:func:`is_random_token`): a run of 20 or more base64/base64url
   characters that holds letters and digits, and either exceeds detect-secrets' entropy limit
   for base64 strings (4.5 bits a character, by its measure) or has digits *inside* words at
   least 3 times (and once every 16 characters): ``k9fQ2pL7vR1x...`` is a token, while
   ``resnet50_imagenet_lr0001_bs256`` (its numbers end words) and
   ``InvalidNumberOfTagsException`` (no digit) are names. A run with a path's lowercase word
   between slashes (``github.com/org/repo/blob/<sha>``) is judged piece by piece. A run of hex
   digits only is a digest (a commit, a sha256, a run id) and is kept, except where
   ``hex_too`` (environment values) judges it by the library's hex limit (3.0); runs of digits
   are numbers. Statistics cannot be sure of short tokens: measured on random values, the rule
   misses about 1 in 700 of 43 characters (``secrets.token_urlsafe(32)``), 1 in 11 of 32 and
   none of 64 in 20,000; such secrets need a key name, a pattern or their environment
   variable.

Private key blocks (``-----BEGIN ... PRIVATE KEY-----``) lose their body (:func:`redact_pem`).
Every pattern of this module reads its text once (possessive repeats, anchored starts).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from warehouse.capture import secret_library
from warehouse.capture.secret_keys import REDACTED

if TYPE_CHECKING:
    from detect_secrets.plugins.high_entropy_strings import (
        Base64HighEntropyString,
        HexHighEntropyString,
    )

VALUE_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "authorization header",
        r"(?i:\b(?:proxy-)?authorization)[\"']?[ \t]*+[:=][ \t]*+[\"']?"
        r"(?:[A-Za-z][\w\-]*+[ \t]++)?(?P<secret>[^\s\"',;)\]}]{6,}+)",
    ),
    ("bearer token", r"(?i:\bbearer)[ \t]++(?P<secret>[A-Za-z0-9\-._~+/]{8,}+=*+)"),
    ("basic auth", r"\bBasic[ \t]++(?P<secret>(?=[A-Za-z]*+[0-9+/=])[A-Za-z0-9+/]{8,}+=*+)"),
    (
        "connection-string password",
        r"(?i:(?<![A-Za-z0-9_])(?:pwd|pass))[ \t]*+=[ \t]*+(?P<secret>[^;\s'\"]++)",
    ),
    ("stripe test key", r"\b[rs]k_test_[0-9A-Za-z]{10,}+"),
    ("hugging face token", r"\bhf_[A-Za-z0-9]{20,}+"),
    ("github fine-grained token", r"\bgithub_pat_[A-Za-z0-9_]{20,}+"),
    ("sk- key", r"\bsk-(?=[A-Za-z_\-]*+[0-9])[A-Za-z0-9_\-]{20,}+"),
    ("slack app token", r"\bx(?:app|oxe)[.\-][A-Za-z0-9.\-]{10,}+"),
    ("google api key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("npm token", r"\bnpm_[A-Za-z0-9]{36}"),
    (
        "aws secret access key",
        r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=]))(?!/)"
        r"(?=[a-z0-9/+]*+[A-Z])(?=[A-Z0-9/+]*+[a-z])(?=[A-Za-z/+]*+[0-9])[A-Za-z0-9/+]{40}",
    ),
    ("cookie header", r"(?i:\b(?:set-)?cookie)[ \t]*+[:=][ \t]*+(?P<secret>[^\r\n]++)"),
)
"""The project's own value patterns, by name: a match (or its ``secret`` group) is replaced.
Each is a shape detect-secrets has no plugin for."""

BUILTIN_PATTERNS = tuple(
    (secret_library.required_literals(compiled), compiled)
    for compiled in (re.compile(pattern) for _, pattern in VALUE_PATTERNS)
)
""":data:`VALUE_PATTERNS` compiled, each with the literals one of which a text must hold to be
searched (:func:`~warehouse.capture.secret_library.required_literals`; none: always searched)."""
_BUILTIN_GATES = secret_library.Gates(gate for gate, _ in BUILTIN_PATTERNS)

TOKEN_MIN = 20
"""The shortest run of base64 characters judged as a possible token."""
# runs of base64/base64url characters, with their padding; '=' inside a run separates
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/_\-]{20,}+={0,2}+")
# a lowercase word between slashes: the run is a path or a URL, judged piece by piece
_PATH_WORD = re.compile(r"(?:^|/)[a-z]{3,}+(?=/|$)")
_INNER_DIGITS = re.compile(r"(?<=[A-Za-z])[0-9]++(?=[A-Za-z])")
_HEX = frozenset("0123456789abcdefABCDEF-")
_DIGITS = frozenset("0123456789")
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
# a base64 run in a key block; a diff line keeps its leading "+", "-" or " "
_BASE64_RUN = re.compile(r"(?P<lead>^[+\- ]|)[A-Za-z0-9+/=]{8,}+", re.MULTILINE)


def compile_value_pattern(pattern: str) -> re.Pattern[str]:
    """A user's value pattern compiled, or ValueError saying what is wrong with it."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        message = f"value pattern {pattern!r} is not a valid regular expression: {exc}"
        raise ValueError(message) from None


def find_secrets(
    text: str,
    user: Iterable[re.Pattern[str]] = (),
    plugins: tuple[str, ...] = (),
    *,
    hex_too: bool = False,
) -> list[tuple[int, int]]:
    """The spans of ``text`` that hold secrets, sorted and merged (never overlapping).

    ``user``: the user's compiled value patterns; ``plugins``: extra detect-secrets plugins
    (:func:`~warehouse.capture.secret_library.plugins`); ``hex_too``: judge hex-only tokens by
    their entropy too."""
    spans = [(f.start, f.end) for f in secret_library.find(text, plugins)]
    for index in _BUILTIN_GATES.opened(text):
        spans.extend(_pattern_spans(BUILTIN_PATTERNS[index][1], text))
    for pattern in user:
        spans.extend(_pattern_spans(pattern, text))
    spans.extend(_token_spans(text, hex_too=hex_too))
    return _merged(spans)


def redact_tokens(text: str, *, hex_too: bool = False) -> str:
    """``text`` with its random-looking tokens (rule 3 alone) replaced by ``***``."""
    spans = _merged(list(_token_spans(text, hex_too=hex_too)))
    return replace_spans(text, spans) if spans else text


def replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of the merged ``spans`` replaced by ``***``."""
    out: list[str] = []
    pos = 0
    for start, end in spans:
        if text[start:end] == REDACTED:
            continue
        out.append(text[pos:start])
        out.append(REDACTED)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _pattern_spans(pattern: re.Pattern[str], text: str) -> Iterable[tuple[int, int]]:
    secret = "secret" in pattern.groupindex
    for match in pattern.finditer(text):
        span = match.span("secret") if secret and match.start("secret") >= 0 else match.span()
        if span[1] > span[0]:
            yield span


def is_random_token(token: str, *, hex_too: bool = False) -> bool:
    """Whether ``token`` (a run of base64 characters) looks random: see the module docstring."""
    chars = set(token.rstrip("="))
    if chars <= _DIGITS:
        return False
    base64, hexadecimal = _entropy_plugins()
    if chars <= _HEX:
        return hex_too and hexadecimal.calculate_shannon_entropy(token) > hexadecimal.entropy_limit
    if not (chars & _DIGITS and chars & _LETTERS):
        return False
    if shannon_entropy(token) > base64.entropy_limit:
        return True
    return len(_INNER_DIGITS.findall(token)) >= max(3, len(token) // 16)


def shannon_entropy(text: str) -> float:
    """Shannon entropy in bits a character, as detect-secrets' high-entropy plugins measure
    it over their charset (every character of a base64 token is in it); counted in one pass
    instead of one per charset character."""
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in Counter(text).values())


def _token_spans(text: str, *, hex_too: bool) -> Iterable[tuple[int, int]]:
    if len(text) < TOKEN_MIN:
        return
    for match in _TOKEN_RUN.finditer(text):
        token = match[0]
        if "/" not in token or _PATH_WORD.search(token) is None:
            if is_random_token(token, hex_too=hex_too):
                yield match.span()
            continue
        pos = match.start()
        for piece in token.split("/"):
            if len(piece) >= TOKEN_MIN and is_random_token(piece, hex_too=hex_too):
                yield pos, pos + len(piece)
            pos += len(piece) + 1


@functools.cache
def _entropy_plugins() -> tuple[Base64HighEntropyString, HexHighEntropyString]:
    """detect-secrets' base64 and hex high-entropy plugins, at their default limits."""
    from detect_secrets.plugins.high_entropy_strings import (
        Base64HighEntropyString,
        HexHighEntropyString,
    )

    return Base64HighEntropyString(), HexHighEntropyString()


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def redact_pem(text: str) -> str:
    """The body of every private key block, line for line (an unclosed block: to the end)."""
    out: list[str] = []
    pos = 0
    while (begin := _PEM_BEGIN.search(text, pos)) is not None:
        end = _PEM_END.search(text, begin.end())
        stop = end.start() if end is not None else len(text)
        out.append(text[pos : begin.end()])
        out.append(_BASE64_RUN.sub(lambda m: f"{m['lead']}{REDACTED}", text[begin.end() : stop]))
        pos = stop if end is None else end.end()
        if end is not None:
            out.append(text[stop:pos])
    out.append(text[pos:])
    return "".join(out)


__all__ = [
    "BUILTIN_PATTERNS",
    "TOKEN_MIN",
    "VALUE_PATTERNS",
    "compile_value_pattern",
    "find_secrets",
    "is_random_token",
    "redact_pem",
    "redact_tokens",
    "replace_spans",
    "shannon_entropy",
]
