"""download_outputs: sample rows in, files named by sample id out, from any object store."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from warehouse.errors import ConfigurationError, NotFound
from warehouse.objects.base import ObjectStore, object_key
from warehouse.objects.download import download_outputs, output_file_name
from warehouse.settings import load


def _put(store: ObjectStore, sample_id: str, data: bytes, ext: str = ".png") -> str:
    key = object_key("digits", "run-1", "outputs", f"val/{sample_id}{ext}")
    return store.put(key, data, content_type=None, sha256=hashlib.sha256(data).hexdigest())


def _row(sample_id: str, uri: str | None) -> dict[str, Any]:
    return {"run_id": "run-1", "split": "val", "sample_id": sample_id, "output_uri": uri}


def test_each_output_is_written_as_sample_id_plus_extension(
    object_store: ObjectStore, tmp_path: Path
) -> None:
    rows = [_row(str(i), _put(object_store, str(i), f"image {i}".encode())) for i in range(12)]
    rows.insert(3, _row("no-output", None))

    paths = download_outputs(rows, tmp_path / "out", lambda uri: object_store, progress=False)

    assert paths == [tmp_path / "out" / f"{i}.png" for i in range(12)]
    assert all(path.read_bytes() == f"image {i}".encode() for i, path in enumerate(paths))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in paths)


def test_settings_pick_the_store_by_uri_scheme(
    s3_env: dict[str, str], local_store: ObjectStore, tmp_path: Path
) -> None:
    settings = load()
    from warehouse.objects.s3 import S3ObjectStore

    with S3ObjectStore.from_settings(settings) as s3:
        rows = [
            _row("in-s3", _put(s3, "in-s3", b"from s3", ".jpg")),
            _row("local", _put(local_store, "local", b"from disk", ".npy")),
        ]
    paths = download_outputs(rows, tmp_path / "out", settings, progress=False)
    assert [p.name for p in paths] == ["in-s3.jpg", "local.npy"]
    assert [p.read_bytes() for p in paths] == [b"from s3", b"from disk"]


def test_missing_outputs_are_listed_after_the_others_are_written(
    object_store: ObjectStore, tmp_path: Path
) -> None:
    good = _put(object_store, "1", b"ok")
    gone = good.replace("1.png", "2.png")
    with pytest.raises(NotFound, match=r"1 of 2 outputs are missing.*2\.png"):
        download_outputs(
            [_row("1", good), _row("2", gone)], tmp_path, lambda uri: object_store, progress=False
        )
    assert (tmp_path / "1.png").read_bytes() == b"ok"
    assert not (tmp_path / "2.png").exists()
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_repeated_sample_id_gets_a_numbered_name(
    local_store: ObjectStore, tmp_path: Path
) -> None:
    uri = _put(local_store, "7", b"x")
    paths = download_outputs(
        [_row("7", uri), _row("7", uri)], tmp_path / "o", lambda u: local_store, progress=False
    )
    assert [p.name for p in paths] == ["7.png", "7-2.png"]


@pytest.mark.parametrize(
    ("sample_id", "uri", "name"),
    [
        pytest.param("a/b", "s3://b/p/x/a/b.png", "a_b.png", id="slash"),
        pytest.param("..", "file:///x/y.tar.gz", "__.gz", id="dot-dot"),
        pytest.param("img 3", "s3://b/k/img%203.PNG", "img 3.PNG", id="space"),
        pytest.param("42", "s3://b/k/42", "42", id="no-extension"),
    ],
)
def test_file_names_are_safe_and_keep_the_extension(sample_id: str, uri: str, name: str) -> None:
    assert output_file_name(sample_id, uri) == name


def test_progress_bar_goes_to_stderr(
    local_store: ObjectStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [_row(str(i), _put(local_store, str(i), b"x")) for i in range(3)]
    download_outputs(rows, tmp_path / "o", lambda u: local_store, progress=True)
    captured = capsys.readouterr()
    assert "downloading" in captured.err
    assert "3/3" in captured.err
    assert captured.out == ""


def test_an_unsupported_scheme_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="file:// and s3://"):
        download_outputs([_row("1", "gs://bucket/1.png")], tmp_path, load(), progress=False)


def test_no_rows_with_outputs_write_nothing(tmp_path: Path) -> None:
    assert download_outputs([_row("1", None)], tmp_path / "o", load(), progress=False) == []
    assert not (tmp_path / "o").exists()


def test_importing_the_module_does_not_import_boto3_or_rich() -> None:
    code = (
        "import sys, warehouse.objects.download; "
        "print(sorted(m for m in ('boto3', 'botocore', 'rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
