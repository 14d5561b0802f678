"""Git capture: the code version a run was made with, through GitPython.

:func:`capture_git` returns a :class:`~warehouse.models.GitInfo` and, when the tree is dirty,
the patch (``git diff HEAD``) as text; the recorder stores that text as an artifact and fills
``diff_uri``. Decisions:

- ``dirty`` means tracked files differ from ``HEAD`` (staged or not): ``git diff HEAD`` is not
  empty. Untracked files do not make a tree dirty and are not in the patch (as in MLflow):
  data and outputs often live there. Folders given in ``exclude`` (the warehouse's own
  folder) never count, even when tracked.
- The patch is redacted (:func:`~warehouse.capture.redact_diff.redact_diff`): files whose names
  look secret lose their changes, secret values are replaced line for line; the paths
  concerned go to ``GitInfo.redacted_files``.
- Speed: it runs at every run start. Branch, commit id and remote are read from the
  repository's files (GitPython, no process); the commit's time and message and the patch
  come from two ``git`` processes started together (a few ms in all).
- ``branch`` is None on a detached ``HEAD``; ``message`` is the commit's full message, stripped;
  ``committed_at`` is the committer time in UTC; ``remote`` is ``origin`` (else the first
  remote) without its user part (:func:`~warehouse.url_credentials.strip_url_credentials`).
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
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warehouse.capture.redact import RedactPolicy
from warehouse.capture.redact_diff import redact_diff
from warehouse.models import GitInfo
from warehouse.url_credentials import strip_url_credentials

if TYPE_CHECKING:
    from git import Repo

log = logging.getLogger(__name__)

TRUNCATED_MARKER = "# warehouse: diff truncated"
"""The start of the last line of a patch cut at ``max_diff_bytes``."""


def capture_git(
    path: Path,
    *,
    with_diff: bool = True,
    max_diff_bytes: int = 10_000_000,
    redaction: RedactPolicy | None = None,
    exclude: Iterable[Path] = (),
) -> tuple[GitInfo, str | None]:
    """The git state of the work tree holding ``path``, and its redacted patch against HEAD
    when dirty; changes under ``exclude`` (folders) are ignored."""
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
        return _capture(
            repo,
            with_diff=with_diff,
            max_diff_bytes=max_diff_bytes,
            redaction=redaction or RedactPolicy(),
            exclude=exclude,
        )
    except git.GitCommandNotFound as exc:  # GIT_PYTHON_REFRESH=quiet and no git executable
        log.debug("git information not recorded: %s", _first_line(exc))
        return GitInfo(), None
    except Exception as exc:
        log.warning("git information not recorded: %s: %s", type(exc).__name__, _first_line(exc))
        return GitInfo(), None
    finally:
        repo.close()


def _capture(
    repo: Repo,
    *,
    with_diff: bool,
    max_diff_bytes: int,
    redaction: RedactPolicy,
    exclude: Iterable[Path],
) -> tuple[GitInfo, str | None]:
    from git import SymbolicReference

    try:  # from the ref files alone: no process (head.commit would ask git for its type)
        sha = SymbolicReference.dereference_recursive(repo, "HEAD")
    except ValueError:
        log.debug("git information not recorded: the repository has no commit yet")
        return GitInfo(), None
    # both processes run at once: the run start waits for the slower one only
    show: Any = repo.git.log(
        "-1", "--no-show-signature", "--format=%cI%x00%B", sha, as_process=True
    )
    patch: Any = None
    if not repo.bare:
        mode = ("--no-color", "--no-ext-diff") if with_diff else ("--name-only",)
        paths = _pathspec(repo, exclude)
        patch = repo.git.diff("HEAD", *mode, "--", *paths, as_process=True)
    try:
        committed, _, message = _read_all(show, 1 << 20).decode("utf-8", "replace").partition("\0")
        data, truncated = _read_limited(patch, max_diff_bytes) if patch else (b"", False)
    finally:
        for handle in (show, patch):
            if handle is not None:
                _close(handle)
    info = GitInfo(
        commit=sha,
        branch=None if repo.head.is_detached else redaction.text(repo.active_branch.name),
        dirty=bool(data),
        remote=_remote_url(repo, redaction),
        message=redaction.text(message.strip()),
        committed_at=datetime.fromisoformat(committed.strip()).astimezone(UTC),
    )
    if not data or not with_diff:
        return info, None
    text = data.decode("utf-8", errors="replace")
    if truncated:
        marker = f"{TRUNCATED_MARKER} at {max_diff_bytes} bytes (capture_git max_diff_bytes)\n"
        text = (text if text.endswith("\n") else text + "\n") + marker
    text, redacted = redact_diff(text, redaction)
    info.redacted_files = redacted
    return info, text


def _pathspec(repo: Repo, exclude: Iterable[Path]) -> list[str]:
    """``.`` minus the excluded folders that lie inside the work tree."""
    top = Path(str(repo.working_tree_dir)).resolve()
    spec = ["."]
    for folder in exclude:
        try:
            rel = Path(folder).resolve().relative_to(top)
        except ValueError:
            continue  # outside the work tree: nothing of it can be in the diff
        if rel.parts:
            spec.append(f":(top,exclude,literal){rel.as_posix()}")
    return spec


def _read_all(handle: Any, limit: int) -> bytes:
    data, _ = _read_limited(handle, limit)
    return data


def _read_limited(handle: Any, max_bytes: int) -> tuple[bytes, bool]:
    """A git process's output, read no further than ``max_bytes`` (then the process is
    killed); raises GitCommandError (with git's stderr) when git fails."""
    proc = handle.proc
    data: bytes = proc.stdout.read(max_bytes + 1)
    truncated = len(data) > max_bytes
    if truncated:
        cut = data.rfind(b"\n", 0, max_bytes)
        data = data[: cut + 1] if cut >= 0 else data[:max_bytes]
        proc.kill()
    else:
        handle.wait()
    return data, truncated


def _close(handle: Any) -> None:
    proc = handle.proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _remote_url(repo: Repo, redaction: RedactPolicy) -> str | None:
    remotes = list(repo.remotes)
    if not remotes:
        return None
    remote = next((r for r in remotes if r.name == "origin"), remotes[0])
    try:
        url = remote.url
    except Exception:  # a remote section without a url
        return None
    return redaction.text(strip_url_credentials(str(url)))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


__all__ = ["TRUNCATED_MARKER", "capture_git"]
