"""Secret keys: which names (mapping keys, flags, environment variables) hold a secret.

A key looks secret when it contains one of the key patterns (:data:`DEFAULT_REDACT_PATTERNS`),
ignoring case and the separators ``_ - . space``. A few ML words that merely contain a pattern
do not count, each only where a word starts (the key is split into words at separators and
camelCase humps, ``maxNewTokens`` → ``max new tokens``):

- ``tokenizer``, ``tokenize``, ``tokenization`` ...;
- a count or size word followed by ``token(s)``: ``max_tokens``, ``num_tokens``,
  ``max_new_tokens``, ``prompt_tokens`` (:data:`COUNT_WORDS`);
- ``token(s)`` followed by a count or size noun: ``tokens_per_s``, ``token_count``,
  ``token_ids`` (:data:`TOKEN_NOUNS`);
- ``author``, ``authors``.

Three short words name a secret only as a whole word (:data:`SECRET_WORDS`: ``db_pass``,
``smtp.pwd``, ``passphrase``; as patterns they would match ``bypass`` and ``num_passes``), and
three only when the value is a random-looking token (:data:`WEAK_WORDS`, the key's last word:
``key: 5d558df9...`` as in ``kaggle.json``, ``subscription_key``, ``sig``; ``sort_key: val_acc``
is no secret). A ``key`` after a word of :data:`KEY_ROLES` (``signing_key``, ``hmacKey``,
``license_key``) and a last word of :data:`SECRET_LAST_WORDS` (``bearer``, ``jwt``) name a
secret whatever the value.

So ``session_token``, ``login_token`` and ``admin_token`` are secret (``n_token`` inside them
is no word), while ``max_tokens`` is not. See :mod:`warehouse.capture.redact` for the whole
redaction policy.
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

COUNT_WORDS = (
    "max",
    "min",
    "num",
    "n",
    "new",
    "total",
    "special",
    "added",
    "input",
    "output",
    "prompt",
    "completion",
    "generated",
    "cached",
    "context",
    "extra",
    "pad",
    "bos",
    "eos",
    "unk",
    "sep",
    "cls",
    "mask",
    "train",
    "eval",
)
"""Words that make a following ``token(s)`` a count or a vocabulary entry: ``max_tokens``."""

TOKEN_NOUNS = (
    "per",
    "count",
    "counts",
    "len",
    "length",
    "size",
    "limit",
    "budget",
    "id",
    "ids",
    "type",
    "types",
    "dim",
    "index",
    "usage",
    "seen",
    "file",
    "files",
    "path",
    "dir",
)
"""Words that make a preceding ``token(s)`` a count, a vocabulary entry or a place:
``token_ids``, ``tokens_file``."""

SECRET_WORDS = frozenset({"pass", "pwd", "passphrase"})
"""Words of a key that name a secret as whole words only (applied with any key patterns)."""

WEAK_WORDS = frozenset({"key", "sig", "signature"})
"""A key's last word that names a secret only when its value looks random."""

SECRET_LAST_WORDS = frozenset({"bearer", "jwt"})
"""A key's last word that names a secret whatever its value (``auth_bearer``, ``jwt``)."""

KEY_ROLES = frozenset(
    {
        *("signing", "sign", "hmac", "encryption", "encrypt", "decryption", "decrypt"),
        *("master", "license", "licence", "secret", "private", "access", "api", "client"),
        *("ssh", "gpg", "pgp", "aes", "crypto", "cipher", "session", "account"),
        *("subscription", "service", "storage", "deploy", "shared", "app", "consumer"),
        *("admin", "root", "auth", "webhook", "wrapping", "kms", "vault", "jwt", "sas"),
    }
)
"""Words that make a following ``key``/``keys`` a secret (``signing_key``, ``hmacKey``);
``sort_key``, ``primary_key`` and ``cache_key`` name no secret."""

_SEPARATORS = re.compile(r"[\s_.\-]+")
# a key's words: capitals not followed by a small letter (``API`` of ``APIKey``), one capital
# and small letters (any script's), digits; everything else separates words
_WORDS = re.compile(r"[A-Z]+(?![^\W\d_A-Z])|[A-Z]?[^\W\d_A-Z]++|[0-9]++")
# word sequences that contain a pattern but name no secret, matched on the words joined by
# "_" and only where a word starts; each is replaced by a word break before matching
_NOT_SECRET = re.compile(
    r"(?:^|(?<=_))(?:"
    r"tokeni[sz][a-z]*+"  # tokenizer, tokenize, tokenized, tokenization, tokenizers
    rf"|(?:{'|'.join(COUNT_WORDS)})_?tokens?"  # max_tokens, maxtokens, max_new_tokens
    rf"|tokens?_?(?:{'|'.join(TOKEN_NOUNS)})"  # tokens_per_s, token_count, token_ids
    r"|authors?"  # author, authors (not authorization, authority)
    r")(?=_|$)"
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
    words = "_".join(_WORDS.findall(key)).lower()
    split = words.split("_")
    if not SECRET_WORDS.isdisjoint(split) or split[-1] in SECRET_LAST_WORDS:
        return True
    if len(split) > 1 and split[-1] in ("key", "keys") and split[-2] in KEY_ROLES:
        return True
    text = _NOT_SECRET.sub("|", words).replace("_", "")
    return any(p in text for p in compact)


def is_secret_env_name(name: str, compact: tuple[str, ...]) -> bool:
    """Whether an environment variable's ``name`` looks secret (``DB_PASS``, ``GH_PAT``,
    ``HF_TOKEN`` ...): the key patterns, or a word of :data:`_ENV_NAME`; never ``PWD``."""
    if name.upper() in _ENV_NOT_SECRET:
        return False
    return _ENV_NAME.search(name) is not None or is_secret_name(name, compact)


def is_secret_assignment_name(key: str, compact: tuple[str, ...]) -> bool:
    """Whether ``key`` names a secret where it is assigned: by the key patterns, and by the
    environment's rules where it ends in a name spelled like an environment variable
    (``AZURE_PAT=``, ``f1_AZURE_DEVOPS_EXT_PAT=``: the parts after the last lower-case one)."""
    if is_secret_name(key, compact):
        return True
    parts = key.split("_")
    last_lower = max((i for i, part in enumerate(parts) if not part.isupper()), default=-1)
    tail = "_".join(parts[last_lower + 1 :])
    return bool(compact) and tail.isupper() and is_secret_env_name(tail, compact)


@functools.lru_cache(maxsize=16_384)
def is_weak_secret_name(key: str) -> bool:
    """Whether ``key``'s last word is one of :data:`WEAK_WORDS` (a secret if its value looks
    random: :func:`~warehouse.capture.secret_values.is_token_value`)."""
    words = _WORDS.findall(key)
    return bool(words) and words[-1].lower() in WEAK_WORDS


def env_secrets(
    environ: Mapping[str, str] | None = None, keys: Sequence[str] = DEFAULT_REDACT_PATTERNS
) -> frozenset[str]:
    """The values of environment variables whose names look secret (``DB_PASS``, ``HF_TOKEN``,
    ``AWS_SECRET_ACCESS_KEY`` ...), 6 characters or longer; an existing path is no secret."""
    env = os.environ if environ is None else environ
    compiled = compact_patterns(tuple(keys))
    found: set[str] = set()
    for name, value in env.items():
        if len(value) < MIN_SCRUB_LENGTH or not is_secret_env_name(name, compiled):
            continue
        if os.sep in value and os.path.exists(value):  # SSH_AUTH_SOCK and the like
            continue
        found.add(value)
    return frozenset(found)


__all__ = [
    "COUNT_WORDS",
    "DEFAULT_REDACT_PATTERNS",
    "KEY_ROLES",
    "MIN_SCRUB_LENGTH",
    "REDACTED",
    "SECRET_LAST_WORDS",
    "SECRET_WORDS",
    "TOKEN_NOUNS",
    "WEAK_WORDS",
    "compact_patterns",
    "env_secrets",
    "is_secret_assignment_name",
    "is_secret_env_name",
    "is_secret_key",
    "is_secret_name",
    "is_weak_secret_name",
]
