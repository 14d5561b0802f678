"""Secret redaction: what may never reach a record, a store, a log or the console.

Every string the warehouse records passes through one :class:`RedactPolicy` (built from the
settings by ``Settings.redaction``): configs, params, overrides, Hydra job info, tags, notes,
the experiment name, metric and sample column names, error messages and tracebacks,
``warehouse watch``'s command line, the git diff, remote and commit message, the environment,
per-sample text columns (:mod:`warehouse.capture.redact_samples`) and artifact names. Its
rules:

1. **Values.** Strings that look like secrets whatever their key
   (:func:`~warehouse.capture.secret_values.find_secrets`): the shapes detect-secrets knows
   (AWS, Azure, GitHub, GitLab, Slack, npm, PyPI, OpenAI, Stripe, Twilio, JWTs, private keys
   ...), the project's own shapes where the library has none (``Authorization``/``Bearer``
   headers, cookies, connection-string passwords, Hugging Face and other ``sk-`` keys ...),
   random-looking tokens, and any regex the user adds (``WAREHOUSE_REDACT_VALUE_PATTERNS``; a
   group named ``secret`` limits what is replaced) or detect-secrets plugin the user adds
   (``WAREHOUSE_REDACT_PLUGINS``).
2. **Keys.** A mapping key that *looks like* a secret (:mod:`~warehouse.capture.secret_keys`:
   it contains ``password``, ``token``, ``api_key`` ... as configured; ``session_token`` does,
   ``max_tokens`` and ``tokenizer`` do not) gets the value :data:`REDACTED`, whole subtree
   included. The same keys are recognised inside text: ``password=x``, ``"api_key": "x"``,
   ``Password=x;``, ``failed: password=x`` and a ``token: x`` line all lose their value.
3. **URLs.** Credentials inside URLs are replaced
   (:func:`~warehouse.url_credentials.strip_url_credentials`: ``postgres://u:pw@h/db`` →
   ``postgres://***@h/db``), and so are query parameters whose name looks secret
   (``?token=...``, ``X-Amz-Credential=...``).
4. **Copies.** A secret string (6 characters or more) found under a secret key is also scrubbed
   from every other string of the same object, so ``dsn: "password=${db.password}"`` or a run
   directory named after the overrides does not leak it. The values of environment variables
   are scrubbed the same way wherever they appear, when their names look secret (``DB_PASS``,
   ``HF_TOKEN`` ...) or their values do (rule 1, hex digests included), whatever the name.
5. **Files.** A git diff loses the changes of files whose names look secret (``.env*``,
   ``*.pem``, ``*credentials*``, ``id_*`` ...: :data:`DEFAULT_REDACT_FILES`) and the secret
   values in the others, line for line so the rest still applies
   (:func:`warehouse.capture.redact_diff.redact_diff`).

Where something was replaced is recorded on the run (``redacted``: ``config.db.password``,
``tags``, ``error.message``, ``samples.val.prompt`` ...), never what. Values, URLs and copies
apply even when the key pattern list is empty. The project's own patterns read their text once
(possessive repeats, anchored starts); the library's run over windows of bounded size.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import os
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from warehouse.capture import secret_library
from warehouse.capture.secret_keys import (
    DEFAULT_REDACT_PATTERNS,
    MIN_SCRUB_LENGTH,
    REDACTED,
    compact_patterns,
    env_secrets,
    is_secret_assignment_name,
    is_secret_key,
    is_secret_name,
)
from warehouse.capture.secret_values import (
    PEM_BEGIN,
    VALUE_PATTERNS,
    command_secrets,
    compile_value_pattern,
    find_secrets,
    is_secret_pair,
    redact_pem,
    replace_spans,
)
from warehouse.url_credentials import strip_url_credentials

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

# a query parameter; its value runs over a "&" that starts no other parameter (a password
# holding "&" unencoded: ``?password=a&b&ssl=true``)
_QUERY_PARAM = re.compile(
    r"(?P<sep>[?&;])(?P<name>[^=&;#\s]++)=(?P<value>(?:[^&;#\s]|&(?![\w.\-]{1,64}+=)){0,4096}+)"
)
# query parameters that carry a signature, whatever the key patterns: a presigned S3 or GCS
# URL's, an Azure SAS's ``sig``
_SIGNATURE_PARAMS = frozenset({"sig", "signature", "x-amz-signature", "x-goog-signature"})
# ``key=value`` / ``"key": "value"`` / ``\"key\": \"value\"`` (a JSON string inside a string)
# / ``--key=value`` inside text; starts only where a word starts. The value is read ahead, not
# taken: a key that is no secret leaves its value to be read again (``failed: password=x``).
# Bounded, so a word of many ``=`` costs linear time. A quoted value may start on the next
# line (YAML folds a long ``"key": "value"`` there, a diff line's ``+`` before it). An unquoted
# value ends at a blank, at ``,;"'`` or a closing bracket, and at an ``&`` only where another
# ``name=`` follows.
_ASSIGN = re.compile(
    r"(?<![\w.])(?P<key>[A-Za-z_][\w.\-]*+)(?P<mid>\\?[\"']?[ \t]*+[:=][ \t]*+"
    r"(?:\n[+\- \t]{1,16}+(?=\\?[\"']))?+)"
    r"(?=(?P<value>\\\"(?:[^\"\\\n]|\\[^\"\n]){0,4096}+\\\"|\"[^\"\n]{0,4096}+\"|'[^'\n]{0,4096}+'"
    r"|(?:[^\s,;&\"'}\])\\]|&(?![\w.\-]{1,64}+=)){1,4096}+))"
)
# ``--key value`` inside text (a command line quoted in a log or a note), the value maybe the
# next item of a YAML list (``- --password`` then ``- value``)
_FLAG_VALUE = re.compile(
    r"(?<![\w\-])--?(?P<key>[A-Za-z][\w.\-]{0,64}+)(?:[ \t]++|[ \t]*+\n[+\- ]?[ \t]{0,16}+-[ \t]++)"
    r"(?=(?P<value>'[^'\n]{1,4096}+'|\"[^\"\n]{1,4096}+\"|(?!-)[^\s'\"]{1,4096}+))"
)
# a whole ``key: value`` line (YAML, .env, Python, a diff line): the rest of the line goes
_LINE_ASSIGN = re.compile(
    r"^(?P<lead>[ \t]*+(?:[-+][ \t]*+){0,2}(?:export[ \t]++)?(?:\\?[\"'])?)"
    r"(?P<key>[A-Za-z_][\w.\-]*+)(?P<mid>\\?[\"']?[ \t]*+[:=][ \t]*+)(?P<value>[^\n]++)",
    re.MULTILINE,
)


@dataclasses.dataclass(frozen=True)
class RedactPolicy:
    """Everything redaction needs: key patterns, extra value regexes, secret file globs, extra
    detect-secrets plugins and literal secrets (e.g. environment values) to scrub anywhere."""

    keys: tuple[str, ...] = DEFAULT_REDACT_PATTERNS
    values: tuple[str, ...] = ()
    files: tuple[str, ...] = DEFAULT_REDACT_FILES
    secrets: frozenset[str] = frozenset()
    plugins: tuple[str, ...] = ()

    @classmethod
    def from_environment(
        cls,
        keys: Sequence[str] = DEFAULT_REDACT_PATTERNS,
        values: Sequence[str] = (),
        files: Sequence[str] = DEFAULT_REDACT_FILES,
        environ: Mapping[str, str] | None = None,
        plugins: Sequence[str] = (),
    ) -> RedactPolicy:
        """A policy that also scrubs the environment's secret values (rule 4)."""
        policy = cls(tuple(keys), tuple(values), tuple(files), frozenset(), tuple(plugins))
        env = dict(os.environ if environ is None else environ)
        found = environment_secrets(tuple(sorted(env.items())), policy)
        return dataclasses.replace(policy, secrets=found)

    def with_secrets(self, more: Iterable[str]) -> RedactPolicy:
        """This policy scrubbing ``more`` literal strings too."""
        extra = frozenset(more) - self.secrets
        return dataclasses.replace(self, secrets=self.secrets | extra) if extra else self

    def text(self, text: str, secrets: Iterable[str] = ()) -> str:
        """Free text (an error, a traceback, a tag, a diff) with every secret in it replaced.

        Line structure is kept: no replacement spans a line break."""
        ordered = _ordered_secrets((*self.secrets, *secrets))
        return _scrub_value(_scrub_text(text, ordered), _compile(self))

    def is_secret_file(self, path: str) -> bool:
        """Whether a file's name (not its folder) matches one of the secret file globs."""
        name = path.replace("\\", "/").rsplit("/", 1)[-1].lower()
        return any(fnmatch.fnmatchcase(name, glob.lower()) for glob in self.files)


@dataclasses.dataclass(frozen=True)
class _Compiled:
    keys: tuple[str, ...]
    user: tuple[re.Pattern[str], ...]
    plugins: tuple[str, ...]


def _compile(policy: RedactPolicy) -> _Compiled:
    return _compiled_policy(compact_patterns(policy.keys), policy.values, policy.plugins)


@functools.lru_cache(maxsize=32)
def _compiled_policy(
    keys: tuple[str, ...], values: tuple[str, ...], plugins: tuple[str, ...]
) -> _Compiled:
    return _Compiled(keys, tuple(compile_value_pattern(v) for v in values), plugins)


@functools.lru_cache(maxsize=8)
def environment_secrets(
    environ: tuple[tuple[str, str], ...], policy: RedactPolicy
) -> frozenset[str]:
    """The environment's values to scrub wherever they appear: those of secret-looking names
    (:func:`~warehouse.capture.secret_keys.env_secrets`) and the secrets found in any value,
    whatever its name. An existing path is no secret, nor is this machine's name or user
    (a container's random host name is recorded as the run's ``host``)."""
    env = dict(environ)
    found = set(env_secrets(env, policy.keys))
    compiled = _compile(policy)
    machine = {socket.gethostname(), env.get("USER"), env.get("LOGNAME")}
    for value in env.values():
        if len(value) < MIN_SCRUB_LENGTH or value in found or value in machine:
            continue
        if os.sep in value and os.path.exists(value):
            continue
        spans = find_secrets(value, compiled.user, compiled.plugins, hex_too=True)
        found.update(value[start:end] for start, end in spans if end - start >= MIN_SCRUB_LENGTH)
        if "://" in value and strip_url_credentials(value, REDACTED) != value:
            found.add(value)
    return frozenset(found)


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
    if ("PRIVATE" in text and PEM_BEGIN.search(text) is not None) or (
        "PuTTY" in text and secret_library.has_private_key(text, compiled.plugins)
    ):
        text = redact_pem(text)
    spans = find_secrets(text, compiled.user, compiled.plugins)
    if spans:
        text = replace_spans(text, spans)
    if compiled.keys and ("=" in text or ":" in text or "-" in text):
        text = _redact_assignments(text, compiled.keys)
    return text


def _redact_assignments(text: str, keys: tuple[str, ...]) -> str:
    def line(match: re.Match[str]) -> str:
        if not is_secret_pair(match["key"], match["value"], keys):
            return match[0]
        return _hidden(match[0], match.start("value") - match.start(), match["value"])

    if "=" in text or ":" in text:
        text = _LINE_ASSIGN.sub(line, text)
        spans = [
            match.span("value")
            for match in _ASSIGN.finditer(text)
            if _worth_hiding(match["value"]) and is_secret_pair(match["key"], match["value"], keys)
        ]
    else:
        spans = []
    if "-" in text:
        spans += [
            match.span("value")
            for match in _FLAG_VALUE.finditer(text)
            if _worth_hiding(match["value"]) and is_secret_name(match["key"], keys)
        ]
        spans.sort()
    out: list[str] = []
    pos = 0
    for start, end in spans:
        if start < pos:  # inside a value already hidden
            continue
        value = text[start:end]
        out.append(text[pos:start])
        out.append(_hidden(value, 0, value))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _worth_hiding(value: str) -> bool:
    bare = value.strip().strip("\\\"'")
    return bool(bare) and bare != REDACTED


def _hidden(whole: str, at: int, value: str) -> str:
    """``whole`` with its ``value`` (starting at ``at``) replaced, its quotes kept."""
    if not _worth_hiding(value):
        return whole
    quote = ""
    if value[:2] == '\\"' and value[-2:] == '\\"' and len(value) >= 4:
        quote = '\\"'
    elif value[:1] in ("'", '"') and value[-1:] == value[0] and len(value) >= 2:
        quote = value[0]
    return f"{whole[:at]}{quote}{REDACTED}{quote}"


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
    compiled = _compile(policy)
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
            name = str(key)
            if is_secret_pair(name, value, compiled.keys):
                _collect(value, found)
                out[_clean_key(key, compiled, out)] = REDACTED
            else:
                out[_clean_key(key, compiled, out)] = _redact(value, compiled, found, path)
        path.discard(id(obj))
        return out
    if isinstance(obj, list | tuple):
        if id(obj) in path:
            return "<cycle>"
        path.add(id(obj))
        if obj and all(isinstance(item, str) for item in obj):  # maybe a command line
            args, secrets = _scrub_args(list(obj), compiled, first=0)
            found.update(secret for secret in secrets if len(secret) >= MIN_SCRUB_LENGTH)
            items = [_scrub_value(arg, compiled) for arg in args]
        else:
            items = [_redact(item, compiled, found, path) for item in obj]
        path.discard(id(obj))
        return items
    return obj


def _clean_key(key: Any, compiled: _Compiled, taken: Mapping[Any, Any]) -> Any:
    """A mapping key without secrets (a key is stored as a config path and a param name);
    one that would collide with a key already taken gets a number."""
    if not isinstance(key, str):
        return key
    clean = _scrub_value(key, compiled)
    if clean == key:
        return key
    numbered, n = clean, 1
    while numbered in taken:
        n += 1
        numbered = f"{clean}#{n}"
    return numbered


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
    """``text`` with the credentials of every URL in it, and its secret-looking query
    parameters, replaced by ``***``."""
    if "://" not in text:
        return text
    return _redact_urls(text, compact_patterns(tuple(patterns)))


def _redact_urls(text: str, compiled: tuple[str, ...]) -> str:
    text = strip_url_credentials(text, REDACTED)
    if compiled and ("?" in text):

        def param(match: re.Match[str]) -> str:
            name, value = match["name"], match["value"]
            if value and (
                name.lower() in _SIGNATURE_PARAMS or is_secret_pair(name, value, compiled)
            ):
                return f"{match['sep']}{name}={REDACTED}"
            return match.group(0)

        text = _QUERY_PARAM.sub(param, text)
    return text


# an override's key: a dotted config path, maybe with a group, a package and list indexes
_OVERRIDE_KEY = re.compile(r"[\w.\-/@$\[\]:]++")


def _override_parts(override: str) -> tuple[str, str, str] | None:
    """``"+db.password=x"`` → ``("+", "db.password", "x")``; None when it has no value or
    what precedes the ``=`` is no key (an argument that merely holds a ``=``)."""
    key, sep, value = override.partition("=")
    stripped = key.lstrip("+~")
    if not sep or _OVERRIDE_KEY.fullmatch(stripped) is None:
        return None
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
        if is_secret_assignment_name(parts[1], compiled):
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
    compiled = _compile(policy)
    items = list(overrides)
    out = []
    for override in items:
        parts = _override_parts(override)
        if parts is None:
            out.append(_scrub_value(override, compiled))
        else:
            key = _scrub_value(parts[1], compiled)  # a key may be a secret too: a tag "tok=en"
            if is_secret_assignment_name(parts[1], compiled.keys):
                value = REDACTED
            else:
                value = _scrub_value(parts[2], compiled)
                if "{" in value:
                    value = _redact_dict_value(value, compiled.keys)
            out.append(f"{parts[0]}{key}={value}")
    secrets = _ordered_secrets(override_secrets(items, policy) | policy.secrets)
    return [_scrub_text(item, secrets) for item in out]


_FLAG = re.compile(r"(?P<dashes>--?)(?P<name>[A-Za-z][\w.\-]*+)(?:(?P<eq>=)(?P<value>.*+))?", re.S)


def redact_command(argv: Sequence[str], patterns: Sequence[str] | RedactPolicy) -> list[str]:
    """A command line with the values of secret-looking flags hidden (``--password X``,
    ``--api-key=Y``, ``db.password=Z``), the passwords known tools take without a key name
    (``mysql -pX``, ``curl -u user:X``, ``sshpass -p X``, ``wandb login X``), those values
    scrubbed from every other argument, and each argument redacted as text (URL credentials,
    secret-looking values)."""
    policy = as_policy(patterns)
    compiled = _compile(policy)
    out, found = _scrub_args([str(a) for a in argv], compiled, first=1)
    found |= override_secrets(out[1:], policy)
    return [out[0], *redact_overrides(out[1:], policy.with_secrets(found))] if out else []


def _scrub_args(args: list[str], compiled: _Compiled, *, first: int) -> tuple[list[str], set[str]]:
    """``args`` (a command line, or a list of strings that may be one) with the argument after
    a secret flag from index ``first`` on (``--password X``) and the passwords the known tools'
    rules find in the joined line replaced; the secrets found."""
    out = list(args)
    found: set[str] = set()
    for index in range(first, len(args) - 1):
        flag = _FLAG.fullmatch(args[index])
        if flag is None or flag["eq"] or _looks_like_flag(args[index + 1]):
            continue
        if is_secret_name(flag["name"], compiled.keys):
            found.add(args[index + 1])
            out[index + 1] = REDACTED
    joined = " ".join(args)
    spans = command_secrets(joined) if len(args) > 1 else []
    if spans:
        starts = [0]
        for arg in args[:-1]:
            starts.append(starts[-1] + len(arg) + 1)
        for span_start, span_end in spans:
            found.add(joined[span_start:span_end])
            for index, start in enumerate(starts):
                end = start + len(args[index])
                if span_start < end and span_end > start and out[index] != REDACTED:
                    cut_start, cut_end = max(span_start, start) - start, min(span_end, end) - start
                    arg = args[index]
                    out[index] = f"{arg[:cut_start]}{REDACTED}{arg[cut_end:]}"
    return out, found


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
    "environment_secrets",
    "is_secret_key",
    "override_secrets",
    "redact_command",
    "redact_config",
    "redact_overrides",
    "redact_urls",
    "scrub_text",
]
