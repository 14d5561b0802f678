"""Secret values: strings that look like secrets whatever their key.

The built-in patterns (:data:`VALUE_PATTERNS`: ``Bearer`` tokens, ``sk_live_``/``hf_``/``ghp_``
tokens, AWS keys, JWTs, cookies ...), a user's extra patterns (:func:`compile_value_pattern`)
and PEM/SSH private key blocks (:func:`redact_pem`). :mod:`warehouse.capture.redact` applies
them; every pattern reads its text once (possessive repeats, anchored starts).
"""

from __future__ import annotations

import re

from warehouse.capture.secret_keys import REDACTED

VALUE_PATTERNS: tuple[tuple[str, str], ...] = (
    ("bearer token", r"(?i:\bbearer)[ \t]++(?P<secret>[A-Za-z0-9\-._~+/]{8,}+=*+)"),
    ("basic auth", r"\bBasic[ \t]++(?P<secret>(?=[A-Za-z]*+[0-9+/=])[A-Za-z0-9+/]{8,}+=*+)"),
    (
        "connection-string password",
        r"(?i:(?<![A-Za-z0-9_])(?:pwd|pass))[ \t]*+=[ \t]*+(?P<secret>[^;\s'\"]++)",
    ),
    ("stripe key", r"\b[rs]k_(?:live|test)_[0-9A-Za-z]{10,}+"),
    ("hugging face token", r"\bhf_[A-Za-z0-9]{20,}+"),
    ("github token", r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}+|github_pat_[A-Za-z0-9_]{20,}+)"),
    ("gitlab token", r"\bglpat-[A-Za-z0-9_\-]{20,}+"),
    ("openai/anthropic key", r"\bsk-(?=[A-Za-z_\-]*+[0-9])[A-Za-z0-9_\-]{20,}+"),
    ("slack token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}+"),
    ("google api key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("aws access key id", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    (
        "aws secret access key",
        r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=]))(?!/)"
        r"(?=[a-z0-9/+]*+[A-Z])(?=[A-Z0-9/+]*+[a-z])(?=[A-Za-z/+]*+[0-9])[A-Za-z0-9/+]{40}",
    ),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{4,}+\.eyJ[A-Za-z0-9_\-]{4,}+\.[A-Za-z0-9_\-]*+"),
    ("cookie header", r"(?i:\b(?:set-)?cookie)[ \t]*+[:=][ \t]*+(?P<secret>[^\r\n]++)"),
)
"""The built-in value patterns, by name: a match (or its ``secret`` group) becomes ``***``.
PEM/SSH private key blocks (``-----BEGIN ... PRIVATE KEY-----``) are handled on their own."""

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


# lower-case words one of which a text must hold before a built-in pattern is tried on it: a
# substring test costs far less than a regex pass, and most texts hold none of them
_ANCHORS: dict[str, tuple[str, ...]] = {
    "bearer token": ("bearer",),
    "basic auth": ("basic",),
    "connection-string password": ("pwd", "pass"),
    "stripe key": ("k_live_", "k_test_"),
    "hugging face token": ("hf_",),
    "github token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab token": ("glpat-",),
    "openai/anthropic key": ("sk-",),
    "slack token": ("xox",),
    "google api key": ("aiza",),
    "aws access key id": ("akia", "asia", "abia", "acca"),
    "aws secret access key": ("",),  # no fixed text: always tried
    "jwt": ("eyj",),
    "cookie header": ("cookie",),
}
BUILTIN_PATTERNS = tuple((_ANCHORS[name], re.compile(pattern)) for name, pattern in VALUE_PATTERNS)
""":data:`VALUE_PATTERNS` compiled, each with the anchor words a text must hold to be tried."""


def replace_secret(match: re.Match[str]) -> str:
    """A value pattern's match with its ``secret`` group (or, without one, all) as ``***``."""
    if "secret" not in match.re.groupindex or match.start("secret") < 0:
        return REDACTED
    start, end = match.span("secret")
    if match[0][start - match.start() : end - match.start()] == REDACTED:
        return match[0]
    whole = match[0]
    return f"{whole[: start - match.start()]}{REDACTED}{whole[end - match.start() :]}"


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
    "VALUE_PATTERNS",
    "compile_value_pattern",
    "redact_pem",
    "replace_secret",
]
