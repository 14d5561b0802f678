"""The key rule (issue 28, item 3): a secret word as the last word of a key makes it secret,
whatever precedes it (``session_token``); a count or size word before ``token(s)`` makes a
count (``max_tokens``), and ``tokenizer`` is a tool. The exclusions apply where words start
only: the old rule matched ``n_token`` inside ``session_token``, ``login_token`` and
``admin_token`` and let their values through.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from warehouse.capture.redact import redact_config
from warehouse.capture.secret_keys import (
    COUNT_WORDS,
    DEFAULT_REDACT_PATTERNS,
    KEY_ROLES,
    SECRET_LAST_WORDS,
    TOKEN_NOUNS,
    compact_patterns,
    is_secret_key,
)
from warehouse.capture.secret_keys import (
    SECRET_WORDS as WHOLE_WORDS,
)

PATTERNS = DEFAULT_REDACT_PATTERNS
COMPACT = compact_patterns(PATTERNS)
SECRET_WORDS = ("token", "tokens", "password", "secret", "passwd", "credential", "cookie")
SECRET_PAIRS = (("api", "key"), ("access", "key"), ("private", "key"), ("client", "secret"))


@pytest.mark.parametrize(
    "key", ["session_token", "login_token", "admin_token", "sessionToken", "ADMIN_TOKEN"]
)
def test_a_secret_word_after_a_word_ending_in_n_is_secret(key: str) -> None:
    assert is_secret_key(key, PATTERNS)
    assert redact_config({key: "v4lue-of-the-token"}, PATTERNS) == {key: "***"}


@pytest.mark.parametrize(
    "key", ["max_tokens", "num_tokens", "tokenizer", "max_new_tokens", "maxTokens", "n_tokens"]
)
def test_counts_of_tokens_and_the_tokenizer_are_not_secret(key: str) -> None:
    assert not is_secret_key(key, PATTERNS)
    assert redact_config({key: "bert-base-uncased"}, PATTERNS) == {key: "bert-base-uncased"}


def _join(words: list[str], style: str) -> str:
    """``words`` written as a key in one of the styles configs use."""
    if style == "camel":
        return words[0] + "".join(w.capitalize() for w in words[1:])
    if style == "upper":
        return "_".join(words).upper()
    return {"snake": "_", "kebab": "-", "dotted": "."}[style].join(words)


# a word of the key before the last ones: no pattern inside it, not a count word
plain_words = st.from_regex(r"[a-z]{2,9}", fullmatch=True).filter(
    lambda w: not any(p in w for p in COMPACT) and w not in COUNT_WORDS and "author" not in w
)
styles = st.sampled_from(["snake", "kebab", "dotted", "camel", "upper"])


@given(
    prefix=st.lists(plain_words, min_size=1, max_size=3),
    last=st.one_of(st.sampled_from(SECRET_WORDS).map(lambda w: [w]), st.sampled_from(SECRET_PAIRS)),
    style=styles,
)
@example(prefix=["session"], last=["token"], style="snake")
@example(prefix=["login"], last=["token"], style="snake")
@example(prefix=["admin"], last=["token"], style="snake")
def test_a_secret_word_as_the_last_component_is_secret(
    prefix: list[str], last: list[str], style: str
) -> None:
    key = _join([*prefix, *last], style)
    assert is_secret_key(key, PATTERNS), key


@given(
    prefix=st.lists(plain_words, max_size=2),
    count=st.sampled_from(COUNT_WORDS),
    token=st.sampled_from(["token", "tokens"]),
    style=styles,
)
@example(prefix=[], count="max", token="tokens", style="snake")
@example(prefix=[], count="num", token="tokens", style="snake")
def test_a_count_word_before_tokens_makes_a_count(
    prefix: list[str], count: str, token: str, style: str
) -> None:
    key = _join([*prefix, count, token], style)
    assert not is_secret_key(key, PATTERNS), key


@given(
    prefix=st.lists(plain_words, max_size=2),
    token=st.sampled_from(["token", "tokens"]),
    noun=st.sampled_from(TOKEN_NOUNS),
    suffix=st.lists(plain_words, max_size=1),
    style=styles,
)
def test_tokens_before_a_count_or_size_noun_make_a_count(
    prefix: list[str], token: str, noun: str, suffix: list[str], style: str
) -> None:
    key = _join([*prefix, token, noun, *suffix], style)
    assert not is_secret_key(key, PATTERNS), key


@given(
    prefix=st.lists(plain_words, max_size=2),
    tool=st.sampled_from(["tokenizer", "tokenizers", "tokenize", "tokenization", "tokeniser"]),
    suffix=st.lists(plain_words, max_size=2),
    style=styles,
)
@example(prefix=[], tool="tokenizer", suffix=[], style="snake")
def test_the_tokenizer_is_a_tool_not_a_secret(
    prefix: list[str], tool: str, suffix: list[str], style: str
) -> None:
    key = _join([*prefix, tool, *suffix], style)
    assert not is_secret_key(key, PATTERNS), key


@given(count=st.sampled_from(COUNT_WORDS), prefix=plain_words, style=styles)
def test_a_count_word_glued_to_a_longer_word_is_no_count_word(
    count: str, prefix: str, style: str
) -> None:
    """``admintoken`` holds ``n`` + ``token`` but ``n`` starts no word there."""
    assume(prefix + count not in COUNT_WORDS)  # "mi" + "n" is the count word "min"
    key = _join([prefix + count, "token"], style)
    assert is_secret_key(key, PATTERNS), key


# a plain word that names no secret role either (``sort``, ``cache``, ``primary``)
role_free_words = plain_words.filter(
    lambda w: w not in KEY_ROLES and w not in WHOLE_WORDS and w not in SECRET_LAST_WORDS
)


@given(
    prefix=st.lists(plain_words, max_size=2),
    role=st.sampled_from(sorted(KEY_ROLES)),
    key=st.sampled_from(["key", "keys"]),
    style=styles,
)
@example(prefix=[], role="signing", key="key", style="snake")
@example(prefix=[], role="hmac", key="key", style="camel")
@example(prefix=["stripe"], role="license", key="key", style="upper")
def test_a_key_after_a_secret_role_is_secret(
    prefix: list[str], role: str, key: str, style: str
) -> None:
    """``signing_key``, ``hmacKey``, ``master_key``: the key of a role that keeps secrets
    (these leaked with a password a person picks, found by no value rule)."""
    name = _join([*prefix, role, key], style)
    assert is_secret_key(name, PATTERNS), name
    assert redact_config({name: "Dragon75!8qH5KbJ"}, PATTERNS) == {name: "***"}


@given(
    prefix=st.lists(role_free_words, min_size=1, max_size=2),
    style=st.sampled_from(["snake", "kebab", "dotted", "camel"]),
)
@example(prefix=["sort"], style="snake")
@example(prefix=["primary"], style="snake")
@example(prefix=["cache"], style="snake")
def test_a_key_after_any_other_word_is_no_secret_name(prefix: list[str], style: str) -> None:
    """``sort_key: val_acc`` and ``primary_key: sample_id`` are kept (an UPPER_CASE name is
    read as an environment variable's, where ``*_KEY`` is secret)."""
    name = _join([*prefix, "key"], style)
    assert not is_secret_key(name, PATTERNS), name
    assert redact_config({name: "val_acc"}, PATTERNS) == {name: "val_acc"}


@given(
    prefix=st.lists(role_free_words, max_size=2),
    word=st.sampled_from(sorted(WHOLE_WORDS | SECRET_LAST_WORDS)),
    style=styles,
)
@example(prefix=["db"], word="pass", style="snake")
@example(prefix=["smtp"], word="pwd", style="dotted")
@example(prefix=[], word="bearer", style="snake")
def test_short_secret_words_name_a_secret_as_whole_words(
    prefix: list[str], word: str, style: str
) -> None:
    name = _join([*prefix, word], style)
    assert is_secret_key(name, PATTERNS), name


@given(
    head=st.sampled_from(["by", "com", "sur", "tres", ""]),
    word=st.sampled_from(["pass", "passes", "pwds", "passage"]),
    prefix=st.lists(role_free_words, max_size=1),
    style=styles,
)
@example(head="by", word="pass", prefix=[], style="snake")
@example(head="", word="passes", prefix=["num"], style="snake")
def test_a_short_secret_word_inside_a_longer_word_is_none(
    head: str, word: str, prefix: list[str], style: str
) -> None:
    """``bypass_cache``, ``num_passes``, ``compass``: no whole word ``pass``."""
    assume(head + word != "pass")
    name = _join([*prefix, head + word, "cache"], style)
    assert not is_secret_key(name, PATTERNS), name


@given(
    prefix=st.lists(role_free_words, max_size=2),
    word=st.sampled_from(["PASS", "PAT", "KEY", "DSN", "SESSION", "PASSPHRASE"]),
    head=st.lists(st.from_regex(r"[A-Z]{2,8}", fullmatch=True), max_size=2),
)
@example(prefix=["f1"], word="PAT", head=["AZURE", "DEVOPS", "EXT"])
def test_a_name_ending_like_a_secret_environment_variable_is_secret(
    prefix: list[str], word: str, head: list[str]
) -> None:
    """``f1_AZURE_DEVOPS_EXT_PAT=x`` (a metric named after an assignment): the upper-case tail
    is read by the environment's rules."""
    from warehouse.capture.secret_keys import is_secret_assignment_name

    key = "_".join([*prefix, *head, word])
    assert is_secret_assignment_name(key, COMPACT), key
