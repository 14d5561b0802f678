"""The gate's setup question: is the run's *setup* worse than the reference's, over training
randomness (Bouthillier et al. 2021), rather than one trained artefact than another?

A run's *setup* is its experiment, its resolved config without seed keys, and its code: the
commit (none outside a git checkout), plus the uncommitted diff's hash when the tree was dirty
(:func:`setup_of`). A run recorded without a config, or from a dirty tree whose diff was not
kept, has no setup: nothing says that two such runs ran the same thing (every config-less run
of an experiment was "a seed of one setup", so no regression of it could fail the gate).

- The run and the reference are seeds of one setup (same setup, different seed values): the
  question becomes "is this seed unusually bad for its setup?", its score against the
  setup's *other* seeds (a t prediction bound), where there are two or more; with fewer,
  the two runs' gap is seed noise and a setup is not worse than itself.
- Same setup and the same seed (a rerun of one config): not seeds; the runs are compared on
  their samples (:func:`setup_check` answers None).
- Different setups, the reference's with two seeds or more: its seeds' scores against the
  run's setup's (Welch's t), or against the run's one score (a t prediction bound).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from warehouse.models import Metric
from warehouse.query import evidence, stats
from warehouse.stores.base import Store


@dataclass(frozen=True)
class SetupVerdict:
    """The setup question's answer: worse or not, the line that says why, and the test."""

    worse: bool
    line: str
    comparison: stats.Comparison | None = None


def setup_of(run: dict[str, Any]) -> tuple[str, str, str | None] | None:
    """A run's setup: experiment, config without seeds, and code (the commit, plus the
    uncommitted diff's hash when the tree was dirty). None when the run recorded no config,
    or a dirty tree without its diff: then what it ran is not known."""
    config = run.get("config_hash_noseed")
    git = run.get("git") or {}
    code = git.get("commit")
    if not config or not run.get("config"):
        return None
    if git.get("dirty"):
        diff = next(
            (a.get("sha256") for a in run.get("artifacts") or [] if a.get("kind") == "git"), None
        )
        if not diff:
            return None
        code = f"{code}+{diff[:12]}"
    return str(run.get("experiment")), str(config), None if code is None else str(code)


def seed_scores(
    store: Store, run: dict[str, Any], metric: Metric, seed_keys: Collection[str]
) -> dict[str, float]:
    """The scores of ``run``'s setup, one per distinct seed (the mean of that seed's runs);
    the run's own score alone when it has no known setup."""
    from warehouse.filters.docpath import get_path
    from warehouse.query.lookup import and_filters, finite, quote, runs
    from warehouse.query.replicates import seed_value

    setup = setup_of(run)
    if setup is None:
        score = evidence.score(run, metric)
        return {} if score is None else {seed_value(run, seed_keys): score}
    experiment, config, _ = setup
    scope = and_filters(
        f"experiment:{quote(experiment)}",
        f"config_hash_noseed:{quote(config)}",
        "_exists_:ended_at",
    )
    fields = (
        "run_id",
        "experiment",
        "config",
        "config_hash_noseed",
        "git",
        "artifacts",
        metric.path,
    )
    by_seed: dict[str, list[float]] = {}
    for doc in runs(store, scope, limit=None, fields=fields):
        value = finite(get_path(doc, metric.path))
        if value is None or setup_of(doc) != setup:
            continue
        by_seed.setdefault(seed_value(doc, seed_keys), []).append(value)
    return {seed: float(np.mean(v)) for seed, v in by_seed.items()}


def setup_check(
    store: Store,
    run: dict[str, Any],
    reference: dict[str, Any],
    metric: Metric,
    margin: float,
    alpha: float,
    seed_keys: Collection[str],
) -> SetupVerdict | None:
    """The setup question where seeds exist (see the module); None where they do not, and
    the runs are then compared on their samples."""
    from warehouse.query.replicates import seed_value

    mine, theirs = setup_of(run), setup_of(reference)
    sign = 1.0 if metric.direction == "max" else -1.0
    if mine is not None and mine == theirs:
        own = seed_value(run, seed_keys)
        if run["run_id"] == reference["run_id"] or own == seed_value(reference, seed_keys):
            return None  # one run, or a rerun of one config with one seed: not seeds
        score = evidence.score(run, metric)
        others = {s: v for s, v in seed_scores(store, run, metric, seed_keys).items() if s != own}
        compared = (
            None
            if score is None or len(others) < 2
            else stats.prediction(np.asarray(list(others.values())), score)
        )
        where = f"experiment {mine[0]}, config {mine[1][:8]}, commit {str(mine[2])[:8]}"
        if compared is None:
            return SetupVerdict(
                False,
                f"not worse: the two runs are seeds of one setup ({where}), and fewer than two "
                "other seeds say how far a seed may fall: their gap is seed noise, and a "
                "setup is not worse than itself",
            )
        detail = _detail(metric, compared, sign, alpha, f"this seed against {len(others)} "
                         "other seeds of its setup: is this seed unusually bad?")  # fmt: skip
        worse = compared.p_worse(sign, margin) < alpha
        return SetupVerdict(
            worse,
            f"{'worse' if worse else 'not significantly worse'}: {detail} ({where})",
            compared,
        )
    ref_scores = list(seed_scores(store, reference, metric, seed_keys).values())
    if len(ref_scores) < 2:
        return None
    run_scores = list(seed_scores(store, run, metric, seed_keys).values())
    if not run_scores:
        return None
    if len(run_scores) >= 2:
        c = stats.welch(np.asarray(ref_scores), np.asarray(run_scores))
    else:
        c = stats.prediction(np.asarray(ref_scores), run_scores[0])
    if c is None:
        return None
    detail = _detail(
        metric,
        c,
        sign,
        alpha,
        f"{len(run_scores)} against {len(ref_scores)} seeds: is the setup worse?",
    )
    worse = c.p_worse(sign, margin) < alpha
    return SetupVerdict(worse, f"{_verb(worse)}: {detail}", c)


def _verb(worse: bool) -> str:
    return "worse" if worse else "not significantly worse"


def _detail(metric: Metric, c: stats.Comparison, sign: float, alpha: float, what: str) -> str:
    low, high = sorted(sign * x for x in c.bounds(1 - alpha))
    return (
        f"setup {metric.label} {sign * c.diff:+.4g} [{low:+.4g}, {high:+.4g}], "
        f"p = {c.p:.3g} ({c.test} over {what})"
    )


__all__ = ["SetupVerdict", "seed_scores", "setup_check", "setup_of"]
