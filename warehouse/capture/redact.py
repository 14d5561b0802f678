"""Secret redaction: what may never reach a record, a store or a log.

Three rules, applied before a config, an override list or a git remote is recorded:

1. **Keys.** A mapping key that *looks like* a secret (it contains one of the configured
   patterns: ``password``, ``token``, ``api_key`` ...) gets the value :data:`REDACTED`, whole
   subtree included. Matching ignores case and the separators ``_ - . space``, so the pattern
   ``api_key`` matches ``API_KEY``, ``apiKey``, ``api-key`` and ``db.api_key`` alike. A few ML
   words that merely contain a pattern are *not* secrets and are left alone: ``tokenizer``
   (``tokenize``, ``tokenization`` ...), counts of tokens (``max_tokens``, ``num_tokens``,
   ``max_new_tokens``, ``special_tokens``, ``tokens_per_s`` ...) and ``author``/``authors``.
   ``hf_token``, ``GITHUB_TOKENS``, ``authorization`` and ``oauth`` stay secret.
2. **URLs.** Credentials inside URLs in string values are replaced: a ``user:password@`` part
   always (``postgres://u:pw@h/db`` → ``postgres://***@h/db``), a bare ``user@`` only for
   http(s), where the "user" is usually a token (``https://ghp_x@github.com``); ``ssh://git@``
   and ``postgres://user@`` keep their user name. Query parameters whose name looks like a
   secret (``?token=...``, ``X-Amz-Credential=...``) get ``***`` too.
3. **Copies.** A secret string (6 characters or more) found under a secret key is also scrubbed
   from every other string of the same object, so ``dsn: "password=${db.password}"`` or a run
   directory named after the overrides does not leak it.

URL credentials are stripped even when the pattern list is empty.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

REDACTED = "***"
"""What a secret value is replaced with."""

MIN_SCRUB_LENGTH = 6
"""Secrets shorter than this are redacted under their key only, not searched for elsewhere."""

_SEPARATORS = re.compile(r"[\s_.\-]+")
# Words that contain a pattern but name no secret; replaced by a word break before matching.
_NOT_SECRET = re.compile(
    r"tokeni[sz][a-z]*"  # tokenizer, tokenize, tokenized, tokenization, tokenizers
    r"|(?:max|min|num|n|new|total|special|input|output|prompt|context|extra|pad|bos|eos)"
    r"[_\-. ]?tokens?(?![a-z])"  # max_tokens, max_new_tokens, num_tokens, special_tokens
    r"|tokens?[_\-. ]?per[_\-. ]?[a-z]*"  # tokens_per_s, tokens_per_batch
    r"|author(?:s(?![a-z])|(?![a-z]))"  # author, authors (not authorization, authority)
)
# Possessive repeats (``*+``) never give characters back: a match attempt reads each character
# at most once, so redaction stays linear however long and odd the text (no backtracking).
# A URL's scheme and authority; the credentials are what precedes the authority's last '@'.
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]{0,31})://(?P<authority>[^/\s?#]*+)")
_QUERY_PARAM = re.compile(r"(?P<sep>[?&;])(?P<name>[^=&;#\s]++)=(?P<value>[^&;#\s]*+)")
_TOKEN_USER_SCHEMES = frozenset({"http", "https", "ftp", "ftps", "ws", "wss"})


def is_secret_key(key: object, patterns: Sequence[str]) -> bool:
    """Whether a mapping key looks like it holds a secret under ``patterns``."""
    return _is_secret(str(key), _compile(tuple(patterns)))


@functools.lru_cache(maxsize=64)
def _compile(patterns: tuple[str, ...]) -> tuple[str, ...]:
    compact = (_SEPARATORS.sub("", p.lower()) for p in patterns)
    return tuple(sorted({p for p in compact if p}))


@functools.lru_cache(maxsize=16_384)
def _is_secret(key: str, compact_patterns: tuple[str, ...]) -> bool:
    if not compact_patterns:
        return False
    text = _NOT_SECRET.sub("|", key.lower())
    text = _SEPARATORS.sub("", text)
    return any(p in text for p in compact_patterns)


def redact_config(
    obj: Any,
    patterns: Sequence[str],
    *,
    secrets: Iterable[str] = (),
    found_into: set[str] | None = None,
) -> Any:
    """A deep copy of ``obj`` with secret keys, URL credentials and copies of secrets redacted.

    ``obj`` is walked through mappings (copied to ``dict``) and lists/tuples (copied to
    ``list``); other values are returned as they are. ``secrets`` are further strings to
    scrub wherever they occur (e.g. values given on the command line for a secret key).
    ``found_into`` receives the secret strings found, so text made later (an error message
    quoting ``cfg.db.password``) can be scrubbed with :func:`scrub_text`.
    """
    compiled = _compile(tuple(patterns))
    found: set[str] = {s for s in secrets if len(s) >= MIN_SCRUB_LENGTH}
    redacted = _redact(obj, compiled, found, set())
    if found:
        ordered = sorted(found, key=len, reverse=True)  # longest first: no partial leftovers
        redacted = _scrub(redacted, ordered)
    if found_into is not None:
        found_into.update(found)
    return redacted


def scrub_text(text: str, secrets: Iterable[str], patterns: Sequence[str] = ()) -> str:
    """Free text (an error message, a traceback) without URL credentials or known secrets."""
    ordered = sorted((s for s in secrets if len(s) >= MIN_SCRUB_LENGTH), key=len, reverse=True)
    return _scrub_text(redact_urls(text, patterns), ordered)


def _redact(obj: Any, patterns: tuple[str, ...], found: set[str], path: set[int]) -> Any:
    if isinstance(obj, str):
        return redact_urls(obj, patterns) if "://" in obj else obj
    if isinstance(obj, Mapping):
        if id(obj) in path:
            return "<cycle>"
        path.add(id(obj))
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            if _is_secret(str(key), patterns):
                _collect(value, found)
                out[key] = REDACTED
            else:
                out[key] = _redact(value, patterns, found, path)
        path.discard(id(obj))
        return out
    if isinstance(obj, list | tuple):
        if id(obj) in path:
            return "<cycle>"
        path.add(id(obj))
        items = [_redact(item, patterns, found, path) for item in obj]
        path.discard(id(obj))
        return items
    return obj


def _collect(value: Any, found: set[str]) -> None:
    """Remember the string leaves of a redacted subtree, to scrub their copies elsewhere."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) >= MIN_SCRUB_LENGTH and item != REDACTED:
                found.add(item)
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)


def _scrub_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _scrub(obj: Any, secrets: list[str]) -> Any:
    if isinstance(obj, str):
        return _scrub_text(obj, secrets)
    if isinstance(obj, dict):
        return {key: _scrub(value, secrets) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_scrub(item, secrets) for item in obj]
    return obj


def redact_urls(text: str, patterns: Sequence[str] = ()) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``."""
    if "://" not in text:
        return text
    compiled = _compile(tuple(patterns))

    def userinfo(match: re.Match[str]) -> str:
        scheme, (info, host) = match["scheme"], _split_authority(match["authority"])
        if info is not None and (":" in info or scheme.lower() in _TOKEN_USER_SCHEMES):
            return f"{scheme}://{REDACTED}@{host}"
        return match.group(0)

    text = _URL.sub(userinfo, text)
    if compiled and ("?" in text):

        def param(match: re.Match[str]) -> str:
            if match["value"] and _is_secret(match["name"], compiled):
                return f"{match['sep']}{match['name']}={REDACTED}"
            return match.group(0)

        text = _QUERY_PARAM.sub(param, text)
    return text


def _split_authority(authority: str) -> tuple[str | None, str]:
    """``("user:pw", "host:port")`` for ``user:pw@host:port``; ``(None, authority)`` without
    credentials. A password may itself hold ``@``: the host follows the last one."""
    info, at, host = authority.rpartition("@")
    return (info, host) if at else (None, authority)


def strip_url_credentials(url: str) -> str:
    """A URL without its credentials: ``https://u:tok@github.com/x.git`` → ``https://github.com/x.git``.

    For http(s) the whole ``user[:password]@`` goes; for other schemes only a password does
    (``ssh://git@host/x.git`` keeps ``git@``). scp-style remotes (``git@github.com:x/y.git``)
    have no secret and are returned unchanged.
    """

    def userinfo(match: re.Match[str]) -> str:
        scheme, (info, host) = match["scheme"], _split_authority(match["authority"])
        if info is None:
            return match.group(0)
        if scheme.lower() in _TOKEN_USER_SCHEMES:
            return f"{scheme}://{host}"
        user, sep, _password = info.partition(":")
        if not sep:
            return match.group(0)  # a bare user name (ssh://git@...) is no secret
        return f"{scheme}://{user}@{host}" if user else f"{scheme}://{host}"

    return _URL.sub(userinfo, url)


def _override_parts(override: str) -> tuple[str, str, str] | None:
    """``"+db.password=x"`` → ``("+", "db.password", "x")``; None when it has no value."""
    key, sep, value = override.partition("=")
    if not sep:
        return None
    stripped = key.lstrip("+~")
    return key[: len(key) - len(stripped)], stripped, value


# ``key: value`` inside a Hydra dict value (``db={host:h,password:'x y'}``); a nested dict's
# key (``db:{...``) has no plain value and is skipped, its own keys are matched in turn.
_DICT_ITEM = re.compile(
    r"(?P<key>[A-Za-z_$][\w.\-$]*)\s*:\s*"
    r"(?P<value>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,{}\[\]\s][^,{}\[\]]*)"
)


def override_secrets(overrides: Iterable[str], patterns: Sequence[str]) -> set[str]:
    """The values given on the command line for secret keys (``db.password=x`` → ``{"x"}``),
    also inside dict values (``db={host:h,password:x}``)."""
    compiled = _compile(tuple(patterns))
    found: set[str] = set()
    for override in overrides:
        parts = _override_parts(override)
        if parts is None or not parts[2]:
            continue
        if _is_secret(parts[1], compiled):
            found.add(parts[2].strip("'\""))
        elif "{" in parts[2]:
            for item in _DICT_ITEM.finditer(parts[2]):
                if _is_secret(item["key"], compiled):
                    found.add(item["value"].strip().strip("'\""))
    return found


def _redact_dict_value(value: str, compiled: tuple[str, ...]) -> str:
    """A Hydra dict value with its secret keys' values hidden."""

    def item(match: re.Match[str]) -> str:
        if _is_secret(match["key"], compiled):
            return f"{match.group(0)[: match.start('value') - match.start()]}{REDACTED}"
        return match.group(0)

    return _DICT_ITEM.sub(item, value)


def redact_overrides(overrides: Iterable[str], patterns: Sequence[str]) -> list[str]:
    """Hydra overrides with secret values hidden: ``db.password=x`` → ``db.password=***``."""
    compiled = _compile(tuple(patterns))
    items = list(overrides)
    out = []
    for override in items:
        parts = _override_parts(override)
        if parts is None:
            out.append(override)
        elif _is_secret(parts[1], compiled):
            out.append(f"{parts[0]}{parts[1]}={REDACTED}")
        else:
            value = redact_urls(parts[2], patterns)
            if "{" in value:
                value = _redact_dict_value(value, compiled)
            out.append(f"{parts[0]}{parts[1]}={value}")
    found = override_secrets(items, patterns)
    secrets = sorted((s for s in found if len(s) >= MIN_SCRUB_LENGTH), key=len, reverse=True)
    return [_scrub_text(item, secrets) for item in out]


__all__ = [
    "MIN_SCRUB_LENGTH",
    "REDACTED",
    "is_secret_key",
    "override_secrets",
    "redact_config",
    "redact_overrides",
    "redact_urls",
    "scrub_text",
    "strip_url_credentials",
]
