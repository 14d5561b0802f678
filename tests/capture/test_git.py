"""Git capture against real repositories made with GitPython in a temporary folder."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import git
import pytest

from warehouse.capture.git import TRUNCATED_MARKER, capture_git
from warehouse.models import GitInfo

MESSAGE = "Train the baseline\n\nWith a body that explains why.\n"


def make_repo(path: Path) -> git.Repo:
    path.mkdir(parents=True, exist_ok=True)
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as config:
        config.set_value("user", "name", "Test")
        config.set_value("user", "email", "test@example.com")
        config.set_value("commit", "gpgsign", "false")
    return repo


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[git.Repo]:
    """A repository with one commit of ``train.py`` on ``main``, committed at a known time."""
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "repo" / "train.py").write_text("print('train')\n")
    repo.index.add(["train.py"])
    when = datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    repo.index.commit(MESSAGE, author_date=when, commit_date=when)
    yield repo
    repo.close()


def workdir(repo: git.Repo) -> Path:
    assert repo.working_tree_dir is not None
    return Path(repo.working_tree_dir)


def test_a_clean_tree_records_commit_branch_message_and_utc_time(repo: git.Repo) -> None:
    info, diff = capture_git(workdir(repo))
    assert info.commit == repo.head.commit.hexsha
    assert len(info.commit) == 40
    assert info.branch == "main"
    assert info.dirty is False
    assert info.message == MESSAGE.strip()
    assert info.committed_at == datetime(2024, 1, 2, 1, 4, 5, tzinfo=UTC)
    assert info.committed_at.utcoffset() is not None
    assert info.committed_at.tzinfo == UTC
    assert info.remote is None
    assert info.diff_uri is None
    assert diff is None


def test_a_path_below_the_work_tree_root_finds_the_repository(repo: git.Repo) -> None:
    sub = workdir(repo) / "src" / "pkg"
    sub.mkdir(parents=True)
    assert capture_git(sub)[0].commit == repo.head.commit.hexsha


def test_a_modified_tracked_file_makes_the_tree_dirty_with_its_patch(repo: git.Repo) -> None:
    (workdir(repo) / "train.py").write_text("print('train')\nprint('more epochs')\n")
    info, diff = capture_git(workdir(repo))
    assert info.dirty is True
    assert diff is not None
    assert "+print('more epochs')" in diff
    assert diff.startswith("diff --git a/train.py b/train.py")


def test_a_staged_change_counts_as_dirty_and_is_in_the_patch(repo: git.Repo) -> None:
    (workdir(repo) / "model.py").write_text("LAYERS = 3\n")
    repo.index.add(["model.py"])
    info, diff = capture_git(workdir(repo))
    assert info.dirty is True
    assert diff is not None
    assert "+LAYERS = 3" in diff


def test_untracked_files_do_not_make_the_tree_dirty(repo: git.Repo) -> None:
    (workdir(repo) / "outputs.csv").write_text("a,b\n")
    info, diff = capture_git(workdir(repo))
    assert info.dirty is False
    assert diff is None


def test_no_patch_is_taken_when_diffs_are_turned_off(repo: git.Repo) -> None:
    (workdir(repo) / "train.py").write_text("changed\n")
    info, diff = capture_git(workdir(repo), with_diff=False)
    assert info.dirty is True
    assert diff is None


def test_a_huge_patch_is_cut_at_the_limit_with_a_marker(repo: git.Repo) -> None:
    lines = "".join(f"print({i})\n" for i in range(50_000))
    (workdir(repo) / "train.py").write_text(lines)
    info, diff = capture_git(workdir(repo), max_diff_bytes=10_000)
    assert info.dirty is True
    assert diff is not None
    body, marker = diff.rstrip("\n").rsplit("\n", 1)
    assert marker.startswith(TRUNCATED_MARKER)
    assert len(body.encode()) <= 10_000
    assert body.endswith(")")  # cut at a line end, not inside a line


def test_binary_and_non_utf8_changes_give_a_readable_patch(repo: git.Repo) -> None:
    (workdir(repo) / "weights.bin").write_bytes(bytes(range(256)) * 4)
    (workdir(repo) / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    repo.index.add(["weights.bin", "latin1.txt"])
    info, diff = capture_git(workdir(repo))
    assert info.dirty is True
    assert diff is not None
    assert "Binary files" in diff
    assert "+caf\ufffd" in diff
    diff.encode("utf-8")  # what the recorder stores


def test_a_detached_head_has_no_branch(repo: git.Repo) -> None:
    first = repo.head.commit.hexsha
    (workdir(repo) / "train.py").write_text("v2\n")
    repo.index.add(["train.py"])
    repo.index.commit("second")
    repo.git.checkout(first)  # in the temporary repository only
    info, _ = capture_git(workdir(repo))
    assert info.branch is None
    assert info.commit == first
    assert info.dirty is False


def test_a_remote_with_a_token_is_recorded_without_it(repo: git.Repo) -> None:
    repo.create_remote("upstream", "https://other.example/x.git")
    repo.create_remote("origin", "https://user:ghp_s3cr3tTokenValue@github.com/org/repo.git")
    info, _ = capture_git(workdir(repo))
    assert info.remote == "https://github.com/org/repo.git"
    assert "ghp_s3cr3tTokenValue" not in info.model_dump_json()


def test_without_origin_the_first_remote_is_recorded(repo: git.Repo) -> None:
    repo.create_remote("upstream", "git@github.com:org/repo.git")
    assert capture_git(workdir(repo))[0].remote == "git@github.com:org/repo.git"


def test_a_repository_without_commits_gives_empty_git_fields(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_repo(tmp_path / "fresh").close()
    (tmp_path / "fresh" / "train.py").write_text("x\n")
    with caplog.at_level(logging.DEBUG, logger="warehouse.capture.git"):
        assert capture_git(tmp_path / "fresh") == (GitInfo(), None)
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG]


@pytest.mark.parametrize(
    "name", [pytest.param("plain", id="not-a-repo"), pytest.param("nope/x", id="missing-path")]
)
def test_outside_a_repository_git_fields_are_empty_without_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    (tmp_path / "plain").mkdir()
    with caplog.at_level(logging.DEBUG, logger="warehouse.capture.git"):
        assert capture_git(tmp_path / name) == (GitInfo(), None)
    assert not [r for r in caplog.records if r.levelno > logging.DEBUG]


def test_without_a_git_executable_git_fields_are_empty(repo: git.Repo, tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from warehouse.capture.git import capture_git; "
        "info, diff = capture_git(Path(sys.argv[1])); print(info.commit, diff)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(workdir(repo))],
        env={**os.environ, "PATH": str(tmp_path / "empty-bin")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "None None"
