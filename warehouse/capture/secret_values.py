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

import base64
import functools
import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from warehouse.capture import secret_library
from warehouse.capture.secret_keys import (
    REDACTED,
    is_secret_assignment_name,
    is_weak_secret_name,
)

if TYPE_CHECKING:
    from detect_secrets.plugins.high_entropy_strings import (
        Base64HighEntropyString,
        HexHighEntropyString,
    )

VALUE_PATTERNS: tuple[tuple[str, str], ...] = (
    # the whole credentials of a header line (Digest's and AWS4's hold commas and quotes):
    # to the end of the line, or of the quoted value in a JSON or Python string; its list of
    # ``name=value`` may go on over indented lines (YAML folds a long string)
    (
        "authorization header",
        r"(?i:\b(?:proxy-)?authorization)[ \t]*+[:=][ \t]*+(?![\\\"'])"
        r"(?:[A-Za-z][\w\-]*+[ \t]++)?(?P<secret>[^\r\n]{6,}+"
        r"(?:\n[+\- ]?[ \t]{2,16}+[\w\-]{1,40}+=[^\r\n]*+){0,8}+)",
    ),
    (
        "quoted authorization header",
        r"(?i:\b(?:proxy-)?authorization)(?:\\?[\"'])?+[ \t]*+[:=][ \t]*+\\?[\"']"
        r"(?:[A-Za-z][\w\-]*+[ \t]++)?(?P<secret>[^\"'\\\r\n]{6,}+)",
    ),
    ("bearer token", r"(?i:\bbearer)[ \t]++(?P<secret>[A-Za-z0-9\-._~+/]{8,}+=*+)"),
    ("basic auth", r"\bBasic[ \t]++(?P<secret>(?=[A-Za-z]*+[0-9+/=])[A-Za-z0-9+/]{8,}+=*+)"),
    (
        "connection-string password",
        r"(?i:(?<![A-Za-z0-9_])(?:pwd|pass))[ \t]*+=[ \t]*+(?P<secret>[^;\s'\"]++)",
    ),
    ("stripe test key", r"\b[rs]k_test_[0-9A-Za-z]{10,}+"),
    ("hugging face token", r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{20,}+"),
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
    # tokens whose issuer prefix detect-secrets has no plugin for; the prefix is public, the
    # rest is the secret (Docker Hub, Shopify, Google OAuth, Grafana, Vault, DigitalOcean,
    # Linear, Notion, New Relic, Postman, Heroku, Atlassian, Bitbucket, Replicate, Groq, xAI,
    # Stripe webhooks, Google access and refresh tokens, age, Pulumi, Sentry, ReadMe,
    # Perplexity, NVIDIA, Square, PlanetScale, Figma, Contentful, LangSmith, Apify)
    (
        "issuer-prefixed token",
        r"(?<![A-Za-z0-9])(?:dckr_(?:pat|oat)_|shp(?:at|ca|pa|ss)_|GOCSPX-|glsa_|glc_|"
        r"hv[sbr]\.|do[opr]_v1_|lin_(?:api|oauth)_|ntn_|NRAK-|NRII-|PMAK-|HRKU-|ATATT|ATCTT|"
        r"ATBB|r8_|gsk_|xai-|whsec_|ya29\.|1//0|AGE-SECRET-KEY-1|pul-|sntry[us]_|rdme_|"
        r"pplx-|nvapi-|sq0(?:atp|csp)-|pscale_(?:tkn|pw|oauth)_|figd_|CFPAT-|"
        r"lsv2_(?:pt|sk)_|apify_api_)[A-Za-z0-9_\-.~=/+]{16,1024}+",
    ),
    ("databricks token", r"(?<![A-Za-z0-9])dapi[0-9a-f]{32}(?:-[0-9])?+"),
    ("mailgun key", r"(?<![A-Za-z0-9])key-[0-9a-f]{32}(?![0-9a-f])"),
    (
        "terraform cloud token",
        r"(?<![A-Za-z0-9])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,1024}+",
    ),
    # Microsoft Entra (Azure AD) client secrets: 3 characters, a digit, "Q~", 31 to 34 more;
    # a '.' may follow (a file name's extension: 'weights-<secret>.bin'), so the body backtracks
    (
        "azure client secret",
        r"(?<![A-Za-z0-9~.])[A-Za-z0-9_~.\-]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}(?![\w~\-])",
    ),
    # passwords a command line gives to a known tool without a key name
    (
        "mysql -p password",
        r"\bmysql(?:dump|admin|sh|import|check|slap)?+[ \t][^\n]{0,512}?(?<=[ \t])-p"
        r"(?P<secret>'[^'\n]{1,512}+'|\"[^\"\n]{1,512}+\"|[^\s'\"]{1,512}+)",
    ),
    (
        "sshpass -p password",
        r"\bsshpass[ \t][^\n]{0,256}?(?<=[ \t])-p[ \t]*+"
        r"(?P<secret>'[^'\n]{1,512}+'|\"[^\"\n]{1,512}+\"|[^\s'\"]{1,512}+)",
    ),
    (
        "redis-cli -a password",
        r"\bredis-cli[ \t][^\n]{0,512}?(?<=[ \t])-a[ \t]++"
        r"(?P<secret>'[^'\n]{1,512}+'|\"[^\"\n]{1,512}+\"|[^\s'\"]{1,512}+)",
    ),
    (
        "login -p password",
        r"\b(?:docker|podman|helm|oras|buildah|skopeo)[ \t]++(?:registry[ \t]++)?login"
        r"[ \t][^\n]{0,512}?(?<=[ \t])-p[ \t]++(?P<secret>[^\s'\"]{1,512}+)",
    ),
    (
        "curl user:password",
        r"\b(?:curl|wget|http|https)[ \t][^\n]{0,512}?(?<=[ \t])(?:-u|-U|--user|--proxy-user)"
        r"(?:[ \t]*+|=)['\"]?[^\s:'\"@]{0,256}+:(?P<secret>[^\s'\"]{1,512}+)",
    ),
    # `wandb login KEY`, `hf auth login TOKEN`: a token-like argument after "login"
    (
        "login token",
        r"\blogin(?:[ \t]++--?[A-Za-z][\w\-]{0,40}+(?:=[^\s]{0,128}+)?){0,4}+[ \t]++"
        r"(?P<secret>(?=[\w\-]{0,200}?[0-9])(?=[\w\-]{0,200}?[A-Za-z])[\w\-]{20,512}+)",
    ),
    # .netrc: "machine HOST login USER password PASS", and a "password PASS" line of its own
    (
        "netrc password",
        r"(?:\bmachine[ \t]++\S{1,256}+|\bdefault)(?:[ \t]++(?:login|account)[ \t]++"
        r"\S{1,256}+){0,2}+[ \t]++password[ \t]++(?P<secret>\S{1,512}+)",
    ),
    ("password line", r"(?m:^[ \t]*+password[ \t]++(?P<secret>\S{1,512}+)[ \t]*+$)"),
    # .pgpass: host:port:database:user:password
    (
        "pgpass line",
        r"(?<![A-Za-z0-9.:\-])(?:[A-Za-z0-9.\-]{1,253}+|\*):(?:[0-9]{1,5}+|\*):[\w.\-*]{1,63}+:"
        r"[\w.\-@*]{1,63}+:(?P<secret>[^\s:]{6,512}+)",
    ),
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
_COMMAND_RULES = frozenset(
    {
        "mysql -p password",
        "sshpass -p password",
        "redis-cli -a password",
        "login -p password",
        "curl user:password",
        "login token",
    }
)
COMMAND_PATTERNS = tuple(
    compiled
    for (name, _), (_, compiled) in zip(VALUE_PATTERNS, BUILTIN_PATTERNS, strict=True)
    if name in _COMMAND_RULES
)
"""The value patterns that read a command line's words together (``mysql -u root -pX``):
what :func:`command_secrets` applies to a command given as a list of arguments."""

TOKEN_MIN = 20
"""The shortest run of base64 characters judged as a possible token."""
# runs of base64/base64url characters, with their padding; '=' inside a run separates
_TOKEN_RUN = re.compile(r"[A-Za-z0-9+/_\-]{20,}+={0,2}+")
# a lowercase word between slashes: the run is a path or a URL, judged piece by piece
_PATH_WORD = re.compile(r"(?:^|/)[a-z]{3,}+(?=/|$)")
_INNER_DIGITS = re.compile(r"(?<=[A-Za-z])[0-9]++(?=[A-Za-z])")
# a digest named by its algorithm or role (``sha256-<hex>``, ``commit_<hex>``, ``md5:<hex>``) or
# after plain lowercase words (``data-<md5>``, ``run_cache.<hex>``): its random part is hex,
# judged as hex is (by entropy only where hex is judged at all)
_NAMED_DIGEST = re.compile(
    r"(?:[a-z]{2,20}+[-_.:]){1,4}+[0-9a-f]{7,128}+"
    r"|(?i:sha(?:1|224|256|384|512)?+|md5|blake2[bs]?+|xxh(?:32|64|128)?+|crc32|commit|rev|"
    r"hash|digest|git)[-_:]?+[0-9a-fA-F]{7,128}+"
)
_LINE_LEAD = re.compile(r"[+\- ]?[ \t]*+")
# where a name splits into pieces (``HuggingFaceFW/fineweb-edu-v2``)
_NAME_SEPARATORS = re.compile(r"[/_.\-]++")
_SHORT_PIECE = 5  # "v2", "sst2", "8x7B", "bs128": a name's mixed piece is short
_HEX_TAIL = re.compile(r"[0-9a-fA-F]{7,128}+$")
# the payload of a media data URI (an image, a sound, a video, a font) is data, no token
_MEDIA_DATA_URI = re.compile(
    r"data:(?:image|audio|video|font)/[\w.+\-]{1,64}+(?:;[\w.\-]{1,64}+=[\w.\-]{1,64}+){0,4}+;base64,$"
)
_PLAIN_PIECE = re.compile(r"[a-z]++|[0-9]++|[0-9a-f]{7,128}+")
# what base64-wrapped credentials decode to
_USER_PASSWORD = re.compile(r"[\w.@+\-]{1,64}+:[^\s:]{4,256}+")
_SECRET_WORD = re.compile(
    r"(?i:password|passwd|secret|token|api[_\-]?key|private[_\-]?key)[\"']?[ \t]*+[:=]"
)
_TOKEN_VALUE = re.compile(r"[A-Za-z0-9+/_\-]{16,}+={0,2}+")
_HEX = frozenset("0123456789abcdefABCDEF-")
_DIGITS = frozenset("0123456789")
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

# a blank in a key block's marker; YAML may fold a long string there onto the next line (a diff
# line's "+" and indent before it)
_PEM_SPACE = r"(?:[ \t]|[ \t]*+\n[+\- \t]{0,16}+)"
PEM_BEGIN = re.compile(
    rf"-----BEGIN{_PEM_SPACE}(?:[A-Z0-9]{{1,20}}+{_PEM_SPACE}){{0,3}}PRIVATE{_PEM_SPACE}KEY"
    rf"(?:{_PEM_SPACE}BLOCK)?+-----"
)
"""Where a private key block starts (any kind: RSA, EC, OpenSSH, PGP, encrypted PKCS #8)."""
_PEM_END = re.compile(
    rf"-----END{_PEM_SPACE}(?:[A-Z0-9]{{1,20}}+{_PEM_SPACE}){{0,3}}PRIVATE{_PEM_SPACE}KEY"
    rf"(?:{_PEM_SPACE}BLOCK)?+-----"
)
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


def command_secrets(line: str) -> list[tuple[int, int]]:
    """The spans of the passwords that known tools take without a key name in ``line`` (a
    command's arguments joined by blanks): :data:`COMMAND_PATTERNS`."""
    return _merged([span for pattern in COMMAND_PATTERNS for span in _pattern_spans(pattern, line)])


def redact_tokens(text: str, *, hex_too: bool = False) -> str:
    """``text`` with its random-looking tokens (rule 3 alone) replaced by ``***``."""
    spans = _merged(list(_token_spans(text, hex_too=hex_too)))
    return replace_spans(text, spans) if spans else text


def replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of the merged ``spans`` replaced by ``***``; a span over lines is
    replaced line by line, each line's start kept (a diff's marker, an indent)."""
    out: list[str] = []
    pos = 0
    for start, end in spans:
        piece = text[start:end]
        if piece == REDACTED:
            continue
        out.append(text[pos:start])
        if "\n" in piece:
            first, *rest = piece.split("\n")
            lines = [REDACTED if first else ""]
            lines += [f"{_LINE_LEAD.match(line)[0]}{REDACTED}" for line in rest]  # type: ignore[index]
            out.append("\n".join(lines))
        else:
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
    if _NAMED_DIGEST.fullmatch(token) is not None:
        tail = _HEX_TAIL.search(token)
        return hex_too and tail is not None and is_random_token(tail[0], hex_too=True)
    if not (chars & _DIGITS and chars & _LETTERS) or _is_plain_name(token):
        return False
    if shannon_entropy(token) > base64.entropy_limit:
        return True
    return len(_INNER_DIGITS.findall(token)) >= max(3, len(token) // 16)


def _is_plain_name(token: str) -> bool:
    """Whether ``token`` is a name of words and numbers (``HuggingFaceFW/fineweb-edu-v2``,
    ``/data/run_01/ckpt_5``): each piece between separators is letters only, digits only or
    short; a random token of 20 characters or more has a long piece that mixes them."""
    return all(
        piece.isalpha() or piece.isdigit() or len(piece) <= _SHORT_PIECE
        for piece in _NAME_SEPARATORS.split(token)
    )


def is_token_value(value: str) -> bool:
    """Whether ``value`` (a whole value, quotes stripped) is one random-looking token of 16
    characters or more, bare hex digests included: what a key named only ``key`` or ``sig``
    holds when it holds a secret (:data:`~warehouse.capture.secret_keys.WEAK_WORDS`). A digest
    named by a word (``fineweb-<sha1>`` as a ``cache_key``) is none."""
    bare = value.strip().strip("\\\"'")
    if _TOKEN_VALUE.fullmatch(bare) is None or _NAMED_DIGEST.fullmatch(bare) is not None:
        return False
    return is_random_token(bare, hex_too=True)


def is_secret_pair(key: str, value: object, keys: tuple[str, ...]) -> bool:
    """Whether ``key`` holding ``value`` holds a secret: any value but a float or a boolean (no
    credential is one) under a secret key name (the :func:`~warehouse.capture.secret_keys.
    compact_patterns` ``keys``); a random-looking token under a key whose last word is only
    ``key`` or ``sig`` (:func:`is_token_value`)."""
    if isinstance(value, bool | float):
        return False
    if is_secret_assignment_name(key, keys):
        return True
    return isinstance(value, str) and is_weak_secret_name(key) and is_token_value(value)


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
        if (
            match.start() > 8
            and text[match.start() - 8 : match.start()] == ";base64,"
            and _MEDIA_DATA_URI.search(text, max(0, match.start() - 160), match.start())
        ):
            continue
        if "/" not in token or _PATH_WORD.search(token) is None:
            if is_random_token(token, hex_too=hex_too) or wraps_credentials(token):
                yield match.span()
            continue
        # a path or a URL, judged piece by piece; once a piece is a token, every piece but
        # plain words, numbers and digests goes with it (a token may hold "/abc/")
        pieces: list[tuple[int, str]] = []
        pos = match.start()
        for piece in token.split("/"):
            pieces.append((pos, piece))
            pos += len(piece) + 1
        if any(
            len(piece) >= TOKEN_MIN
            and (is_random_token(piece, hex_too=hex_too) or wraps_credentials(piece))
            for _, piece in pieces
        ):
            for start, piece in pieces:
                if piece and _PLAIN_PIECE.fullmatch(piece) is None:
                    yield start, start + len(piece)


def wraps_credentials(token: str) -> bool:
    """Whether ``token`` is base64 of text that holds credentials: ``user:password`` (a Basic
    header's or a Docker config's ``auth``), or a secret this module finds in the text (a
    service account's key, a ``.env`` file)."""
    body = token.rstrip("=")
    if len(body) < 16 or len(body) % 4 == 1:
        return False
    try:
        raw = base64.b64decode(
            body + "=" * (-len(body) % 4),
            altchars=b"-_" if ("-" in body or "_" in body) else None,
            validate=True,
        )
        decoded = raw.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return False
    if not decoded.replace("\n", "").replace("\t", "").isprintable():
        return False
    if _USER_PASSWORD.fullmatch(decoded.strip()) is not None:
        return True
    return _SECRET_WORD.search(decoded) is not None or bool(find_secrets(decoded))


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
    """The body of every private key block, line for line (an unclosed block: to the next
    block's start, or to the end)."""
    out: list[str] = []
    pos = 0
    closing: re.Match[str] | None = None  # the next end marker, searched once (linear time)
    closed = True  # whether an end marker may follow
    while (begin := PEM_BEGIN.search(text, pos)) is not None:
        if closed and (closing is None or closing.start() < begin.end()):
            closing = _PEM_END.search(text, begin.end())
            closed = closing is not None
        end = closing if closed else None
        following = PEM_BEGIN.search(text, begin.end())
        if end is not None and following is not None and following.start() < end.start():
            end = None  # this block is not closed: the next one starts first
        if end is not None:
            stop = end.start()
        else:
            stop = following.start() if following is not None else len(text)
        out.append(text[pos : begin.end()])
        out.append(_BASE64_RUN.sub(lambda m: f"{m['lead']}{REDACTED}", text[begin.end() : stop]))
        pos = stop if end is None else end.end()
        if end is not None:
            out.append(text[stop:pos])
    out.append(text[pos:])
    return "".join(out)


__all__ = [
    "BUILTIN_PATTERNS",
    "COMMAND_PATTERNS",
    "PEM_BEGIN",
    "TOKEN_MIN",
    "VALUE_PATTERNS",
    "command_secrets",
    "compile_value_pattern",
    "find_secrets",
    "is_random_token",
    "is_secret_pair",
    "is_token_value",
    "redact_pem",
    "redact_tokens",
    "replace_spans",
    "shannon_entropy",
    "wraps_credentials",
]
