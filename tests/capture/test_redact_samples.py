"""Per-sample text (issue 28, item 2): every column that can hold text is scrubbed, and the
scan by shape first gives exactly what the full scan of every row gives, reading only the
rows it marks."""

from __future__ import annotations

import random
import secrets
import string

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.capture.fresh_secrets import SHAPES, Secret, make
from tests.capture.planted import fresh_secrets
from warehouse.capture import redact_samples
from warehouse.capture.redact import REDACTED, RedactPolicy
from warehouse.capture.redact_samples import scrub_batch, shape_pattern

POLICY = RedactPolicy()
PLANTED = fresh_secrets()


def make_one(rng: random.Random) -> Secret:
    """A fresh secret of a shape drawn by ``rng``."""
    return make(rng.choice(sorted(SHAPES)), rng)


def _full_scan(values: list[str | None], policy: RedactPolicy = POLICY) -> list[str | None]:
    return [None if v is None else policy.text(v) for v in values]


fragments = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=string.ascii_letters + string.digits + "_-/+=", min_size=15, max_size=70),
    st.sampled_from([p.text for p in PLANTED]),
    st.sampled_from(["password=", "token: ", "max_tokens=512", "https://u:p@h/x", "Bearer "]),
    st.sampled_from(["sk-", "AKIA", "eyJ", "-----BEGIN RSA PRIVATE KEY-----\n", "\n", " "]),
    # the shapes of the fresh red-team round: each rule of theirs must be in the shape pattern
    st.integers(0, 2**32).map(lambda seed: make_one(random.Random(seed)).text),
    st.sampled_from(
        ["--password ", "--signing-key ", "db_pass=", "key: ", "sig=", "mysql -u root -p", "login "]
    ),
    st.sampled_from(['\\"token\\": \\"', "AUTH_PAT=", "password ", "machine h login u password "]),
)
rows = st.lists(st.lists(fragments, max_size=6).map("".join) | st.none(), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(values=rows)
def test_the_scan_by_shape_gives_the_full_scans_answer(values: list[str | None]) -> None:
    batch = pa.record_batch({"text": pa.array(values, pa.string())})
    clean, changed = scrub_batch(batch, POLICY)
    expected = _full_scan(values)
    assert clean.column("text").to_pylist() == expected
    assert changed.get("text", 0) == sum(a != b for a, b in zip(values, expected, strict=True))


def test_rows_no_shape_marks_are_never_scanned_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 rows of plain prose cost no full scan; each planted row costs one."""
    scanned: list[str] = []
    real = RedactPolicy.text

    def counting(self: RedactPolicy, text: str, secrets: object = ()) -> str:
        scanned.append(text)
        return real(self, text, secrets)  # type: ignore[arg-type]

    prose = [f"sample {i}: the cat sat on the mat and the model said so" for i in range(10_000)]
    planted = [f"row with {p.text}" for p in PLANTED]
    monkeypatch.setattr(RedactPolicy, "text", counting)
    batch = pa.record_batch({"prompt": prose + planted})
    clean, changed = scrub_batch(batch, POLICY)
    full_scans = [t for t in scanned if t in planted]
    assert len(scanned) - len(full_scans) <= 1  # the column name, nothing else of the prose
    assert len(full_scans) <= len(planted)
    assert changed == {"prompt": len(planted)}
    assert all(p.secret not in v for p in PLANTED for v in clean.column("prompt").to_pylist())


def _secret() -> str:
    return "ghp_" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(36))


def test_every_column_that_can_hold_text_is_scrubbed_and_counted() -> None:
    key = _secret()
    text = f"token {key} here"
    struct = pa.struct([("note", pa.string()), ("n", pa.int64())])
    columns = {
        "string": pa.array([text, "ok"], pa.string()),
        "large_string": pa.array([text, "ok"], pa.large_string()),
        "dictionary": pa.array([text, text]).dictionary_encode(),
        "binary": pa.array([text.encode(), b"\xff\xfe raw"], pa.binary()),
        "list": pa.array([[text, "ok"], []], pa.list_(pa.string())),
        "struct": pa.array([{"note": text, "n": 1}, {"note": "ok", "n": 2}], struct),
        "map": pa.array([[("k", text)], []], pa.map_(pa.string(), pa.string())),
        "number": pa.array([1.5, 2.5]),
    }
    if hasattr(pa, "string_view"):
        columns["string_view"] = pa.array([text, "ok"], pa.string_view())
    batch = pa.record_batch(columns)
    clean, changed = scrub_batch(batch, POLICY)
    assert key not in str(clean.to_pylist())
    assert clean.column("number") == batch.column("number")
    assert clean.column("binary").to_pylist()[1] == b"\xff\xfe raw"  # not text: left as it is
    assert set(changed) == set(columns) - {"number"}
    assert clean.schema == batch.schema
    assert REDACTED in clean.column("string").to_pylist()[0]


def test_secret_column_names_are_renamed_and_skipped_columns_left_alone() -> None:
    key = _secret()
    batch = pa.record_batch({f"acc_{key}": [1.0], "output": [f"/data/{key}.png"]})
    clean, changed = scrub_batch(batch, POLICY, skip=("output",))
    name = clean.schema.names[0]
    assert key not in name
    assert REDACTED in name
    assert changed == {f"{name} (name)": 1}
    assert clean.column("output").to_pylist() == [f"/data/{key}.png"]  # an input, not stored


def test_the_run_s_own_secrets_are_scrubbed_from_samples_too() -> None:
    value = "plain-looking-db-pass"
    batch = pa.record_batch({"prompt": [f"connect with {value} now", "fine"]})
    clean, _ = scrub_batch(batch, POLICY, secrets=[value])
    assert clean.column("prompt").to_pylist() == [f"connect with {REDACTED} now", "fine"]


def test_a_rule_re2_cannot_read_sends_every_row_to_the_full_scan() -> None:
    policy = RedactPolicy(values=(r"(?P<q>['\"])corp-\d+(?P=q)",))  # a backreference
    assert shape_pattern(policy) is None
    batch = pa.record_batch({"prompt": ["id 'corp-123' ok", "nothing"]})
    clean, changed = scrub_batch(batch, policy)
    assert clean.column("prompt").to_pylist() == ["id *** ok", "nothing"]
    assert changed == {"prompt": 1}


@pytest.mark.parametrize(
    ("python", "re2"),
    [
        (r"(?<![A-Za-z0-9/+=])[A-Z]{4}", "[A-Z]{4}"),
        (r"\bhf_[A-Za-z0-9]{20,}+", "hf_[A-Za-z0-9]{20,}"),
        (r"(?P<secret>x)(?=y)", "(?:x)"),
        (r"^a$", "a"),
        (r"g{50,1024}", "g{50,}"),
        (r"(?>ab)c", "(?:ab)c"),
    ],
)
def test_rules_are_read_by_re2_with_their_conditions_dropped(python: str, re2: str) -> None:
    assert redact_samples._re2(python) == re2


def test_the_shape_pattern_holds_every_rule_and_re2_reads_it() -> None:
    pattern = shape_pattern(RedactPolicy(values=("corp-[0-9]{6}",)))
    assert pattern is not None
    assert "AccountKey=" in pattern  # detect-secrets' Azure plugin
    assert "corp-[0-9]{6}" in pattern  # the user's
    assert "authorization" in pattern  # the project's own


SECRET_COLUMNS = ["password", "db_password", "api_key", "apiKey", "client_secret", "auth_token"]
ORDINARY_COLUMNS = ["label", "text", "prediction", "token", "tokens", "sort_key", "passage"]


@given(
    st.sampled_from(SECRET_COLUMNS),
    st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=1, max_size=20),
)
def test_a_text_column_under_a_secret_name_is_hidden_whatever_its_values(
    name: str, values: list[str | None]
) -> None:
    """A password a person picked ('hunter2') has no shape: under a secret column name it is
    hidden anyway, as a config value under a secret key is; nulls stay null."""
    batch = pa.record_batch({"sample_id": [str(i) for i in range(len(values))], name: values})
    for column in (batch, batch.set_column(1, name, batch.column(1).dictionary_encode())):
        clean, changed = scrub_batch(column, POLICY)
        hidden = [None if v is None else REDACTED for v in values]
        assert clean.column(name).to_pylist() == hidden
        assert changed.get(name, 0) == sum(v is not None and v != REDACTED for v in values)


@pytest.mark.parametrize("name", ORDINARY_COLUMNS)
def test_a_text_column_under_an_ordinary_name_keeps_its_values(name: str) -> None:
    values = ["hunter2", "cat", None, "bert-base-uncased"]
    clean, changed = scrub_batch(pa.record_batch({name: values}), POLICY)
    assert clean.column(name).to_pylist() == values
    assert changed == {}
