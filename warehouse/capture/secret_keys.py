"""Secret keys: which names (mapping keys, flags, environment variables) hold a secret.

A key looks secret when it contains one of the key patterns (:data:`DEFAULT_REDACT_PATTERNS`),
ignoring case and the separators ``_ - . space``; a few ML words that merely contain a pattern
(``tokenizer``, ``max_tokens``, ``author`` ...) do not count. See :mod:`warehouse.capture.redact`
for the whole redaction policy.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence

REDACTED = "***"
"""What a secret value is replaced with."""

MIN_SCRUB_LENGTH = 6
"""Secrets shorter than this are redacted under their key only, not searched for elsewhere."""

DEFAULT_REDACT_PATTERNS = (
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "access_key",
    "private_key",
    "credential",
    "auth",
    "cookie",
)
"""Key patterns: a key containing one of them holds a secret (``WAREHOUSE_REDACT_PATTERNS``)."""

_SEPARATORS = re.compile(r"[\s_.\-]+")
# Words that contain a pattern but name no secret; replaced by a word break before matching.
_NOT_SECRET = re.compile(
    r"tokeni[sz][a-z]*"  # tokenizer, tokenize, tokenized, tokenization, tokenizers
    r"|(?:max|min|num|n|new|total|special|input|output|prompt|context|extra|pad|bos|eos)"
    r"[_\-. ]?tokens?(?![a-z])"  # max_tokens, max_new_tokens, num_tokens, special_tokens
    r"|tokens?[_\-. ]?per[_\-. ]?[a-z]*"  # tokens_per_s, tokens_per_batch
    r"|author(?:s(?![a-z])|(?![a-z]))"  # author, authors (not authorization, authority)
)
# secret-looking environment variable names beyond the key patterns (DB_PASS, GH_PAT ...)
_ENV_NAME = re.compile(
    r"(?:^|_)(?:PASS|PASSPHRASE|PWD|PAT|KEY|DSN|COOKIE|SESSION)(?:_|$)", re.IGNORECASE
)
_ENV_NOT_SECRET = frozenset({"PWD", "OLDPWD"})


def is_secret_key(key: object, patterns: Sequence[str]) -> bool:
    """Whether a mapping key looks like it holds a secret under ``patterns``."""
    return is_secret_name(str(key), compact_patterns(tuple(patterns)))


@functools.lru_cache(maxsize=64)
def compact_patterns(patterns: tuple[str, ...]) -> tuple[str, ...]:
    """Key patterns lower-cased, without separators, deduplicated: what keys are matched by."""
    compact = (_SEPARATORS.sub("", p.lower()) for p in patterns)
    return tuple(sorted({p for p in compact if p}))


@functools.lru_cache(maxsize=16_384)
def is_secret_name(key: str, compact: tuple[str, ...]) -> bool:
    """Whether ``key`` contains one of the :func:`compact_patterns` ``compact``."""
    if not compact:
        return False
    text = _NOT_SECRET.sub("|", key.lower())
    text = _SEPARATORS.sub("", text)
    return any(p in text for p in compact)


def env_secrets(
    environ: Mapping[str, str] | None = None, keys: Sequence[str] = DEFAULT_REDACT_PATTERNS
) -> frozenset[str]:
    """The values of environment variables whose names look secret (``DB_PASS``, ``HF_TOKEN``,
    ``AWS_SECRET_ACCESS_KEY`` ...), 6 characters or longer; an existing path is no secret."""
    env = os.environ if environ is None else environ
    compiled = compact_patterns(tuple(keys))
    found: set[str] = set()
    for name, value in env.items():
        if name.upper() in _ENV_NOT_SECRET or len(value) < MIN_SCRUB_LENGTH:
            continue
        if not (_ENV_NAME.search(name) or is_secret_name(name, compiled)):
            continue
        if os.sep in value and os.path.exists(value):  # SSH_AUTH_SOCK and the like
            continue
        found.add(value)
    return frozenset(found)


__all__ = [
    "DEFAULT_REDACT_PATTERNS",
    "MIN_SCRUB_LENGTH",
    "REDACTED",
    "compact_patterns",
    "env_secrets",
    "is_secret_key",
    "is_secret_name",
]
