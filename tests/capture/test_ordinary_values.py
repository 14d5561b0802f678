"""The other error (issue 28): the value rules added for fresh secret shapes (tokens after
"key"/"sig", digests after a word, YAML-folded values, flags' values, command lines) leave
ordinary config values alone. Each value is drawn from a generator of its kind (paths, model
names, git commits, UUID run ids, float lists, learning-rate strings, dataset names ...) and
must come back unchanged from the config's redaction and from the text scrub."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from warehouse.capture.redact import RedactPolicy, redact_command, redact_config

POLICY = RedactPolicy()

words = st.from_regex(r"[a-z]{3,10}", fullmatch=True)
hex_digits = st.text(alphabet="0123456789abcdef", min_size=40, max_size=40)
paths = st.lists(
    words | st.from_regex(r"[a-z]{2,8}_[0-9]{1,5}", fullmatch=True), min_size=1, max_size=6
).map(lambda parts: "/" + "/".join(parts))
model_names = st.builds(
    lambda org, base, size, variant: (
        f"{org}/{base}-{size}-{variant}" if org else f"{base}-{size}-{variant}"
    ),
    st.sampled_from(["", "meta-llama", "google", "EleutherAI", "mistralai", "Qwen"]),
    st.sampled_from(["bert", "roberta", "llama", "gpt-neox", "t5", "Qwen2.5", "Mixtral"]),
    st.sampled_from(["base", "large", "7B", "8x7B", "20b", "1.5B", "xl"]),
    st.sampled_from(
        ["uncased", "cased", "Instruct", "v0.1", "hf", "chat", "finetuned-sst-2-english"]
    ),
)
learning_rates = st.floats(1e-7, 1.0).map(lambda x: f"{x:.0e}") | st.floats(1e-7, 1.0).map(str)
uuids = st.uuids().map(str)
float_lists = st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=6)
dataset_names = st.builds(
    lambda org, name, split: f"{org}/{name}" + (f":{split}" if split else ""),
    st.sampled_from(["HuggingFaceFW", "allenai", "openai", "stanfordnlp", "imagenet"]),
    # words, numbers and short tags ("c4", "v2", "sst2"): a name's pieces
    st.from_regex(
        r"[a-z]{3,10}(-([a-z]{2,8}|[0-9]{1,4}|[a-z]{1,3}[0-9]{1,2})){0,3}", fullmatch=True
    ),
    st.sampled_from(["", "train", "validation", "test[:10%]"]),
)
run_names = st.builds(
    lambda base, lr, bs, date: f"{base}-lr{lr}-bs{bs}-{date}",
    words,
    st.sampled_from(["3e-4", "1e-5", "0.001"]),
    st.integers(1, 4096),
    st.from_regex(r"20[0-9]{6}", fullmatch=True),
)

ordinary_configs = st.fixed_dictionaries(
    {
        "model": st.fixed_dictionaries(
            {
                "name": model_names,
                "tokenizer": model_names,
                "revision": hex_digits,
                "max_tokens": st.integers(1, 1 << 20),
                "key_dim": st.integers(1, 4096),
            }
        ),
        "data": st.fixed_dictionaries(
            {
                "path": paths,
                "dataset": dataset_names,
                "sha256": st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
                "sort_key": words,
                "cache_key": st.builds(lambda w, h: f"{w}-{h}", words, hex_digits),
            }
        ),
        "optim": st.fixed_dictionaries(
            {
                "lr": learning_rates,
                "betas": float_lists,
                "schedule": st.sampled_from(["cosine", "linear"]),
            }
        ),
        "run": st.fixed_dictionaries(
            {
                "commit": hex_digits,
                "id": uuids,
                "name": run_names,
                "output_dir": paths,
                "seed": st.integers(0, 2**31),
            }
        ),
    }
)


def _strings(node: object) -> list[str]:
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return [node] if isinstance(node, str) else []


@settings(max_examples=200, deadline=None)
@given(config=ordinary_configs)
def test_ordinary_config_values_are_kept(config: dict[str, object]) -> None:
    assert redact_config(config, POLICY) == config
    for text in _strings(config):
        assert POLICY.text(text) == text, text


@settings(max_examples=100, deadline=None)
@given(config=ordinary_configs)
def test_ordinary_config_as_yaml_and_as_a_diff_is_kept(config: dict[str, object]) -> None:
    """The text rules that read folded YAML and diff lines leave an ordinary config's YAML
    (a diff of it too) as it is."""
    import yaml

    text = yaml.safe_dump(config, sort_keys=False, width=60)
    assert POLICY.text(text) == text
    diff = "".join(f"+{line}\n" for line in text.splitlines())
    assert POLICY.text(diff) == diff


@given(
    flags=st.lists(
        st.tuples(
            st.sampled_from(["--lr", "--max-tokens", "--model", "--data-dir", "--sort-key", "-p"]),
            learning_rates | model_names | paths | st.integers(1, 65535).map(str),
        ),
        max_size=5,
    )
)
@example(flags=[("-p", "8080"), ("--model", "bert-base-uncased")])
def test_ordinary_command_lines_are_kept(flags: list[tuple[str, str]]) -> None:
    argv = ["python", "train.py", *(part for pair in flags for part in pair)]
    assert redact_command(argv, POLICY) == argv
    line = " ".join(argv)
    assert POLICY.text(line) == line


@given(name=st.from_regex(r"[a-z]{2,12}([_-][a-z]{2,12}){0,2}", fullmatch=True), commit=hex_digits)
@example(name="commit", commit="3f786850e387550fdab836ed7e6dc881de23001b")
def test_a_hex_digest_after_a_word_is_no_token(name: str, commit: str) -> None:
    """``data-<md5>``, ``commit_<sha1>``: a digest named by a word is judged as hex is, so it
    is kept (a bare hex digest is no secret to the token rule either)."""
    for text in (f"{name}-{commit}", f"{name}_{commit}", f"{name}:{commit}"):
        assert POLICY.text(text) == text, text
