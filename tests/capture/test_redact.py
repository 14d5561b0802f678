"""Redaction: secret keys, URL credentials and copies of secrets never survive."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from warehouse.capture.redact import (
    REDACTED,
    is_secret_key,
    override_secrets,
    redact_config,
    redact_overrides,
    redact_urls,
    scrub_text,
)
from warehouse.settings import DEFAULT_REDACT_PATTERNS as PATTERNS
from warehouse.url_credentials import strip_url_credentials

SECRET = "s3cr3t-planted-value"


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "PASSWORD",
        "db_password",
        "db.password",
        "AWS_SECRET_ACCESS_KEY",
        "aws_access_key_id",
        "AccessKeyId",
        "apiKey",
        "api-key",
        "API_KEY",
        "hf_token",
        "GITHUB_TOKENS",
        "access_token",
        "tokenizer_token",
        "private_key",
        "authorization",
        "oauth",
        "credentials",
        "passwd",
    ],
)
def test_keys_that_look_like_secrets_are_secret(key: str) -> None:
    assert is_secret_key(key, PATTERNS)


@pytest.mark.parametrize(
    "key",
    [
        "lr",
        "tokenizer",
        "tokenizer_name",
        "tokenization",
        "max_tokens",
        "max_new_tokens",
        "num_tokens",
        "special_tokens",
        "tokens_per_s",
        "author",
        "authors",
        "keyword",
        "batch_size",
    ],
)
def test_ml_words_that_merely_contain_a_pattern_are_not_secret(key: str) -> None:
    assert not is_secret_key(key, PATTERNS)


def test_patterns_are_configurable_and_an_empty_list_redacts_no_key() -> None:
    assert is_secret_key("my_pin", ["pin"])
    assert not is_secret_key("password", [])
    assert redact_config({"password": "x"}, []) == {"password": "x"}


def test_secret_keys_lose_their_whole_subtree_at_any_depth() -> None:
    config = {
        "lr": 0.1,
        "db": {"PASSWORD": SECRET, "host": "db.local"},
        "deep": {"a": {"b": {"c": {"apiKey": SECRET}}}},
        "auth": {"user": "me", "secret": SECRET},
        "workers": [{"name": "w1", "access_token": SECRET}, {"name": "w2"}],
        "db.password": SECRET,
    }
    redacted = redact_config(config, PATTERNS)
    assert SECRET not in json.dumps(redacted)
    assert redacted["db"] == {"PASSWORD": REDACTED, "host": "db.local"}
    assert redacted["deep"]["a"]["b"]["c"]["apiKey"] == REDACTED
    assert redacted["auth"] == REDACTED
    assert redacted["workers"] == [{"name": "w1", "access_token": REDACTED}, {"name": "w2"}]
    assert redacted["db.password"] == REDACTED
    assert redacted["lr"] == 0.1


def test_redaction_returns_a_copy_and_leaves_the_input_alone() -> None:
    config = {"db": {"password": SECRET, "ports": [1, 2]}}
    redacted = redact_config(config, PATTERNS)
    redacted["db"]["ports"].append(3)
    assert config == {"db": {"password": SECRET, "ports": [1, 2]}}


def test_copies_of_a_secret_in_other_values_are_scrubbed() -> None:
    config = {"db": {"password": SECRET}, "dsn": f"host=h password={SECRET}", "tags": [SECRET]}
    redacted = redact_config(config, PATTERNS)
    assert redacted["dsn"] == f"host=h password={REDACTED}"
    assert redacted["tags"] == [REDACTED]


def test_short_secrets_are_redacted_under_their_key_but_not_searched_for_elsewhere() -> None:
    redacted = redact_config({"token": "abc", "name": "abcdef"}, PATTERNS)
    assert redacted == {"token": REDACTED, "name": "abcdef"}


def test_extra_secrets_passed_in_are_scrubbed_everywhere() -> None:
    redacted = redact_config({"run_dir": f"out/db.password={SECRET}"}, PATTERNS, secrets=[SECRET])
    assert redacted == {"run_dir": f"out/db.password={REDACTED}"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            f"postgres://user:{SECRET}@db:5432/x", "postgres://***@db:5432/x", id="user-password"
        ),
        pytest.param(
            f"https://{SECRET}@github.com/a/b", "https://***@github.com/a/b", id="token-user"
        ),
        pytest.param(f"https://u:p@ss{SECRET}@h/x", "https://***@h/x", id="at-in-password"),
        pytest.param("ssh://git@github.com/a/b.git", "ssh://git@github.com/a/b.git", id="ssh-user"),
        pytest.param("postgres://user@h/db", "postgres://user@h/db", id="user-only-non-http"),
        pytest.param("https://h/x?email=a@b.c", "https://h/x?email=a@b.c", id="at-in-query"),
        pytest.param(
            f"see https://a:{SECRET}@h1/x and https://h2/y?token={SECRET}&page=2",
            "see https://***@h1/x and https://h2/y?token=***&page=2",
            id="two-urls-in-text",
        ),
        pytest.param(
            f"https://b.s3.amazonaws.com/k?X-Amz-Credential={SECRET}&X-Amz-Expires=60",
            "https://b.s3.amazonaws.com/k?X-Amz-Credential=***&X-Amz-Expires=60",
            id="presigned-credential",
        ),
        pytest.param("no url here: a@b", "no url here: a@b", id="no-url"),
    ],
)
def test_url_credentials_in_strings_are_redacted(text: str, expected: str) -> None:
    assert redact_urls(text, PATTERNS) == expected
    assert redact_config({"value": text}, PATTERNS) == {"value": expected}


def test_url_credentials_are_stripped_even_with_no_patterns() -> None:
    assert redact_config({"url": f"https://u:{SECRET}@h"}, []) == {"url": "https://***@h"}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param(
            "https://user:ghp_token@github.com/x/y.git", "https://github.com/x/y.git", id="https"
        ),
        pytest.param(
            "https://ghp_token@github.com/x/y.git", "https://github.com/x/y.git", id="token"
        ),
        pytest.param("git@github.com:x/y.git", "github.com:x/y.git", id="scp-style"),
        pytest.param("ssh://git@host:22/x/y.git", "ssh://host:22/x/y.git", id="ssh-user"),
        pytest.param("ssh://git:pw@host/x/y.git", "ssh://host/x/y.git", id="ssh-password"),
        pytest.param("ghp_tok@github.com:x/y.git", "github.com:x/y.git", id="scp-token"),
        pytest.param("https://github.com/x/y.git", "https://github.com/x/y.git", id="clean"),
        pytest.param("/srv/repos/y.git", "/srv/repos/y.git", id="local-path"),
    ],
)
def test_git_remote_urls_lose_their_user_part(url: str, expected: str) -> None:
    assert strip_url_credentials(url) == expected


def test_overrides_of_secret_keys_are_redacted_and_their_values_scrubbed() -> None:
    overrides = [
        f"db.password={SECRET}",
        f"+api_token={SECRET}",
        "lr=0.1",
        "~old_key",
        f"url=https://u:{SECRET}@h",
        f"name=run-{SECRET}",
    ]
    assert override_secrets(overrides, PATTERNS) == {SECRET}
    assert redact_overrides(overrides, PATTERNS) == [
        "db.password=***",
        "+api_token=***",
        "lr=0.1",
        "~old_key",
        "url=https://***@h",
        "name=run-***",
    ]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        pytest.param(f"+creds={{token:{SECRET}}}", "+creds={token:***}", id="dict"),
        pytest.param(
            f"db={{host:h,password:{SECRET}}}", "db={host:h,password:***}", id="dict-item"
        ),
        pytest.param(
            f"db={{host:h,conn:{{api_key:'{SECRET}'}}}}",
            "db={host:h,conn:{api_key:***}}",
            id="nested-quoted",
        ),
        pytest.param("opt={lr:0.1,betas:[0.9,0.99]}", "opt={lr:0.1,betas:[0.9,0.99]}", id="clean"),
    ],
)
def test_secrets_inside_dict_valued_overrides_are_redacted(override: str, expected: str) -> None:
    overrides = [override, f"hydra.run.dir=out/{SECRET}"]
    redacted = redact_overrides(overrides, PATTERNS)
    assert redacted[0] == expected
    if expected != override:  # the value is known as a secret and scrubbed elsewhere too
        assert redacted[1] == "hydra.run.dir=out/***"


def test_scrub_text_hides_url_credentials_and_known_secrets() -> None:
    text = f"connect postgres://admin:{SECRET}@db/x failed; token was {SECRET}"
    assert scrub_text(text, {SECRET, "short"}, PATTERNS) == (
        "connect postgres://***@db/x failed; token was ***"
    )


def test_redacting_10000_keys_visits_each_node_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from warehouse.capture import redact

    visits = 0
    real = redact._redact

    def counting(*args: Any) -> Any:
        nonlocal visits
        visits += 1
        return real(*args)

    monkeypatch.setattr(redact, "_redact", counting)
    config = {f"group{g}": {f"key{k}": f"value{k}" for k in range(100)} for g in range(100)}
    redacted = redact_config(config, PATTERNS)
    assert redacted == config
    assert visits == 1 + 100 + 10_000  # the root, each group, each leaf: linear in the keys


def _unbounded_greedy_repeats(pattern: re.Pattern[str]) -> list[str]:
    """Repeats in ``pattern`` that may backtrack over unbounded input (greedy or lazy with no
    upper bound); possessive repeats and bounded ones cannot make a match attempt superlinear."""
    from re import _constants as sre_constants  # the stdlib's own regex parser
    from re import _parser as sre_parse

    found: list[str] = []

    def walk(items: Any) -> None:
        for op, arg in items:
            if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT):
                low, high, inner = arg
                if high == sre_constants.MAXREPEAT:
                    found.append(f"{op} {low}..inf")
                walk(inner)
            elif op == sre_constants.POSSESSIVE_REPEAT:
                walk(arg[2])
            elif op in (sre_constants.SUBPATTERN,):
                walk(arg[-1])
            elif op == sre_constants.BRANCH:
                for branch in arg[1]:
                    walk(branch)
            elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
                walk(arg[1])
            elif op == sre_constants.ATOMIC_GROUP:
                walk(arg)

    walk(sre_parse.parse(pattern.pattern, pattern.flags))
    return found


def test_url_patterns_cannot_backtrack_over_long_input() -> None:
    from warehouse import url_credentials
    from warehouse.capture import redact

    for pattern in (url_credentials.URL, url_credentials._SCP, redact._QUERY_PARAM):
        assert _unbounded_greedy_repeats(pattern) == [], pattern.pattern


def test_long_strings_are_redacted_in_one_pass_per_pattern(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from warehouse import url_credentials
    from warehouse.capture import redact

    fed: list[int] = []

    class Counting:
        def __init__(self, pattern: re.Pattern[str]) -> None:
            self.pattern = pattern

        def sub(self, repl: Any, text: str) -> str:
            fed.append(len(text))
            return self.pattern.sub(repl, text)

    monkeypatch.setattr(url_credentials, "URL", Counting(url_credentials.URL))
    monkeypatch.setattr(redact, "_QUERY_PARAM", Counting(redact._QUERY_PARAM))

    def work(n: int) -> int:
        fed.clear()
        text = "a" * n + "://" + "b" * n + " https://u:pw@h/?token=x&ssl=1&" + "c/" * n
        redacted = redact_urls(text, PATTERNS)
        assert "https://***@h/?token=***&ssl=1&" in redacted
        assert len(redacted) == len(text) - len("u:pw") - len("x") + 2 * len(REDACTED)
        return sum(fed)

    small, large = work(25_000), work(200_000)
    assert small <= 2 * (4 * 25_000 + 100)  # each pattern reads the text once
    assert large <= 8 * small + 1_000  # 8x the text, 8x the characters read


# --- secret-looking values, whatever their key ----------------------------------------------

from warehouse.capture.redact import (  # noqa: E402
    VALUE_PATTERNS,
    RedactPolicy,
    env_secrets,
    redact_command,
)

VALUES = {
    # kind: (text holding the secret, the secret part)
    "bearer": ("Authorization: Bearer abcDEF0123456789ghij", "abcDEF0123456789ghij"),
    "connection string": ("Server=h;Database=d;Password=Xy9_pLanted;", "Xy9_pLanted"),
    "pwd": ("Data Source=h;Uid=u;Pwd=Xy9_pLanted2;", "Xy9_pLanted2"),
    "stripe": ("key sk_live_51Habcdefghij0123456789xyz", "51Habcdefghij0123456789xyz"),
    "hugging face": ("hf_abcdefghijklmnopqrstuvwxyz012345", "hf_abcdefghijklmnopqrstuvwxyz012345"),
    "github": (
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    ),
    "aws key id": ("id=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    "aws secret": (
        "s3 wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ok",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    "jwt": (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJzdWIiOiIxMjM0In0",
    ),
    "cookie": ("Set-Cookie: sid=Xy9abcdef123; Path=/", "Xy9abcdef123"),
    "pem": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7pLanted\nAbCdEfGh12345678\n"
        "-----END RSA PRIVATE KEY-----",
        "MIIEpAIBAAKCAQEA7pLanted",
    ),
    "key assignment": ('{"client_secret": "Xy9-pLanted-3"}', "Xy9-pLanted-3"),
    "yaml line": ("db:\n  password: two words pLanted\n", "words pLanted"),
}


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_secret_looking_values_are_redacted_under_any_key(kind: str) -> None:
    text, secret = VALUES[kind]
    assert secret not in scrub_text(text, (), PATTERNS)
    assert secret not in json.dumps(redact_config({"note": text, "list": [text]}, PATTERNS))
    assert secret not in redact_overrides([f"+note={text}"], PATTERNS)[0]
    assert REDACTED in scrub_text(text, (), PATTERNS)


@pytest.mark.parametrize(
    "text",
    [
        "git commit 3f786850e387550fdab836ed7e6dc881de23001b",  # 40 hex: no AWS secret
        "tokenizer: bert-base-uncased",
        "max_tokens=512",
        "lr=0.1; batch_size=64",
        "see https://example.com/a?page=2",
        "Basic training loop",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert scrub_text(text, (), PATTERNS) == text


def test_the_documented_value_patterns_exist() -> None:
    names = {name for name, _ in VALUE_PATTERNS}
    documented = {"authorization header", "bearer token", "basic auth", "cookie header"}
    documented |= {"connection-string password", "hugging face token", "sk- key", "npm token"}
    documented |= {"aws secret access key", "google api key", "github fine-grained token"}
    assert documented <= names  # the names the README documents exist


def test_users_add_value_patterns_and_a_secret_group_limits_the_cut() -> None:
    policy = RedactPolicy(values=(r"corp-(?P<secret>[0-9]{6})", r"INTERNAL-[A-Z]{4}"))
    text = "id corp-123456 and INTERNAL-ABCD"
    assert policy.text(text) == "id corp-*** and ***"
    assert redact_config({"x": text}, policy) == {"x": "id corp-*** and ***"}


def test_secret_environment_values_are_scrubbed_from_text() -> None:
    environ = {
        "DB_PASS": "hunter2hunter2",
        "HF_TOKEN": "plain-looking-value",
        "GH_PAT": "another-plain-value",
        "PWD": "/home/someone/project",
        "HOME": "/home/someone",
        "SHORT_PASS": "abc",
        "LR": "0.1234567",
    }
    found = env_secrets(environ)
    assert found == {"hunter2hunter2", "plain-looking-value", "another-plain-value"}
    policy = RedactPolicy.from_environment(environ=environ)
    message = "login failed for hunter2hunter2 in /home/someone/project (lr 0.1234567)"
    assert policy.text(message) == "login failed for *** in /home/someone/project (lr 0.1234567)"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["python", "train.py", "--password", "hunter22", "--lr", "0.1"],
            ["python", "train.py", "--password", "***", "--lr", "0.1"],
        ),
        (["train", "--api-key=k3y-value"], ["train", "--api-key=***"]),
        (["train", "--token", "--verbose"], ["train", "--token", "--verbose"]),  # a switch
        (["train", "db.password=hunter22", "lr=0.1"], ["train", "db.password=***", "lr=0.1"]),
        (
            ["train", "--secret", "hunter22", "--out", "runs/hunter22"],
            ["train", "--secret", "***", "--out", "runs/***"],
        ),
        (["train", f"--note={VALUES['hugging face'][0]}"], ["train", "--note=***"]),
    ],
)
def test_secret_flags_of_a_command_line_are_redacted(argv: list[str], expected: list[str]) -> None:
    assert redact_command(argv, PATTERNS) == expected


def test_value_and_assignment_patterns_cannot_backtrack_over_long_input() -> None:
    from warehouse.capture import redact, secret_values

    patterns = [
        redact._ASSIGN,
        redact._LINE_ASSIGN,
        *(p for _, p in secret_values.BUILTIN_PATTERNS),
        secret_values._TOKEN_RUN,
        secret_values._PATH_WORD,
        secret_values._INNER_DIGITS,
    ]
    for pattern in patterns:
        assert _unbounded_greedy_repeats(pattern) == [], pattern.pattern


class _Counting:
    """A compiled pattern that counts the characters it is given."""

    def __init__(self, pattern: re.Pattern[str], fed: list[int]) -> None:
        self.pattern = pattern
        self.fed = fed
        self.groupindex = pattern.groupindex

    def sub(self, repl: Any, text: str) -> str:
        self.fed.append(len(text))
        return self.pattern.sub(repl, text)

    def finditer(self, text: str) -> Any:
        self.fed.append(len(text))
        return self.pattern.finditer(text)


def test_value_redaction_reads_a_text_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The project's patterns read a text once each, and detect-secrets' regexes see it in
    overlapping windows: 8x the text, 8x the characters read, whatever the text holds."""
    from warehouse.capture import redact, secret_library, secret_values

    fed: list[int] = []
    builtin = tuple((a, _Counting(p, fed)) for a, p in secret_values.BUILTIN_PATTERNS)
    monkeypatch.setattr(secret_values, "BUILTIN_PATTERNS", builtin)
    monkeypatch.setattr(secret_values, "_TOKEN_RUN", _Counting(secret_values._TOKEN_RUN, fed))
    monkeypatch.setattr(redact, "_ASSIGN", _Counting(redact._ASSIGN, fed))
    monkeypatch.setattr(redact, "_LINE_ASSIGN", _Counting(redact._LINE_ASSIGN, fed))
    real_windows = secret_library._matches

    def windows(pattern: re.Pattern[str], text: str) -> Any:
        found = real_windows(pattern, text)
        step = secret_library.WINDOW - secret_library.OVERLAP
        fed.append(min(len(text), secret_library.WINDOW) * max(1, -(-len(text) // step)))
        return found

    monkeypatch.setattr(secret_library, "_matches", windows)

    def work(n: int) -> int:
        fed.clear()
        text = ("password=x hf_" + "a" * 30 + " eyJ a=b=c=d:e ") * n
        assert "hf_" + "a" * 30 not in scrub_text(text, (), PATTERNS)
        return sum(fed)

    small, large = work(1_000), work(8_000)
    assert large <= 8 * small + 100_000  # linear: 8x the text, 8x the characters read
