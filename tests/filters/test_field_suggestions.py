"""An unknown field's "closest known fields" never name the derived ``metrics_ci.*`` fields
(issue 32, item 7): ``metrics.val.accc`` meant ``metrics.val.acc``, not its interval's bound.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import warehouse
from warehouse.errors import QuerySyntaxError
from warehouse.filters.lucene import unknown_field
from warehouse.query import views
from warehouse.stores import open_store

NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)


@st.composite
def fields_and_a_typo(draw: st.DrawFn) -> tuple[list[str], str]:
    """Metric fields with their intervals' fields, and a name typed near one of them."""
    splits = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
    metrics = draw(st.lists(NAMES, min_size=1, max_size=4, unique=True))
    known = [f"metrics.{s}.{m}" for s in splits for m in metrics]
    known += [
        f"metrics_ci.{s}.{m}.{part}"
        for s in splits
        for m in metrics
        for part in ("low", "high", "n", "method", "column")
    ]
    target = draw(st.sampled_from(known))
    cut = draw(st.integers(0, len(target) - 1))
    typo = target[:cut] + draw(st.sampled_from(["", "x", "_", "."])) + target[cut + 1 :]
    return known, typo


@given(fields_and_a_typo())
def test_the_closest_fields_of_a_typo_are_never_derived_ones_unless_typed_so(
    case: tuple[list[str], str],
) -> None:
    known, typo = case
    suggested = unknown_field(typo, known).suggestions
    if typo.startswith("metrics_ci."):
        assert set(suggested) <= set(known)
    else:
        assert not [s for s in suggested if s.startswith("metrics_ci.")], suggested


@pytest.mark.parametrize("engine", ["local", "elasticsearch"])
@pytest.mark.parametrize("typo", ["metrics.val.accc", "metrics.val.ac", "metric.val.acc"])
def test_a_mistyped_metric_filter_suggests_the_metric_on_every_store(
    engine: str, typo: str, request: pytest.FixtureRequest
) -> None:
    if engine == "elasticsearch":
        request.getfixturevalue("es_env")
        from warehouse.settings import load
        from warehouse.stores.elastic import init_elasticsearch

        init_elasticsearch(load())
    for seed in range(2):
        with warehouse.start_run(experiment="svm", config={"seed": seed}) as run:
            run.log_metrics("val", {"acc": 0.9})
            run.log_samples("val", [{"sample_id": k, "correct": k % 2} for k in range(20)])
    assert run.record.metrics_ci["val"]["acc"]  # the intervals exist, and are fields
    from warehouse.settings import load

    with open_store(load()) as store, pytest.raises(QuerySyntaxError) as caught:
        views.runs(store, f"{typo}:>0.5", (), 10, None)
    suggested = caught.value.suggestions  # type: ignore[attr-defined]
    assert suggested[0] == "metrics.val.acc"
    assert not [s for s in suggested if s.startswith("metrics_ci.")]
    assert "metrics_ci" not in str(caught.value)
