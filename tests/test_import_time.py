"""`warehouse --help` and importing the CLI load no heavy library (typer's test_rich_import).

Each check runs in a fresh interpreter, so modules imported by other tests do not count.
Heavy: the engines, clients and frameworks the commands use inside their bodies only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "pyarrow",
    "pandas",
    "numpy",
    "elasticsearch",
    "boto3",
    "botocore",
    "hydra",
    "omegaconf",
    "git",
    "pydantic_settings",
    "psutil",
    "pynvml",
    "luqum",
    "yaml",
    "detect_secrets",
    "requests",
)

_PROBE = """
import json, sys
heavy = {heavy!r}
try:
    {body}
except SystemExit:
    pass
finally:
    loaded = sorted({{m.split('.')[0] for m in sys.modules}} & set(heavy))
    sys.__stderr__.write('\\nLOADED=' + json.dumps(loaded) + '\\n')
"""


def loaded_after(body: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The heavy top-level packages loaded once ``body`` has run in a new interpreter."""
    code = _PROBE.format(heavy=HEAVY + extra, body=body)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    marker = [line for line in proc.stderr.splitlines() if line.startswith("LOADED=")]
    assert marker, proc.stderr
    loaded: list[str] = json.loads(marker[-1][len("LOADED=") :])
    return loaded


def test_importing_the_cli_loads_no_heavy_library_and_not_rich() -> None:
    assert loaded_after("from warehouse.cli import app", extra=("rich", "pydantic")) == []


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--help"], id="warehouse--help"),
        pytest.param(["query", "--help"], id="query--help"),
        pytest.param(["query", "leaderboard", "--help"], id="leaderboard--help"),
        pytest.param(["query", "samples", "--help"], id="samples--help"),
    ],
)
def test_help_loads_no_heavy_library(argv: list[str]) -> None:
    body = f"sys.argv = ['warehouse', *{argv!r}]\n    from warehouse.cli import main\n    main()"
    assert loaded_after(body) == []


def test_the_console_script_help_exits_0_and_lists_query() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "warehouse", "query", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "leaderboard" in proc.stdout
    assert "over-time" in proc.stdout


def test_the_streaming_writers_and_export_load_arrow_only_when_they_write() -> None:
    assert loaded_after("import warehouse.history.streaming, warehouse.history.export") == []


def test_the_step_logger_loads_no_table_library_or_json_encoder() -> None:
    """``log_step``'s module is imported by every training script: no pyarrow, numpy,
    orjson (encode_lines imports it on first use), psutil (the sampler's thread does)."""
    body = "from warehouse.live.steps import StepLogger"
    assert loaded_after(body, extra=("orjson",)) == []


def test_the_local_store_loads_no_elasticsearch_client() -> None:
    """Every recorded run opens the local store (the first, durable write): it shares the
    params_extra rules with the Elasticsearch translation, not the client behind it."""
    body = "import warehouse.stores.local as m\n    m.pa.table"  # a query's first table
    loaded = loaded_after(body, extra=("elastic_transport",))
    assert "elasticsearch" not in loaded
    assert "elastic_transport" not in loaded
    assert "pyarrow" in loaded  # the check itself can see a heavy import


_RECORD_A_RUN = """
    import os, tempfile
    os.environ["WAREHOUSE_HOME"] = tempfile.mkdtemp()
    os.environ["WAREHOUSE_CONSOLE"] = "0"
    from warehouse.recording.recorder import start_run
    run = start_run(experiment="e", config={"lr": 0.1})
    for step in range(3):
        run.log_step(step, loss=1.0 / (step + 1))
    run.log_metrics("val", {"acc": 0.9})
    run.end()
    from warehouse.stores.local import LocalStore
    assert LocalStore(os.environ["WAREHOUSE_HOME"]).last_seq(run.run_id) >= 0
"""


def test_recording_a_run_loads_no_table_library() -> None:
    """A training script that records (or ``warehouse watch``, whose overhead on a short
    command is bounded: issue 15) writes JSON files and journal lines: numpy and pyarrow
    wait for the first query (``warehouse.stores.lazy``)."""
    loaded = loaded_after(_RECORD_A_RUN.strip("\n").lstrip())
    assert "numpy" not in loaded
    assert "pyarrow" not in loaded
    assert "pandas" not in loaded


def test_watch_parses_its_options_without_loading_the_other_commands() -> None:
    """``warehouse watch`` is parsed by an app of that one command (``watch_app``): the
    watched command starts before the query, ops and demo modules would have loaded."""
    commands = ["warehouse.cli.demo", "warehouse.cli.ops", "warehouse.cli.query"]
    probe = (
        "import json, sys\n"
        "from warehouse.cli import main\n"
        "sys.argv = ['warehouse', 'watch', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print(json.dumps(sorted(set(sys.modules) & set({commands!r}))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert "Usage: warehouse watch" in proc.stdout, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
    full = subprocess.run(
        [sys.executable, "-c", probe.replace("'watch', ", "'query', ")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "warehouse.cli.query" in json.loads(full.stdout.strip().splitlines()[-1])


_QUERY = """
    import os
    os.environ["WAREHOUSE_HOME"] = {home!r}
    sys.argv = ["warehouse", "query", *{argv!r}]
    from warehouse.cli import main
    main()
"""


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["leaderboard", "--format", "json"], id="leaderboard"),
        pytest.param(["runs", "--format", "csv", "--limit", "0"], id="runs-csv"),
        pytest.param(["runs", "-q", "experiment:e1", "-s", "metrics.val.acc"], id="runs"),
    ],
)
def test_a_query_loads_arrow_but_not_pandas(tmp_path: Path, argv: list[str]) -> None:
    """pyarrow imports pandas (~0.2 s) on its first conversion of a Python value, only to
    check whether it is a pandas object: a query command refuses it (warehouse.stores.lazy)."""
    from warehouse.models import Run
    from warehouse.stores.local import LocalStore

    runs = [Run(experiment=f"e{i % 2}", metrics={"val": {"acc": i / 10}}) for i in range(6)]
    with LocalStore(tmp_path) as store:
        store.write_runs([r.to_doc() for r in runs])
        store.compact()
    loaded = loaded_after(_QUERY.format(home=str(tmp_path), argv=argv).strip("\n").lstrip())
    assert "pyarrow" in loaded
    assert "pandas" not in loaded
