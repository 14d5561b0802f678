"""Object keys fit any filesystem: a segment over 200 bytes is shortened by one rule, the
same on every store (found by the secrets red team: a 300-character artifact name crashed
the run with "File name too long ... check the warehouse folder's permissions")."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from hypothesis import given
from hypothesis import strategies as st

from warehouse.objects.base import SEGMENT_BYTES, fit_segment, object_key

names = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/\\"), min_size=1
)


@given(names)
def test_every_segment_fits_and_a_fitting_one_is_kept(name: str) -> None:
    fitted = fit_segment(name)
    assert len(fitted.encode()) <= SEGMENT_BYTES
    if len(name.encode()) <= SEGMENT_BYTES:
        assert fitted == name
    else:
        assert fitted == fit_segment(name)  # the same wherever it is made


@given(names, st.sampled_from(["", ".txt", ".pt", ".tar.gz"]))
def test_long_names_that_differ_stay_apart_and_keep_their_suffix(stem: str, suffix: str) -> None:
    a = "a" * 300 + stem + suffix
    b = "a" * 300 + stem + "x" + suffix
    assert fit_segment(a) != fit_segment(b)
    assert fit_segment(a).endswith(suffix.rsplit(".", 1)[-1] if suffix else "")


def test_a_run_logs_an_artifact_with_a_300_character_name(home: Path) -> None:
    import warehouse

    name = "é" * 150 + ".txt"  # 300 bytes and more
    with warehouse.start_run(experiment="long-names") as run:
        ref = run.log_artifact(b"hello", name)
    assert ref.name == name  # the record keeps the name as given
    stored = Path(unquote(urlparse(ref.uri).path))
    assert stored.read_bytes() == b"hello"
    assert len(stored.name.encode()) <= SEGMENT_BYTES
    assert stored.as_posix().endswith(object_key("long-names", run.run_id, "artifacts", name))
