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
   values in the others (:func:`redact_diff`), line for line so the rest still applies.

URL credentials and value patterns apply even when the key pattern list is empty. Every
pattern reads its text once (possessive repeats, anchored starts): redaction is linear.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

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
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
# a base64 run in a key block; a diff line keeps its leading "+", "-" or " "
_BASE64_RUN = re.compile(r"(?P<lead>^[+\- ]|)[A-Za-z0-9+/=]{8,}+", re.MULTILINE)
# secret-looking environment variable names beyond the key patterns (DB_PASS, GH_PAT ...)
_ENV_NAME = re.compile(
    r"(?:^|_)(?:PASS|PASSPHRASE|PWD|PAT|KEY|DSN|COOKIE|SESSION)(?:_|$)", re.IGNORECASE
)
_ENV_NOT_SECRET = frozenset({"PWD", "OLDPWD"})


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
        return _compiled_policy(_compile(self.keys), self.values)


@dataclasses.dataclass(frozen=True)
class _Compiled:
    keys: tuple[str, ...]
    user: tuple[re.Pattern[str], ...]


@functools.lru_cache(maxsize=32)
def _compiled_policy(keys: tuple[str, ...], values: tuple[str, ...]) -> _Compiled:
    return _Compiled(keys, tuple(compile_value_pattern(v) for v in values))


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
_BUILTIN = tuple((_ANCHORS[name], re.compile(pattern)) for name, pattern in VALUE_PATTERNS)


def as_policy(patterns: Sequence[str] | RedactPolicy) -> RedactPolicy:
    """``patterns`` as a policy: a plain sequence is the key patterns, everything else default."""
    if isinstance(patterns, RedactPolicy):
        return patterns
    return RedactPolicy(keys=tuple(patterns))


def env_secrets(
    environ: Mapping[str, str] | None = None, keys: Sequence[str] = DEFAULT_REDACT_PATTERNS
) -> frozenset[str]:
    """The values of environment variables whose names look secret (``DB_PASS``, ``HF_TOKEN``,
    ``AWS_SECRET_ACCESS_KEY`` ...), 6 characters or longer; an existing path is no secret."""
    env = os.environ if environ is None else environ
    compiled = _compile(tuple(keys))
    found: set[str] = set()
    for name, value in env.items():
        if name.upper() in _ENV_NOT_SECRET or len(value) < MIN_SCRUB_LENGTH:
            continue
        if not (_ENV_NAME.search(name) or _is_secret(name, compiled)):
            continue
        if os.sep in value and os.path.exists(value):  # SSH_AUTH_SOCK and the like
            continue
        found.add(value)
    return frozenset(found)


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
        text = _redact_pem(text)
    low = text.lower()
    for anchors, pattern in _BUILTIN:
        if any(anchor in low for anchor in anchors):
            text = pattern.sub(_replace_secret, text)
    for pattern in compiled.user:
        text = pattern.sub(_replace_secret, text)
    if compiled.keys and ("=" in text or ":" in text):
        text = _redact_assignments(text, compiled.keys)
    return text


def _replace_secret(match: re.Match[str]) -> str:
    if "secret" not in match.re.groupindex or match.start("secret") < 0:
        return REDACTED
    start, end = match.span("secret")
    if match[0][start - match.start() : end - match.start()] == REDACTED:
        return match[0]
    whole = match[0]
    return f"{whole[: start - match.start()]}{REDACTED}{whole[end - match.start() :]}"


def _redact_assignments(text: str, keys: tuple[str, ...]) -> str:
    def replace(match: re.Match[str]) -> str:
        value = match["value"]
        bare = value.strip().strip("\"'")
        if not bare or bare == REDACTED or not _is_secret(match["key"], keys):
            return match[0]
        quote = value[0] if value[:1] in ("'", '"') and value[-1:] == value[0] else ""
        head = match[0][: match.start("value") - match.start()]
        return f"{head}{quote}{REDACTED}{quote}"

    return _ASSIGN.sub(replace, _LINE_ASSIGN.sub(replace, text))


def _redact_pem(text: str) -> str:
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
            if _is_secret(str(key), compiled.keys):
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
    return _redact_urls(text, _compile(tuple(patterns)))


def _redact_urls(text: str, compiled: tuple[str, ...]) -> str:
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


def override_secrets(overrides: Iterable[str], patterns: Sequence[str] | RedactPolicy) -> set[str]:
    """The values given on the command line for secret keys (``db.password=x`` → ``{"x"}``),
    also inside dict values (``db={host:h,password:x}``)."""
    compiled = _compile(as_policy(patterns).keys)
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
        elif _is_secret(parts[1], compiled.keys):
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
        if flag is not None and _is_secret(flag["name"], compiled.keys):
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


__all__ = [
    "DEFAULT_REDACT_FILES",
    "DEFAULT_REDACT_PATTERNS",
    "DIFF_NOTE",
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
    "redact_diff",
    "redact_overrides",
    "redact_urls",
    "scrub_text",
    "strip_url_credentials",
]
