"""A distributed job records one run: only global rank 0 records, with the world size."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import warehouse
from tests.integrations.frameworks import require
from warehouse.cli import app
from warehouse.errors import ConfigurationError
from warehouse.recording.ranks import NullRun, process_rank, rank_from_environment
from warehouse.recording.run import ActiveRun
from warehouse.settings import LaunchEnvironment, load_launch
from warehouse.stores.base import RunQuery, StepRange
from warehouse.stores.local import LocalStore

JOB = Path(__file__).with_name("rank_job.py")
ROOT = Path(__file__).parents[2]


def launch(
    tmp_path: Path, world: int, extra: dict[str, str] | None = None, *args: str
) -> list[subprocess.Popen[str]]:
    """``world`` processes of one job, with the variables torchrun gives each."""
    procs = []
    for rank in range(world):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world),
            "GROUP_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29511",
            "TORCHELASTIC_RUN_ID": "none",
            **(extra or {}),
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, str(JOB), str(tmp_path), *args],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    return procs


def finish(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, out


def stored_runs(home: Path) -> list[dict]:
    with LocalStore(home) as store:
        return store.search_runs(RunQuery(limit=None))


@pytest.mark.slow
def test_an_eight_process_launch_records_one_run_with_the_world_size(
    tmp_path: Path, home: Path
) -> None:
    finish(launch(tmp_path, 8))
    [run] = stored_runs(home)
    assert run["environment"]["world_size"] == 8
    assert run["metrics"]["val"] == {"acc": 0.5}  # rank 0's own value
    assert run["sample_counts"] == {"val": 3}
    assert [a["name"] for a in run["artifacts"] if a["kind"] == "artifacts"] == ["who.txt"]
    with LocalStore(home) as store:
        steps = list(store.steps(StepRange(run_id=run["run_id"])))
    assert [s["metrics"] for s in steps if s["metrics"]] == [{"loss": 0.0}]
    ids = {(tmp_path / f"rank-{r}.id").read_text() for r in range(8)}
    assert ids == {run["run_id"], ""}  # the other ranks' runs have no id: they are NullRuns


def test_a_single_process_records_a_world_size_of_one(home: Path) -> None:
    with warehouse.start_run(experiment="alone") as run:
        pass
    assert run.record.environment["world_size"] == 1


def test_a_rank_other_than_zero_gets_a_run_that_does_nothing(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    before = set(threading.enumerate())
    consumed = []

    def rows():
        consumed.append(1)
        yield {"sample_id": 1}

    with warehouse.start_run(experiment="x", config={"lr": 1}) as run:
        assert isinstance(run, NullRun)
        assert warehouse.current_run() is run  # user code calls it on every rank alike
        run.log_metrics("val", {"acc": "not even a number"})
        assert run.log_samples("val", rows()) == 0
        assert run.log_output("val", 1, b"png") == ""
        assert run.log_artifact(tmp_path / "missing.pt").uri == ""
        run.log_step(1, epoch=2, loss=0.1)
        warehouse.log_step(2, loss=0.2)
        run.set_tags("a")
        run.save()
        run.heartbeat()
        assert run.run_id == ""
        # no step logger, sampler or heartbeat (threads of earlier tests may end meanwhile)
        assert not set(threading.enumerate()) - before
    assert warehouse.current_run() is None
    assert consumed == []
    assert not home.exists()  # nothing written, not even the folder


def test_every_method_of_an_active_run_is_a_no_op_on_a_null_run() -> None:
    public = {
        name
        for name, member in vars(ActiveRun).items()
        if (not name.startswith("_") or name in ("__enter__", "__exit__"))
        and (callable(member) or isinstance(member, property))
    }
    missing = sorted(public - set(vars(NullRun)))
    assert not missing, f"NullRun must override {missing} with a no-op"

    def public_attributes(init: Callable[..., None]) -> set[str]:
        return set(re.findall(r"self\.([a-z]\w*) = ", inspect.getsource(init)))

    assert public_attributes(ActiveRun.__init__) <= public_attributes(NullRun.__init__)
    for name in public:
        mine, theirs = getattr(NullRun, name), getattr(ActiveRun, name)
        if isinstance(theirs, property):
            continue
        params = inspect.signature(mine).parameters.keys()
        assert params == inspect.signature(theirs).parameters.keys(), name


def test_a_rank_given_by_the_caller_wins_over_the_environment(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "0")
    run = warehouse.start_run(experiment="x", rank=(2, 4))
    assert isinstance(run, NullRun)
    run.end()
    with warehouse.start_run(experiment="x", rank=(0, 4)) as run:
        pass
    assert run.record.environment["world_size"] == 4


def test_a_rank_that_is_not_a_number_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "zero")
    with pytest.raises(ConfigurationError, match=r"RANK='zero'.*whole numbers"):
        load_launch()


# --- the rule on generated launches ---------------------------------------------------------


@dataclass(frozen=True)
class Launch:
    """A launcher starting ``nodes`` times ``per_node`` processes, each with the variables that
    launcher really sets."""

    kind: str
    nodes: int
    per_node: int

    @property
    def world(self) -> int:
        return self.nodes * self.per_node

    def environments(self) -> list[dict[str, str]]:
        envs = []
        for node in range(self.nodes):
            for local in range(self.per_node):
                rank = node * self.per_node + local
                if self.kind == "torchrun":
                    env = {
                        "RANK": rank,
                        "WORLD_SIZE": self.world,
                        "LOCAL_RANK": local,
                        "LOCAL_WORLD_SIZE": self.per_node,
                        "GROUP_RANK": node,
                    }
                elif self.kind == "torchrun-in-slurm":  # SLURM_PROCID is the node's agent
                    env = {
                        "RANK": rank,
                        "WORLD_SIZE": self.world,
                        "LOCAL_RANK": local,
                        "GROUP_RANK": node,
                        "SLURM_PROCID": node,
                        "SLURM_NTASKS": self.nodes,
                    }
                elif self.kind == "srun":
                    env = {"SLURM_PROCID": rank, "SLURM_NTASKS": self.world, "SLURM_LOCALID": local}
                elif self.kind == "mpirun":
                    env = {"OMPI_COMM_WORLD_RANK": rank, "OMPI_COMM_WORLD_SIZE": self.world}
                else:  # Lightning's own launcher: no RANK, the main process has LOCAL_RANK 0
                    env = {"LOCAL_RANK": local, "NODE_RANK": node, "WORLD_SIZE": self.world}
                envs.append({k: str(v) for k, v in env.items()})
        return envs


LAUNCHES = st.builds(
    Launch,
    st.sampled_from(["torchrun", "torchrun-in-slurm", "srun", "mpirun", "lightning"]),
    st.integers(1, 4),
    st.integers(1, 8),
)


@settings(max_examples=200, deadline=None)
@given(LAUNCHES)
def test_exactly_one_process_of_any_launch_records_and_knows_the_world_size(
    launch: Launch,
) -> None:
    ranks = [rank_from_environment(LaunchEnvironment(**env)) for env in launch.environments()]
    assert sum(r.records for r in ranks) == 1
    assert ranks[0].records  # the first process started: global rank 0
    assert {r.world_size for r in ranks} == {launch.world}


def test_with_no_launcher_the_process_is_rank_zero_of_one() -> None:
    assert process_rank().records
    assert process_rank().world_size == 1


# --- system figures per rank ----------------------------------------------------------------


@pytest.mark.slow
def test_each_rank_sends_its_own_system_figures_to_rank_zeros_run(
    tmp_path: Path, home: Path
) -> None:
    per_rank = {"WAREHOUSE_SYSTEM_PER_RANK": "1", "WAREHOUSE_SYSTEM_INTERVAL_S": "0.2"}
    procs = launch(tmp_path, 4, per_rank, "--hold")
    finish(procs[1:])  # every other rank has written its figures and ended
    (tmp_path / "go").touch()
    finish(procs[:1])
    [run] = stored_runs(home)
    with LocalStore(home) as store:
        steps = list(store.steps(StepRange(run_id=run["run_id"])))
    assert [s["seq"] for s in steps] == list(range(len(steps)))  # one sequence, no gaps
    by_rank: dict[int, list[dict]] = {}
    for doc in steps:
        if "rank" in doc:
            by_rank.setdefault(doc["rank"], []).append(doc)
    assert sorted(by_rank) == [1, 2, 3]
    for rank, docs in by_rank.items():
        assert all(d["metrics"] == {} and d["host"] for d in docs), rank
        assert all(not k.startswith("gpu_") for d in docs for k in d["system"])  # no GPU here
    # each rank's process memory is its own: rank k holds k * 40 MB more than rank 0 did
    peak = {rank: max(d["system"]["rss_bytes"] for d in docs) for rank, docs in by_rank.items()}
    assert peak[2] - peak[1] > 30 * 2**20
    assert peak[3] - peak[2] > 30 * 2**20
    assert not list((home / "ranks").rglob("rank-*.jsonl"))  # rank 0 removed what it read
    # warehouse query steps shows whose figures each row holds
    shown = CliRunner().invoke(app, ["query", "steps", run["run_id"], "--format", "json"])
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.stdout)
    assert sorted({r["rank"] for r in rows if r["rank"] is not None}) == [1, 2, 3]
    assert len(rows) == len(steps)


def test_figures_left_by_an_earlier_launch_are_not_recorded(tmp_path: Path) -> None:
    from warehouse.live.rank_system import RankFiles

    folder = tmp_path / "launch"
    folder.mkdir()
    (folder / "rank-1.jsonl").write_text(
        '{"t": 100.0, "rank": 1, "host": "a", "system": {"cpu_pct": 1.0}}\n'
        '{"t": 500.0, "rank": 1, "host": "a", "system": {"cpu_pct": 2.0}}\n'
        '{"t": 600.0, "rank": 1, "host": "a", "sys'  # still being written
    )
    files = RankFiles(folder, since=400.0)
    assert files(False) == [(500.0, 1, {"host": "a", "system": {"cpu_pct": 2.0}})]
    with open(folder / "rank-1.jsonl", "a") as out:
        out.write('tem": {"cpu_pct": 3.0}}\n')
    assert files(True) == [(600.0, 1, {"host": "a", "system": {"cpu_pct": 3.0}})]
    assert not (folder / "rank-1.jsonl").exists()


@pytest.mark.parametrize(
    ("gpus", "local_rank", "index"),
    [
        pytest.param([0], 3, 0, id="one-visible-gpu-is-the-ranks"),
        pytest.param([0, 1, 2, 3], 2, 2, id="cuda-local-rank"),
        pytest.param([4, 5], 3, 5, id="local-rank-past-the-visible-wraps"),
    ],
)
def test_a_rank_reports_the_gpu_it_uses(gpus: list[int], local_rank: int, index: int) -> None:
    from warehouse.live.rank_system import own_figures

    sample = {
        "system": {"cpu_pct": 5.0, "gpu_util_pct": 50.0, "rss_bytes": 1},
        "gpus": [{"index": i, "util_pct": float(i)} for i in gpus],
    }
    figures = own_figures(sample, local_rank)
    assert figures["gpus"] == [{"index": index, "util_pct": float(index)}]
    # the gpu_* figures are that GPU's alone, not the totals over what the rank sees
    assert figures["system"] == {"cpu_pct": 5.0, "rss_bytes": 1, "gpu_util_pct": float(index)}


# --- the frameworks' own rank ---------------------------------------------------------------


@pytest.mark.slow
def test_the_rank_of_a_torch_distributed_group_decides_without_launcher_variables(
    tmp_path: Path, home: Path
) -> None:
    require("torch", "lightning")
    job = Path(__file__).with_name("dist_job.py")
    init = tmp_path / "init"
    procs = [
        subprocess.Popen(
            [sys.executable, str(job), str(rank), "3", str(init), str(tmp_path)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(3)
    ]
    finish(procs)
    [run] = stored_runs(home)
    assert run["metrics"]["val"] == {"acc": 0.9}
    assert run["environment"]["world_size"] == 3


def test_lightnings_rank_decides_when_lightning_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    require("lightning", "lightning")
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    monkeypatch.setattr(rank_zero_only, "rank", 2, raising=False)
    rank = process_rank()
    assert (rank.rank, rank.source) == (2, "lightning")
    assert not rank.records


def test_accelerates_state_decides_once_an_accelerator_is_made() -> None:
    require("accelerate", "transformers")
    from accelerate import Accelerator

    Accelerator(cpu=True)
    rank = process_rank()
    assert (rank.rank, rank.world_size, rank.source) == (0, 1, "accelerate")


def test_reading_the_rank_imports_no_framework(tmp_path: Path, home: Path) -> None:
    code = (
        "import sys, warehouse\n"
        "with warehouse.start_run(experiment='x'): pass\n"
        "print(sorted(m for m in ('torch', 'accelerate', 'lightning') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    assert out.stdout.strip() == "[]"
