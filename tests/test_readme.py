"""The README stays true: every code block in it runs (issue 32, item 1), every setting is
documented, every command it names exists.

**Every block runs**, as a newcomer would run it, found by parsing the README (a block added
tomorrow runs too, and a failure names it: its line, section and output):

- the first ``bash`` block (the first screen) makes the *world*: a temporary warehouse
  holding what its commands record (``warehouse demo``); every later block starts from a
  fresh copy of it, in a fresh temporary folder;
- ``python`` blocks run as a script of their own (a fresh interpreter, ``WAREHOUSE_HOME``
  the copy), so a block must be whole: import and define what it uses;
- ``bash``/``sh``/``shell`` blocks run as one bash script (``set -e``), ``console`` blocks
  each ``$ command`` line; against the test servers: an Elasticsearch URL in a block
  (``http://localhost:9200``, ``https://es.example.org:9200``) becomes the session's noida-db
  (an index prefix of the block alone, installed as ``warehouse init`` installs it), an
  ``s3://bucket/prefix`` a fresh bucket of the moto server, its endpoint ``:9000`` moto's;
- ``yaml``, ``toml`` and ``json`` blocks must parse; ``text`` blocks are output shown, not run.

A block of another language, or with none, fails until it is tagged. Commands that cannot
run in a test are in :data:`NOT_RUN` (or rewritten, :data:`REWRITTEN`), each with its reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from warehouse.cli import app
from warehouse.settings import Settings

REPO = Path(__file__).parents[1]
README_PATH = REPO / "README.md"
README = README_PATH.read_text(encoding="utf-8")

RUN = ("python", "bash", "sh", "shell", "console")
PARSED = ("yaml", "toml", "json")
SHOWN = ("text",)

NOT_RUN = {
    r"^pip install\b": "installs the package: the tests run inside that installation",
    r"^docker compose\b": "needs Docker: the tests use noida-db and moto in its place, and "
    "tests/test_ops_cli.py checks docker-compose.yml",
    r"^python -m pytest\b": "the test suite itself",
    r"^warehouse ui\b": "serves until stopped: tests/ui/ starts it and drives it in Chromium",
}
"""Commands a test cannot run (matched per command, after ``VAR=value`` prefixes), and why."""

NOT_RUN_AGAIN = {
    r"^warehouse demo\b": "the first screen ran it: every block starts from its runs; the demo "
    "against Elasticsearch and S3 is tests/test_demo.py's and tests/objects/"
    "test_example_s3.py's (here it took 15 min on 2 busy cores)",
}
"""Commands of the first screen that later blocks do not run again, and why."""

REWRITTEN = {
    r"\bwarehouse init --create-roles\b": (
        "warehouse init",
        "noida-db has no security API: tests/test_roles.py checks the roles, and runs them "
        "against a real Elasticsearch given as WAREHOUSE_TEST_ES_URL",
    ),
    r"\bWAREHOUSE_KIBANA_URL=\S+": (
        "WAREHOUSE_KIBANA_URL=",
        "no Kibana runs in the tests: tests/kibana/ checks the saved objects offline",
    ),
}
"""Commands run in another form in the tests (regex → (replacement, why))."""

RUN_WITH_GIVEN = "from warehouse.integrations."
"""A framework adapter's Python block takes a model and its data as given (a newcomer has
them): it runs in ``tests/integrations/`` (``run_readme_block``, with a real model and data of
that framework) instead of here; a test below holds each such block to that."""

BLOCK_TIMEOUT_S = 1800  # a safety net against a hang, not a measurement: the demo is in it


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced code block of the README."""

    line: int  # of the opening fence
    language: str
    section: str
    text: str

    @property
    def name(self) -> str:
        return f"README.md:{self.line} ({self.language or 'no language'}, '{self.section}')"

    @property
    def id(self) -> str:
        return f"line{self.line}-{self.language or 'none'}"


def blocks(text: str = README) -> list[Block]:
    """Every fenced block, with the heading it is under."""
    found = []
    section = "top"
    fence: tuple[int, str, list[str]] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is None:
            if line.startswith("#"):
                section = line.lstrip("#").strip()
            elif line.startswith("```"):
                fence = (number, line[3:].strip().lower(), [])
        elif line.startswith("```"):
            start, language, body = fence
            found.append(Block(start, language, section, "\n".join(body) + "\n"))
            fence = None
        else:
            fence[2].append(line)
    assert fence is None, f"README.md:{fence[0]}: a ``` block is never closed"
    return found


BLOCKS = blocks()
WORLD = next(b for b in BLOCKS if b.language == "bash")  # the first screen's commands


# --- what a block runs ----------------------------------------------------------------------


def logical_lines(script: str) -> list[str]:
    """Lines with their ``\\`` continuations joined."""
    lines: list[str] = []
    pending = ""
    for line in script.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _command(part: str) -> str:
    """A command without its ``VAR=value`` prefixes and comment."""
    words = part.split("#", 1)[0].strip()
    while re.match(r"^[A-Za-z_][A-Za-z0-9_]*=\S*\s+", words):
        words = re.sub(r"^[A-Za-z_][A-Za-z0-9_]*=\S*\s+", "", words, count=1)
    return words


def runnable(script: str, *, first: bool = False) -> tuple[str, list[str]]:
    """The script as a test runs it, and what it left out or changed (with the reasons);
    ``first``: the first screen's script (it runs the demo)."""
    left_out = NOT_RUN if first else {**NOT_RUN, **NOT_RUN_AGAIN}
    kept: list[str] = []
    said: list[str] = []
    for line in logical_lines(script):
        for pattern, (replacement, why) in REWRITTEN.items():
            if re.search(pattern, line):
                line = re.sub(pattern, replacement, line)
                said.append(f"rewritten to {replacement!r}: {why}")
        parts = re.split(r"\s*&&\s*", line)
        runs = []
        for part in parts:
            command = _command(part)
            reason = next((r for p, r in left_out.items() if re.search(p, command)), None)
            if reason is None:
                runs.append(part)
            else:
                said.append(f"not run: {command} ({reason})")
        kept.append(" && ".join(runs) if runs else ":")
    return "\n".join(kept) + "\n", said


def console_commands(text: str) -> list[str]:
    """The ``$ command`` lines of a console block (with their ``\\`` continuations)."""
    return [line[2:] for line in logical_lines(text) if line.startswith("$ ")]


# --- where a block runs ---------------------------------------------------------------------


def base_env(home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("WAREHOUSE_", "AWS_")) or k.startswith("WAREHOUSE_TEST_")
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(WAREHOUSE_HOME=str(home), WAREHOUSE_CONSOLE="0", COLUMNS="100")
    return env


def workdir(path: Path) -> Path:
    """A folder showing the repository's files (as a user's checkout), where a block may
    write (``cp .env.example .env``) without touching the repository."""
    path.mkdir(parents=True)
    for entry in REPO.iterdir():
        if entry.name not in (".git", ".venv", ".warehouse", ".env") and not entry.name.endswith(
            "_cache"
        ):
            (path / entry.name).symlink_to(entry)
    return path


def run_script(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )


def failed(block: Block, what: str, proc: subprocess.CompletedProcess[str]) -> str:
    return (
        f"{block.name} failed: {what} exited with {proc.returncode}\n--- stdout\n"
        f"{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warehouse the first screen's commands make (the demo's 15 runs)."""
    root = tmp_path_factory.mktemp("readme-world")
    home = root / "warehouse"
    script, _ = runnable(WORLD.text, first=True)
    proc = run_script(script, workdir(root / "cwd"), base_env(home))
    assert proc.returncode == 0, failed(WORLD, "the first screen", proc)
    return home


@dataclasses.dataclass
class Place:
    cwd: Path
    env: dict[str, str]


@pytest.fixture
def place(world: Path, tmp_path: Path) -> Place:
    """A fresh copy of the world and a fresh folder to run a block in."""
    home = tmp_path / "warehouse"
    objects = world / "objects"

    def copy(source: str, target: str) -> object:
        if Path(source).is_relative_to(objects):  # written once, never changed: shared
            os.link(source, target)
            return target
        return shutil.copy2(source, target)

    shutil.copytree(world, home, symlinks=True, copy_function=copy)
    return Place(workdir(tmp_path / "cwd"), base_env(home))


def with_servers(script: str, request: pytest.FixtureRequest, env: dict[str, str]) -> str:
    """The script pointed at the test servers, where it names servers."""
    es = re.compile(r"https?://[\w.-]+:9200\b")
    s3 = re.compile(r"s3://[\w.-]+(?=/|\s|$)")
    minio = re.compile(r"http://[\w.-]+:9000\b")
    if es.search(script):
        from warehouse.settings import load
        from warehouse.stores.elastic import init_elasticsearch

        url = request.getfixturevalue("es_url")
        prefix = request.getfixturevalue("es_prefix")
        env["WAREHOUSE_INDEX_PREFIX"] = prefix
        init_elasticsearch(load(cli={"es_url": url, "index_prefix": prefix}))  # the team's
        script = es.sub(url, script)
    if s3.search(script) or minio.search(script):
        server = request.getfixturevalue("s3_server")
        bucket = request.getfixturevalue("s3_bucket")
        env.update(server.settings_env(bucket))
        del env["WAREHOUSE_S3_URL"]  # the block sets it
        script = minio.sub(server.url, s3.sub(f"s3://{bucket}", script))
    return script


# --- the tests --------------------------------------------------------------------------------


def test_every_block_has_a_language_the_tests_know() -> None:
    unknown = [b.name for b in BLOCKS if b.language not in (*RUN, *PARSED, *SHOWN)]
    assert not unknown, (
        f"tag these blocks with one of {', '.join((*RUN, *PARSED, *SHOWN))} (text: output "
        f"shown, not run): {'; '.join(unknown)}"
    )


def test_the_commands_left_out_are_few_each_with_a_reason_and_each_used() -> None:
    rules = {**NOT_RUN, **NOT_RUN_AGAIN, **{p: why for p, (_, why) in REWRITTEN.items()}}
    assert len(rules) <= 8, "a README that a test cannot run is a README that drifts"
    scripts = [b.text for b in BLOCKS if b.language in ("bash", "sh", "shell")]
    scripts += [c for b in BLOCKS if b.language == "console" for c in console_commands(b.text)]
    said = " ".join(s for text in scripts for s in runnable(text, first=text == WORLD.text)[1])
    unused = [p for p, why in rules.items() if why not in said]
    assert not unused, f"rules no block needs any more (remove them): {unused}"


@pytest.mark.slow
@pytest.mark.timeout(BLOCK_TIMEOUT_S + 300)
def test_the_first_screen_makes_the_demo_world(world: Path) -> None:
    from warehouse.stores.base import RunQuery
    from warehouse.stores.local import LocalStore

    with LocalStore(world) as store:
        assert len(store.search_runs(RunQuery(limit=None))) == 15


@pytest.mark.slow
@pytest.mark.timeout(BLOCK_TIMEOUT_S + 300)
@pytest.mark.parametrize(
    "block",
    [
        pytest.param(b, id=b.id)
        for b in BLOCKS
        if b.language in RUN and b != WORLD and RUN_WITH_GIVEN not in b.text
    ],
)
def test_every_readme_block_runs(
    block: Block, place: Place, request: pytest.FixtureRequest
) -> None:
    if block.language == "python":
        script = place.cwd / "block.py"
        script.write_text(block.text, encoding="utf-8")
        proc = subprocess.run(
            [sys.executable, str(script)],
            cwd=place.cwd,
            env=place.env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
            check=False,
        )
        assert proc.returncode == 0, failed(block, "python", proc)
        return
    commands = console_commands(block.text) if block.language == "console" else [block.text]
    assert commands, f"{block.name}: a console block without a '$ command' line"
    for command in commands:
        script, _ = runnable(command)
        script = with_servers(script, request, place.env)
        proc = run_script(script, place.cwd, place.env)
        assert proc.returncode == 0, failed(block, repr(command.strip()), proc)
        if block.language == "console":
            assert proc.stdout.strip(), f"{block.name}: {command!r} printed nothing"


@pytest.mark.parametrize(
    "block", [pytest.param(b, id=b.id) for b in BLOCKS if b.language in PARSED]
)
def test_every_config_block_parses(block: Block) -> None:
    try:
        if block.language == "yaml":
            yaml.safe_load(block.text)
        elif block.language == "toml":
            tomllib.loads(block.text)
        else:
            json.loads(block.text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        pytest.fail(f"{block.name} does not parse as {block.language}: {exc}")


def test_the_harness_finds_a_block_it_has_never_seen_and_names_it() -> None:
    text = "# Top\n\n## New section\n\n```python\nprint(1)\n```\n\n```\nno language\n```\n"
    found = blocks(text)
    assert [(b.line, b.language, b.section) for b in found] == [
        (5, "python", "New section"),
        (9, "", "New section"),
    ]
    assert found[1].name == "README.md:9 (no language, 'New section')"
    script, said = runnable("pip install x && warehouse demo\ndocker compose up -d\n", first=True)
    assert script == "warehouse demo\n:\n"
    assert [s.split(" (")[0] for s in said] == [
        "not run: pip install x",
        "not run: docker compose up -d",
    ]


# --- the README's other promises --------------------------------------------------------------


@pytest.mark.parametrize("field", sorted(Settings.model_fields))
def test_every_setting_is_in_the_readme_table(field: str) -> None:
    assert f"`WAREHOUSE_{field.upper()}`" in README


def test_the_first_screen_gives_the_demo_and_the_test_command() -> None:
    assert "warehouse demo" in WORLD.text
    assert "pytest" in WORLD.text


COMMANDS = sorted(set(re.findall(r"`(warehouse (?:query |kibana |runs )?[a-z-]+)", README)))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_the_readme_names_exists(command: str) -> None:
    result = CliRunner().invoke(app, [*shlex.split(command)[1:], "--help"])
    assert result.exit_code == 0, result.output


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return "#" + text.replace(" ", "-")


def test_the_contents_link_every_section_in_order() -> None:
    contents = next(p for p in README.split("\n\n") if p.startswith("**Contents:**"))
    linked = re.findall(r"\]\((#[^)]+)\)", contents)
    prose = re.sub(r"^```.*?^```", "", README, flags=re.S | re.M)  # code is no heading
    sections = [anchor(h) for h in re.findall(r"^## (.+)$", prose, re.M)]
    assert linked == sections, (
        "the **Contents:** line under the first screen links every '## ' section in order; "
        f"sections: {sections}"
    )


# --- the README's figures (issue 32, item 2): each checked against what it describes ----------


def _shown_leaderboard(text: str = README) -> list[tuple[str, float]]:
    """The first screen's leaderboard as the README prints it: (experiment, best_score)."""
    block = next(b for b in blocks(text) if b.language == "console" and "leaderboard" in b.text)
    rows = re.findall(r"^\s+\d+\s+(\S+)\s+(\d\.\d{4})\s", block.text, re.M)
    assert rows, f"{block.name}: no leaderboard rows found"
    return [(experiment, float(score)) for experiment, score in rows]


@pytest.mark.slow
@pytest.mark.timeout(BLOCK_TIMEOUT_S + 300)
def test_the_first_screens_leaderboard_is_what_the_demo_gives(world: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "warehouse", "query", "leaderboard", "--format", "json"],
        env=base_env(world),
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    given = [(r["experiment"], round(r["best_score"], 4)) for r in json.loads(proc.stdout)]
    assert _shown_leaderboard() == given, (
        "README's first leaderboard differs from what 'warehouse demo' records; paste "
        f"'warehouse query leaderboard' again: {given}"
    )


def _collected(*args: str) -> int:
    """How many tests ``pytest --collect-only`` selects with ``args``."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )
    found = re.search(r"(\d+)(?:/\d+)? tests? collected", proc.stdout)
    assert found, proc.stdout[-2000:] + proc.stderr[-2000:]
    return int(found[1])


@pytest.mark.slow
def test_the_quick_subset_leaves_out_as_many_tests_as_the_readme_says() -> None:
    stated = re.search(r'-m "not slow"` leaves out the ([\d,]+) tests marked', README)
    assert stated, "the Tests section states how many tests -m 'not slow' leaves out"
    slow = _collected("-m", "slow", "tests")
    assert int(stated[1].replace(",", "")) == slow, (
        f"the README says {stated[1]} slow tests; pytest selects {slow} with -m slow"
    )


def test_the_leaderboard_reader_finds_every_row() -> None:
    text = (
        "# T\n\n```console\n$ warehouse query leaderboard\nrank  experiment  best_score\n"
        "   1   a-svm    0.9861   abc\n   2   b          0.5000   def\n```\n"
    )
    assert _shown_leaderboard(text) == [("a-svm", 0.9861), ("b", 0.5)]


def _given_block(title: str) -> str:
    """The block ``tests/integrations`` runs for ``title`` (``run_readme_block``'s rule)."""
    start = README.index(f"**{title}**")
    return README[start:].split("```python", 1)[1].split("```", 1)[0].lstrip("\n")


def test_every_framework_block_runs_in_the_integration_tests() -> None:
    calls = "".join(p.read_text() for p in (REPO / "tests" / "integrations").glob("test_*.py"))
    titles = re.findall(r'run_readme_block\(\s*"([^"]+)"', calls)
    ran = {_given_block(title) for title in titles}
    given = [b for b in BLOCKS if b.language == "python" and RUN_WITH_GIVEN in b.text]
    assert given, "the README shows the framework adapters"
    missing = [b.name for b in given if b.text not in ran]
    assert not missing, f"no test in tests/integrations runs these blocks: {missing}"
