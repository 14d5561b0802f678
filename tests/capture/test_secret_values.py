"""Secrets found by value (issue 28, item 1): fresh secrets of every shape, drawn at each run,
are replaced wherever they stand; detect-secrets finds the shapes it knows, and the project's
own patterns cover only shapes it has no plugin for."""

from __future__ import annotations

import json
import random
import secrets
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.capture.fresh_secrets import keyed_password, make
from tests.capture.planted import Planted, fresh_secrets
from warehouse.capture import secret_library
from warehouse.capture.redact import (
    REDACTED,
    RedactPolicy,
    redact_command,
    redact_config,
    redact_overrides,
)
from warehouse.capture.secret_values import (
    BUILTIN_PATTERNS,
    VALUE_PATTERNS,
    find_secrets,
    is_random_token,
)

PLANTED = fresh_secrets()
POLICY = RedactPolicy()


@pytest.mark.parametrize("planted", PLANTED, ids=[p.kind for p in PLANTED])
def test_a_fresh_secret_of_each_shape_is_replaced_wherever_it_stands(planted: Planted) -> None:
    text, secret = planted.text, planted.secret
    assert secret in text
    places = {
        "alone": POLICY.text(text),
        "in a sentence": POLICY.text(f"could not connect ({text}); retrying"),
        "in quotes": POLICY.text(f'value = "{text}"'),
        "config": json.dumps(redact_config({"model": {"ref": text}, "list": [text]}, POLICY)),
        "override": redact_overrides([f"+model.ref={text}"], POLICY)[0],
        "argv": " ".join(redact_command(["python", "train.py", "--ref", text], POLICY)),
    }
    leaked = {where: shown for where, shown in places.items() if secret in shown}
    assert leaked == {}
    assert REDACTED in places["alone"]


# the shapes detect-secrets has a plugin for, and the plugin that finds each
LIBRARY_SHAPES = {
    "aws access key id": "AWS Access Key",
    "azure connection string": "Azure Storage Account access key",
    "github token": "GitHub Token",
    "gitlab token": "GitLab Token",
    "slack token": "Slack Token",
    "slack webhook": "Slack Token",
    "npmrc line": "NPM tokens",
    "pypi token": "PyPI Token",
    "openai project key": "OpenAI Token",
    "stripe live key": "Stripe Access Key",
    "twilio api key": "Twilio API Key",
    "sendgrid key": "SendGrid API Key",
    "jwt": "JSON Web Token",
}


@pytest.mark.parametrize("kind", sorted(LIBRARY_SHAPES))
def test_detect_secrets_finds_the_shapes_it_knows(kind: str) -> None:
    [planted] = [p for p in PLANTED if p.kind == kind]
    found = secret_library.find(planted.text)
    assert LIBRARY_SHAPES[kind] in {f.kind for f in found}
    covered = "".join(planted.text[f.start : f.end] for f in found)
    assert planted.secret in covered  # the whole secret, not only the part a plugin matched


def test_a_private_key_is_found_by_the_library_and_its_body_cut() -> None:
    [planted] = [p for p in PLANTED if p.kind == "private key"]
    assert secret_library.has_private_key(planted.text)
    shown = POLICY.text(planted.text)
    begin, *body, end = shown.split("\n")
    assert (begin, end) == ("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----")
    # every body line is cut; a line that starts with '+' or '-' keeps that character (it could
    # be a diff's marker): base64 bodies start a line with '+' one time in 64
    assert body
    assert all(line.lstrip("+-") == "***" for line in body), body


_GATES = secret_library.Gates(gate for gate, _ in BUILTIN_PATTERNS)
_GATE_LITERALS = sorted({x for gate in _GATES.gates for x in gate.literals})

# an example of each of the project's own patterns: a shape the library has no plugin for
OWN_EXAMPLES = {
    "authorization header": "Authorization: Token " + secrets.token_hex(20),
    "bearer token": "bearer " + secrets.token_urlsafe(24),
    "basic auth": "Basic " + secrets.token_hex(12),
    "connection-string password": "Server=h;Pwd=" + secrets.token_urlsafe(9) + ";",
    "stripe test key": "sk_test_" + secrets.token_hex(16),
    "hugging face token": "hf_" + secrets.token_hex(17),
    "github fine-grained token": "github_pat_" + secrets.token_hex(20),
    "sk- key": "sk-ant-api03-" + secrets.token_hex(30),
    "slack app token": "xapp-1-A" + secrets.token_hex(20),
    "google api key": "AIza" + secrets.token_hex(18)[:35],
    "npm token": "npm_" + secrets.token_hex(18),
    "aws secret access key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLE0Ke",
    "cookie header": "Cookie: session=" + secrets.token_hex(8),
}
# the patterns of the fresh red-team round, on fresh secrets of their shapes (tests/capture/
# fresh_secrets.py: each shape drawn by its issuer's rule, from a new seed at every run)
_RNG = random.Random(secrets.randbits(64))
_PASSWORD = keyed_password(_RNG).text
_ISSUERS = ["dockerhub", "vault", "digitalocean", "shopify", "linear", "notion", "grafana"]
_ISSUERS += ["newrelic", "postman", "heroku", "gcp-oauth-client-secret", "google-access-token"]
_ISSUERS += ["replicate", "groq", "xai", "stripe-webhook", "bitbucket-app-password", "age-key"]
OWN_EXAMPLES |= {
    "quoted authorization header": '{"Authorization": "Token ' + secrets.token_hex(20) + '"}',
    "issuer-prefixed token": make(_RNG.choice(_ISSUERS), _RNG).text,
    "databricks token": make("databricks", _RNG).text,
    "mailgun key": make("mailgun", _RNG).text,
    "terraform cloud token": make("terraform", _RNG).text,
    "azure client secret": make("azure-ad-client-secret", _RNG).text,
    "mysql -p password": make("cli-mysql-p", _RNG).text,
    "sshpass -p password": make("sshpass", _RNG).text,
    "redis-cli -a password": f"redis-cli -h cache-1 -a {_PASSWORD} ping",
    "login -p password": f"docker login -u ci -p {_PASSWORD} ghcr.io",
    "curl user:password": make("curl-user", _RNG).text,
    "login token": make("wandb-login", _RNG).text,
    "netrc password": make("netrc", _RNG).text,
    "password line": f"password {_PASSWORD}",
    "pgpass line": make("pgpass", _RNG).text,
}


@pytest.mark.parametrize("name", [name for name, _ in VALUE_PATTERNS])
def test_each_own_pattern_covers_a_shape_the_library_misses(name: str) -> None:
    text = OWN_EXAMPLES[name]
    assert secret_library.find(text) == []
    [pattern] = [
        p
        for (anchors, p), (n, _) in zip(BUILTIN_PATTERNS, VALUE_PATTERNS, strict=True)
        if n == name
    ]
    assert pattern.search(text) is not None
    assert find_secrets(text) != []


@pytest.mark.parametrize(
    "text",
    [
        "resnet50_imagenet_baseline_lr0001_bs256",
        "distilbert-base-uncased-finetuned-sst-2-english",
        "sentence-transformers/all-MiniLM-L6-v2",
        "InvalidNumberOfTagsException",
        "see https://github.com/org/repo/blob/3f786850e387550fdab836ed7e6dc881de23001b/x.py",
        "run 0f8fad5bd9cb469fa16570867728950e failed",  # a run id: 32 hex digits
        "checkpoint sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "data/imagenet/train-00001-of-01024.tar",
        "tokenizer: bert-base-uncased; max_tokens=512",
        "2024-05-01T12:30:00+00:00",
        "Basic training loop",
    ],
)
def test_ordinary_ml_text_is_left_alone(text: str) -> None:
    assert POLICY.text(text) == text


def test_random_tokens_of_64_characters_are_all_found() -> None:
    """The rule's measured misses are tokens without a digit: 1 in 50,000 at 64 characters."""
    rng = random.Random(28)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    tokens = ["".join(rng.choice(alphabet) for _ in range(64)) for _ in range(2000)]
    assert [t for t in tokens if any(c.isdigit() for c in t) and not is_random_token(t)] == []


def test_hex_digests_are_kept_except_in_environment_values() -> None:
    digest = secrets.token_hex(20)
    assert find_secrets(f"commit {digest}") == []
    assert find_secrets(digest, hex_too=True) == [(0, len(digest))]


def test_user_plugins_extend_the_library(tmp_path: Path) -> None:
    plugin = tmp_path / "corp_plugin.py"
    plugin.write_text(
        "import re\n"
        "from detect_secrets.plugins.base import RegexBasedDetector\n\n\n"
        "class CorpTokenDetector(RegexBasedDetector):\n"
        "    secret_type = 'Corp token'\n"
        "    denylist = [re.compile(r'corp-[0-9]{6}')]\n"
    )
    policy = RedactPolicy(plugins=(str(plugin),))
    assert policy.text("id corp-123456 ok") == "id *** ok"
    assert POLICY.text("id corp-123456 ok") == "id corp-123456 ok"


def test_a_plugin_that_cannot_be_loaded_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"cannot be loaded"):
        secret_library.check_plugins(["no_such_module:Nothing"])
    with pytest.raises(ValueError, match=r"names no detect-secrets plugin"):
        secret_library.check_plugins(["json:"])


def test_library_regexes_see_long_text_in_windows_and_miss_nothing_at_their_seams() -> None:
    """A secret across a window boundary is found whole: the windows overlap by more than
    any secret is long, and a match is widened to its whole token."""
    key = "ghp_" + "".join(secrets.choice("abcdefghij0123456789") for _ in range(36))
    for at in range(secret_library.WINDOW - 40, secret_library.WINDOW + 10, 7):
        text = "x " * (at // 2) + key + " y" * 3000
        assert key not in POLICY.text(text), at


def test_the_entropy_is_detect_secrets_own_measure() -> None:
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    from warehouse.capture.secret_values import shannon_entropy

    plugin = Base64HighEntropyString()
    for _ in range(200):
        token = secrets.token_urlsafe(secrets.randbelow(60) + 1)
        assert shannon_entropy(token) == pytest.approx(plugin.calculate_shannon_entropy(token))


def test_the_readme_s_plugin_example_extends_the_detector(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Secrets and redaction", 1)[1]
    block = section.split("```python", 1)[1].split("```", 1)[0]
    plugin = tmp_path / "corp_secrets.py"
    plugin.write_text(block)
    token = f"corp_tok_{secrets.randbelow(900_000) + 100_000}"
    assert RedactPolicy(plugins=(str(plugin),)).text(f"use {token} here") == "use *** here"
    assert RedactPolicy().text(f"use {token} here") == f"use {token} here"


@given(
    text=st.text(max_size=80)
    | st.lists(
        st.sampled_from([*_GATE_LITERALS, " ", "x", "Login", "AUTHORIZATION"]), max_size=8
    ).map("".join)
)
def test_the_gates_open_exactly_where_the_literals_are(text: str) -> None:
    """The gates file their literals by their rarest character and pass over a file whose
    character a text lacks (cost); each gate still opens exactly where all its needs are met."""
    expected = [
        i
        for i, gate in enumerate(_GATES.gates)
        if all(
            any(x in (text.lower() if gate.lower else text) for x in need) for need in gate.needs
        )
    ]
    assert _GATES.opened(text) == expected


def test_an_entra_secret_in_a_file_name_before_its_extension_is_found() -> None:
    """Found by the fresh-secret test (seed 2914624788): an artifact named
    'weights-<Entra client secret>.bin' was stored, the '.' after the secret stopping the rule."""
    secret = "n8T8Q~-PbN-EQ9xKKYTWvyqEci06NpHubxbf8~iZ"
    assert POLICY.text(f"weights-{secret}.bin") == f"weights-{REDACTED}.bin"
    assert POLICY.text(f"ckpt-{secret}.pt") == f"ckpt-{REDACTED}.pt"
