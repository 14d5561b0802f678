"""Git capture: the code version a run was made with, through GitPython.

:func:`capture_git` returns a :class:`~warehouse.models.GitInfo` and, when the tree is dirty,
the patch (``git diff HEAD``) as text; the recorder stores that text as an artifact and fills
``diff_uri``. Decisions:

- ``dirty`` means tracked files differ from ``HEAD`` (staged or not). Untracked files do not
  make a tree dirty and are not in the patch (as in MLflow): data and outputs often live there.
- ``branch`` is None on a detached ``HEAD``; ``message`` is the commit's full message, stripped;
  ``committed_at`` is the committer time in UTC; ``remote`` is ``origin`` (else the first
  remote) with any credentials removed (:func:`~warehouse.capture.redact.strip_url_credentials`).
- The patch is plain ``git diff HEAD --no-color --no-ext-diff``: binary files show as
  "Binary files ... differ", text that is not UTF-8 is decoded with replacement characters,
  and a patch longer than ``max_diff_bytes`` is cut at a line end and ends with a marker line
  starting ``# warehouse: diff truncated``. Git is never asked for more than that.
- No repository, no ``git`` executable, no commit yet: empty ``GitInfo`` and no patch, with a
  debug line only. Any other git failure (e.g. "dubious ownership") gives the same empty
  result with one warning saying why; it never raises.
"""

from __future__ import annotations

import logging
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.capture.redact import strip_url_credentials
from warehouse.models import GitInfo

if TYPE_CHECKING:
    from git import Repo

log = logging.getLogger(__name__)

TRUNCATED_MARKER = "# warehouse: diff truncated"
"""The start of the last line of a patch cut at ``max_diff_bytes``."""


def capture_git(
    path: Path, *, with_diff: bool = True, max_diff_bytes: int = 10_000_000
) -> tuple[GitInfo, str | None]:
    """The git state of the work tree holding ``path``, and its patch against HEAD when dirty."""
    try:
        import git
    except Exception as exc:  # GitPython raises ImportError when no git executable is found
        log.debug("git information not recorded: GitPython unavailable (%s)", exc)
        return GitInfo(), None
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        log.debug("git information not recorded: %s is not inside a git work tree", path)
        return GitInfo(), None
    except Exception as exc:
        log.warning("git information not recorded: %s: %s", type(exc).__name__, exc)
        return GitInfo(), None
    try:
        return _capture(repo, with_diff=with_diff, max_diff_bytes=max_diff_bytes)
    except git.GitCommandNotFound as exc:  # GIT_PYTHON_REFRESH=quiet and no git executable
        log.debug("git information not recorded: %s", _first_line(exc))
        return GitInfo(), None
    except Exception as exc:
        log.warning("git information not recorded: %s: %s", type(exc).__name__, _first_line(exc))
        return GitInfo(), None
    finally:
        repo.close()


def _capture(repo: Repo, *, with_diff: bool, max_diff_bytes: int) -> tuple[GitInfo, str | None]:
    if not repo.head.is_valid():
        log.debug("git information not recorded: the repository has no commit yet")
        return GitInfo(), None
    commit = repo.head.commit
    message = commit.message
    if isinstance(message, bytes):
        message = message.decode("utf-8", errors="replace")
    dirty = False if repo.bare else repo.is_dirty(untracked_files=False)
    info = GitInfo(
        commit=commit.hexsha,
        branch=None if repo.head.is_detached else repo.active_branch.name,
        dirty=dirty,
        remote=_remote_url(repo),
        message=message.strip(),
        committed_at=commit.committed_datetime.astimezone(UTC),
    )
    diff = _diff(repo, max_diff_bytes) if dirty and with_diff else None
    return info, diff


def _remote_url(repo: Repo) -> str | None:
    remotes = list(repo.remotes)
    if not remotes:
        return None
    remote = next((r for r in remotes if r.name == "origin"), remotes[0])
    try:
        url = remote.url
    except Exception:  # a remote section without a url
        return None
    return strip_url_credentials(str(url))


def _diff(repo: Repo, max_bytes: int) -> str | None:
    """``git diff HEAD`` as text, read no further than ``max_bytes`` (+ a truncation marker)."""
    handle: Any = repo.git.diff("HEAD", "--no-color", "--no-ext-diff", as_process=True)
    proc = handle.proc
    try:
        data: bytes = proc.stdout.read(max_bytes + 1)
        truncated = len(data) > max_bytes
        if truncated:
            cut = data.rfind(b"\n", 0, max_bytes)
            data = data[: cut + 1] if cut >= 0 else data[:max_bytes]
            proc.kill()
        else:
            handle.wait()  # raises GitCommandError (with git's stderr) on failure
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    if not data:
        return None
    text = data.decode("utf-8", errors="replace")
    if truncated:
        marker = f"{TRUNCATED_MARKER} at {max_bytes} bytes (capture_git max_diff_bytes)\n"
        text = (text if text.endswith("\n") else text + "\n") + marker
    return text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


__all__ = ["TRUNCATED_MARKER", "capture_git"]
