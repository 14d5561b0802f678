"""Secret redaction: what may never reach a record, a store, a log or the console.

Every text the warehouse records passes through one :class:`RedactPolicy` (built from the
settings by ``Settings.redaction``): configs, params, overrides, Hydra job info, tags, error
messages and tracebacks, ``warehouse watch``'s command line and the git diff. Its rules:

1. **Keys.** A mapping key that *looks like* a secret (it contains one of the configured
   patterns: ``password``, ``token``, ``api_key`` ...) gets the value :data:`REDACTED`, whole
   subtree included. Matching ignores case and the separators ``_ - . space``, so the pattern
   ``api_key`` matches ``API_KEY``, ``apiKey``, ``api-key`` and ``db.api_key`` alike. A few ML
   words that merely contain a pattern are *not* secrets and are left alone: ``tokenizer``
   (``tokenize``, ``tokenization`` ...), counts of tokens (``max_tokens``, ``num_tokens``,
   ``max_new_tokens``, ``special_tokens``, ``tokens_per_s`` ...) and ``author``/``authors``.
   ``hf_token``, ``GITHUB_TOKENS``, ``authorization`` and ``oauth`` stay secret. The same keys
   are recognised inside text: ``password=x``, ``"api_key": "x"``, ``Password=x;`` and a
   ``token: x`` line all lose their value.
2. **URLs.** Credentials inside URLs in string values are replaced: a ``user:password@`` part
   always (``postgres://u:pw@h/db`` → ``postgres://***@h/db``), a bare ``user@`` only for
   http(s), where the "user" is usually a token (``https://ghp_x@github.com``); ``ssh://git@``
   and ``postgres://user@`` keep their user name. Query parameters whose name looks like a
   secret (``?token=...``, ``X-Amz-Credential=...``) get ``***`` too.
3. **Values.** Strings that look like secrets whatever their key (:data:`VALUE_PATTERNS`:
   ``Bearer`` tokens, ``sk_live_``/``hf_``/``ghp_`` tokens, AWS keys, JWTs, cookies, PEM/SSH
   private key blocks ...) are replaced, plus any regex the user adds
   (``WAREHOUSE_REDACT_VALUE_PATTERNS``; a group named ``secret`` limits what is replaced).
4. **Copies.** A secret string (6 characters or more) found under a secret key is also scrubbed
   from every other string of the same object, so ``dsn: "password=${db.password}"`` or a run
   directory named after the overrides does not leak it. The values of environment variables
   whose names look secret (``DB_PASS``, ``HF_TOKEN`` ...) are scrubbed the same way.
5. **Files.** A git diff loses the changes of files whose names look secret (``.env*``,
   ``*.pem``, ``*credentials*``, ``id_*`` ...: :data:`DEFAULT_REDACT_FILES`) and the secret
   values in the others, line for line so the rest still applies
   (:func:`warehouse.capture.redact_diff.redact_diff`).

URL credentials and value patterns apply even when the key pattern list is empty. Every
pattern reads its text once (possessive repeats, anchored starts): redaction is linear.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from warehouse.capture.secret_keys import (
    DEFAULT_REDACT_PATTERNS,
    MIN_SCRUB_LENGTH,
    REDACTED,
    compact_patterns,
    env_secrets,
    is_secret_key,
    is_secret_name,
)
from warehouse.capture.secret_values import (
    BUILTIN_PATTERNS,
    VALUE_PATTERNS,
    compile_value_pattern,
    redact_pem,
    replace_secret,
)

DEFAULT_REDACT_FILES = (
    ".env*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*credentials*",
    "id_*",
    ".netrc",
    ".pgpass",
)
"""File name globs (case-insensitive, on the base name) whose diffs are never recorded."""

# Possessive repeats (``*+``) never give characters back: a match attempt reads each character
# at most once, so redaction stays linear however long and odd the text (no backtracking).
# A URL's scheme and authority; the credentials are what precedes the authority's last '@'.
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]{0,31})://(?P<authority>[^/\s?#]*+)")
_QUERY_PARAM = re.compile(r"(?P<sep>[?&;])(?P<name>[^=&;#\s]++)=(?P<value>[^&;#\s]*+)")
_TOKEN_USER_SCHEMES = frozenset({"http", "https", "ftp", "ftps", "ws", "wss"})
# ``key=value`` / ``"key": "value"`` inside text; starts only where a word starts (linear).
_ASSIGN = re.compile(
    r"(?<![\w.\-])(?P<key>[A-Za-z_][\w.\-]*+)(?P<mid>[\"']?[ \t]*+[:=][ \t]*+)"
    r"(?P<value>\"[^\"\n]*+\"|'[^'\n]*+'|[^\s,;&\"'}\])]++)"
)
# a whole ``key: value`` line (YAML, .env, Python, a diff line): the rest of the line goes
_LINE_ASSIGN = re.compile(
    r"^(?P<lead>[ \t]*+(?:[-+][ \t]*+){0,2}(?:export[ \t]++)?[\"']?)"
    r"(?P<key>[A-Za-z_][\w.\-]*+)(?P<mid>[\"']?[ \t]*+[:=][ \t]*+)(?P<value>[^\n]++)",
    re.MULTILINE,
)
# the built-in value patterns with their anchor words, read through this module's name
_BUILTIN = BUILTIN_PATTERNS


@dataclasses.dataclass(frozen=True)
class RedactPolicy:
    """Everything redaction needs: key patterns, extra value regexes, secret file globs and
    literal secrets (e.g. the values of secret environment variables) to scrub anywhere."""

    keys: tuple[str, ...] = DEFAULT_REDACT_PATTERNS
    values: tuple[str, ...] = ()
    files: tuple[str, ...] = DEFAULT_REDACT_FILES
    secrets: frozenset[str] = frozenset()

    @classmethod
    def from_environment(
        cls,
        keys: Sequence[str] = DEFAULT_REDACT_PATTERNS,
        values: Sequence[str] = (),
        files: Sequence[str] = DEFAULT_REDACT_FILES,
        environ: Mapping[str, str] | None = None,
    ) -> RedactPolicy:
        """A policy that also scrubs the values of secret-looking environment variables."""
        keys = tuple(keys)
        return cls(keys, tuple(values), tuple(files), env_secrets(environ, keys))

    def with_secrets(self, more: Iterable[str]) -> RedactPolicy:
        """This policy scrubbing ``more`` literal strings too."""
        extra = frozenset(more) - self.secrets
        return dataclasses.replace(self, secrets=self.secrets | extra) if extra else self

    def text(self, text: str, secrets: Iterable[str] = ()) -> str:
        """Free text (an error, a traceback, a tag, a diff) with every secret in it replaced.

        Line structure is kept: no replacement spans a line break."""
        ordered = _ordered_secrets((*self.secrets, *secrets))
        return _scrub_value(_scrub_text(text, ordered), self._compiled())

    def is_secret_file(self, path: str) -> bool:
        """Whether a file's name (not its folder) matches one of the secret file globs."""
        name = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
        return any(fnmatch.fnmatchcase(name, glob.lower()) for glob in self.files)

    def _compiled(self) -> _Compiled:
        return _compiled_policy(compact_patterns(self.keys), self.values)


@dataclasses.dataclass(frozen=True)
class _Compiled:
    keys: tuple[str, ...]
    user: tuple[re.Pattern[str], ...]


@functools.lru_cache(maxsize=32)
def _compiled_policy(keys: tuple[str, ...], values: tuple[str, ...]) -> _Compiled:
    return _Compiled(keys, tuple(compile_value_pattern(v) for v in values))


def as_policy(patterns: Sequence[str] | RedactPolicy) -> RedactPolicy:
    """``patterns`` as a policy: a plain sequence is the key patterns, everything else default."""
    if isinstance(patterns, RedactPolicy):
        return patterns
    return RedactPolicy(keys=tuple(patterns))


def _ordered_secrets(secrets: Iterable[str]) -> list[str]:
    """Literal secrets to scrub, longest first; a multi-line secret by its lines."""
    pieces: set[str] = set()
    for secret in secrets:
        if secret == REDACTED:
            continue
        if "\n" in secret:
            pieces.update(line.strip() for line in secret.splitlines())
        else:
            pieces.add(secret)
    return sorted((p for p in pieces if len(p) >= MIN_SCRUB_LENGTH), key=len, reverse=True)


def _scrub_value(text: str, compiled: _Compiled) -> str:
    """URL credentials, private key blocks, secret-looking values and ``key=value`` pairs."""
    if len(text) < MIN_SCRUB_LENGTH:
        return text
    if "://" in text:
        text = _redact_urls(text, compiled.keys)
    if "PRIVATE KEY" in text:
        text = redact_pem(text)
    low = text.lower()
    for anchors, pattern in _BUILTIN:
        if any(anchor in low for anchor in anchors):
            text = pattern.sub(replace_secret, text)
    for pattern in compiled.user:
        text = pattern.sub(replace_secret, text)
    if compiled.keys and ("=" in text or ":" in text):
        text = _redact_assignments(text, compiled.keys)
    return text


def _redact_assignments(text: str, keys: tuple[str, ...]) -> str:
    def replace(match: re.Match[str]) -> str:
        value = match["value"]
        bare = value.strip().strip("\"'")
        if not bare or bare == REDACTED or not is_secret_name(match["key"], keys):
            return match[0]
        quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[0] else ""
        head = match[0][: match.start("value") - match.start()]
        return f"{head}{quote}{REDACTED}{quote}"

    return _ASSIGN.sub(replace, _LINE_ASSIGN.sub(replace, text))


def redact_config(
    obj: Any,
    patterns: Sequence[str] | RedactPolicy,
    *,
    secrets: Iterable[str] = (),
    found_into: set[str] | None = None,
) -> Any:
    """A deep copy of ``obj`` with secret keys, URL credentials, secret-looking values and
    copies of secrets redacted.

    ``obj`` is walked through mappings (copied to ``dict``) and lists/tuples (copied to
    ``list``); other values are returned as they are. ``patterns``: the key patterns, or a
    whole :class:`RedactPolicy`. ``secrets`` are further strings to scrub wherever they occur
    (e.g. values given on the command line for a secret key). ``found_into`` receives the
    secret strings found, so text made later (an error message quoting ``cfg.db.password``)
    can be scrubbed with :func:`scrub_text`.
    """
    policy = as_policy(patterns)
    compiled = policy._compiled()
    found: set[str] = {s for s in secrets if len(s) >= MIN_SCRUB_LENGTH}
    redacted = _redact(obj, compiled, found, set())
    literal = _ordered_secrets(found | policy.secrets)
    if literal:
        redacted = _scrub(redacted, literal)
    if found_into is not None:
        found_into.update(found)
    return redacted


def scrub_text(
    text: str, secrets: Iterable[str], patterns: Sequence[str] | RedactPolicy = ()
) -> str:
    """Free text (an error message, a traceback) without URL credentials, known secrets and
    secret-looking values."""
    return as_policy(patterns).text(text, secrets)


def _redact(obj: Any, compiled: _Compiled, found: set[str], path: set[int]) -> Any:
    if isinstance(obj, str):
        return _scrub_value(obj, compiled)
    if isinstance(obj, Mapping):
        if id(obj) in path:
            return "<cycle>"
        path.add(id(obj))
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            if is_secret_name(str(key), compiled.keys):
                _collect(value, found)
                out[key] = REDACTED
            else:
                out[key] = _redact(value, compiled, found, path)
        path.discard(id(obj))
        return out
    if isinstance(obj, list | tuple):
        if id(obj) in path:
            return "<cycle>"
        path.add(id(obj))
        items = [_redact(item, compiled, found, path) for item in obj]
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
    return _redact_urls(text, compact_patterns(tuple(patterns)))


def _redact_urls(text: str, compiled: tuple[str, ...]) -> str:
    def userinfo(match: re.Match[str]) -> str:
        scheme, (info, host) = match["scheme"], _split_authority(match["authority"])
        if info is not None and (":" in info or scheme.lower() in _TOKEN_USER_SCHEMES):
            return f"{scheme}://{REDACTED}@{host}"
        return match.group(0)

    text = _URL.sub(userinfo, text)
    if compiled and ("?" in text):

        def param(match: re.Match[str]) -> str:
            if match["value"] and is_secret_name(match["name"], compiled):
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


def override_secrets(overrides: Iterable[str], patterns: Sequence[str] | RedactPolicy) -> set[str]:
    """The values given on the command line for secret keys (``db.password=x`` → ``{"x"}``),
    also inside dict values (``db={host:h,password:x}``)."""
    compiled = compact_patterns(as_policy(patterns).keys)
    found: set[str] = set()
    for override in overrides:
        parts = _override_parts(override)
        if parts is None or not parts[2]:
            continue
        if is_secret_name(parts[1], compiled):
            found.add(parts[2].strip("'\""))
        elif "{" in parts[2]:
            for item in _DICT_ITEM.finditer(parts[2]):
                if is_secret_name(item["key"], compiled):
                    found.add(item["value"].strip().strip("'\""))
    return found


def _redact_dict_value(value: str, compiled: tuple[str, ...]) -> str:
    """A Hydra dict value with its secret keys' values hidden."""

    def item(match: re.Match[str]) -> str:
        if is_secret_name(match["key"], compiled):
            return f"{match.group(0)[: match.start('value') - match.start()]}{REDACTED}"
        return match.group(0)

    return _DICT_ITEM.sub(item, value)


def redact_overrides(overrides: Iterable[str], patterns: Sequence[str] | RedactPolicy) -> list[str]:
    """Hydra overrides, as typed, with secret values hidden: ``db.password=x`` →
    ``db.password=***``; secret-looking values (``+note=hf_...``) and URL credentials too.
    An interpolation (``+note=${db.password}``) is kept as typed: it names, not holds, a value.
    """
    policy = as_policy(patterns)
    compiled = policy._compiled()
    items = list(overrides)
    out = []
    for override in items:
        parts = _override_parts(override)
        if parts is None:
            out.append(_scrub_value(override, compiled))
        elif is_secret_name(parts[1], compiled.keys):
            out.append(f"{parts[0]}{parts[1]}={REDACTED}")
        else:
            value = _scrub_value(parts[2], compiled)
            if "{" in value:
                value = _redact_dict_value(value, compiled.keys)
            out.append(f"{parts[0]}{parts[1]}={value}")
    secrets = _ordered_secrets(override_secrets(items, policy) | policy.secrets)
    return [_scrub_text(item, secrets) for item in out]


_FLAG = re.compile(r"(?P<dashes>--?)(?P<name>[A-Za-z][\w.\-]*+)(?:(?P<eq>=)(?P<value>.*+))?", re.S)


def redact_command(argv: Sequence[str], patterns: Sequence[str] | RedactPolicy) -> list[str]:
    """A command line with the values of secret-looking flags hidden (``--password X``,
    ``--api-key=Y``, ``db.password=Z``), those values scrubbed from every other argument, and
    each argument redacted as text (URL credentials, secret-looking values)."""
    policy = as_policy(patterns)
    compiled = policy._compiled()
    args = [str(a) for a in argv]
    out: list[str] = []
    found: set[str] = set()
    hide_next = False
    for index, arg in enumerate(args):
        if hide_next:
            hide_next = False
            found.add(arg)
            out.append(REDACTED)
            continue
        flag = _FLAG.fullmatch(arg) if index > 0 else None
        if flag is not None and is_secret_name(flag["name"], compiled.keys):
            if flag["eq"]:
                found.add(flag["value"])
                out.append(f"{flag['dashes']}{flag['name']}={REDACTED}")
                continue
            following = args[index + 1] if index + 1 < len(args) else None
            hide_next = following is not None and not _looks_like_flag(following)
            out.append(arg)
            continue
        out.append(arg)
    found |= override_secrets(out[1:], policy)
    return [out[0], *redact_overrides(out[1:], policy.with_secrets(found))] if out else []


def _looks_like_flag(arg: str) -> bool:
    return arg.startswith("-") and len(arg) > 1 and not arg[1:2].isdigit()


__all__ = [
    "DEFAULT_REDACT_FILES",
    "DEFAULT_REDACT_PATTERNS",
    "MIN_SCRUB_LENGTH",
    "REDACTED",
    "VALUE_PATTERNS",
    "RedactPolicy",
    "as_policy",
    "compile_value_pattern",
    "env_secrets",
    "is_secret_key",
    "override_secrets",
    "redact_command",
    "redact_config",
    "redact_overrides",
    "redact_urls",
    "scrub_text",
    "strip_url_credentials",
]
