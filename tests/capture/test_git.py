"""Git capture against real repositories made with GitPython in a temporary folder."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

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


def test_without_origin_the_first_remote_is_recorded_without_its_user(repo: git.Repo) -> None:
    repo.create_remote("upstream", "git@github.com:org/repo.git")
    assert capture_git(workdir(repo))[0].remote == "github.com:org/repo.git"


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


# --- redaction, the warehouse's own folder, and the cost ------------------------------------

SECRET_OLD, SECRET_NEW = "pLantedOldPassword1", "pLantedNewPassword2"


def _commit_files(repo: git.Repo, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = workdir(repo) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    repo.index.add(list(files))
    repo.index.commit("add files")


def test_the_diff_leaves_out_secret_files_and_values_and_the_rest_still_applies(
    repo: git.Repo, tmp_path: Path
) -> None:
    _commit_files(
        repo,
        {
            ".env": f"DB_URL=postgres://u:{SECRET_OLD}@h/db\n",
            "deploy/id_rsa": "old key\n",
            "config.yaml": f"lr: 0.1\ndb:\n  password: {SECRET_OLD}\n  host: h\n",
            "model.py": "LAYERS = 3\n",
        },
    )
    root = workdir(repo)
    (root / ".env").write_text(f"DB_URL=postgres://u:{SECRET_NEW}@h/db\n")
    (root / "deploy" / "id_rsa").write_text("new key\n")
    (root / "config.yaml").write_text(f"lr: 0.2\ndb:\n  password: {SECRET_NEW}\n  host: h\n")
    (root / "model.py").write_text("LAYERS = 4\nWIDTH = 128\n")
    (root / "train.py").write_text("print('train')\nprint('more epochs')\n")
    info, diff = capture_git(root)
    assert diff is not None
    assert SECRET_OLD not in diff
    assert SECRET_NEW not in diff
    assert "new key" not in diff
    assert info.redacted_files == [".env", "config.yaml", "deploy/id_rsa"]
    assert "# warehouse: redacted .env: secret-looking file name" in diff
    assert "password: ***" in diff
    # on a clean checkout of HEAD, the patch applies to every file not listed as redacted
    clone = tmp_path / "clone"
    git.Repo.clone_from(str(root), clone).close()
    (tmp_path / "patch.diff").write_text(diff)
    excluded = [f"--exclude={path}" for path in info.redacted_files]
    subprocess.run(
        ["git", "apply", "--check", *excluded, str(tmp_path / "patch.diff")],
        cwd=clone,
        check=True,
        capture_output=True,
    )
    subprocess.run(["git", "apply", *excluded, str(tmp_path / "patch.diff")], cwd=clone, check=True)
    assert (clone / "model.py").read_text() == "LAYERS = 4\nWIDTH = 128\n"
    assert (clone / "train.py").read_text() == "print('train')\nprint('more epochs')\n"


def test_the_warehouse_folder_never_makes_the_tree_dirty_even_when_tracked(
    repo: git.Repo,
) -> None:
    root = workdir(repo)
    _commit_files(repo, {".warehouse/catalog/journal": "1\n"})
    (root / ".warehouse" / "catalog" / "journal").write_text("1\n2\n")
    info, diff = capture_git(root, exclude=[root / ".warehouse"])
    assert info.dirty is False
    assert diff is None
    assert capture_git(root)[0].dirty is True  # without the exclusion it would count
    (root / "train.py").write_text("changed\n")
    info, diff = capture_git(root, exclude=[root / ".warehouse"])
    assert info.dirty is True
    assert diff is not None
    assert "journal" not in diff


def test_capture_starts_two_git_processes_at_most(
    repo: git.Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir(repo) / "train.py").write_text("print('changed')\n")
    started: list[list[str]] = []
    real = subprocess.Popen.__init__

    def counting(self: Any, args: Any, *rest: Any, **kwargs: Any) -> None:
        started.append(list(args) if isinstance(args, list | tuple) else [str(args)])
        real(self, args, *rest, **kwargs)

    capture_git(workdir(repo))  # GitPython's one-off version probe, if any, happens here
    monkeypatch.setattr(subprocess.Popen, "__init__", counting)
    info, diff = capture_git(workdir(repo))
    assert info.dirty is True
    assert diff is not None
    assert len(started) <= 2, started  # the commit's message/time and the patch, at once
