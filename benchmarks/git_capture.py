"""Git capture at run start: a project of 200 tracked files with a typical uncommitted edit.

    python benchmarks/git_capture.py [--files 200] [--repeat 50]

Prints the median and 90th percentile of ``capture_git`` (commit, branch, remote, dirty, the
redacted patch), clean and dirty. It runs at every run start, so it should stay a few ms.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from warehouse.capture.git import capture_git


def make_project(root: Path, files: int) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "b@example.com")
    git("config", "user.name", "Bench")
    git("remote", "add", "origin", "https://u:tok@github.com/org/project.git")
    for i in range(files):
        folder = root / f"pkg{i % 10}"
        folder.mkdir(exist_ok=True)
        lines = [f"def f{j}(x):\n    return x * {j}\n" for j in range(40)]
        (folder / f"mod{i}.py").write_text("".join(lines))
    (root / "config.yaml").write_text("lr: 0.1\nbatch_size: 64\ndb:\n  password: hunter22\n")
    git("add", "-A")
    git("commit", "-q", "-m", "initial")


def timed(root: Path, repeat: int) -> tuple[float, float]:
    capture_git(root)  # warm: imports, GitPython's first probe
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        capture_git(root, exclude=[root / ".warehouse"])
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9) - 1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_project(root, args.files)
        median, p90 = timed(root, args.repeat)
        print(f"clean: median {median:.2f} ms, p90 {p90:.2f} ms")
        edit = root / "pkg3" / "mod3.py"
        edit.write_text(edit.read_text().replace("x * 7", "x * 7 + 1") + "\n# tuned\n")
        (root / "config.yaml").write_text("lr: 0.2\nbatch_size: 64\ndb:\n  password: hunter23\n")
        median, p90 = timed(root, args.repeat)
        print(f"dirty: median {median:.2f} ms, p90 {p90:.2f} ms")


if __name__ == "__main__":
    main()
