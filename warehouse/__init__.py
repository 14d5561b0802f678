"""results-warehouse: one structured, queryable record per ML training run.

    import warehouse

    with warehouse.start_run(experiment="resnet", config=cfg) as run:
        run.log_metrics("val", {"acc": 0.93})
        run.log_samples("val", rows)

    warehouse.leaderboard(metric="val.acc").to_pandas()   # the views, as Arrow/pandas/dicts

Names load lazily (PEP 562) so that ``import warehouse`` — and the CLI — start fast. Every
public call refuses a keyword it does not take with a ``TypeError`` naming the closest one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "runs": "warehouse.query.api",
    "best": "warehouse.query.api",
    "leaderboard": "warehouse.query.api",
    "over_time": "warehouse.query.api",
    "decomposition": "warehouse.query.api",
    "samples": "warehouse.query.api",
    "steps": "warehouse.query.api",
    "compare": "warehouse.query.api",
    "diff": "warehouse.query.api",
    "slices": "warehouse.query.api",
    "replicates": "warehouse.query.api",
    "Result": "warehouse.query.api",
    "start_run": "warehouse.recording.recorder",
    "current_run": "warehouse.recording.recorder",
    "log_step": "warehouse.recording.recorder",
    "ActiveRun": "warehouse.recording.run",
    "StepOptions": "warehouse.live.steps",
    "Recorder": "warehouse.recording.recorder",
    "Run": "warehouse.models",
    "RunStatus": "warehouse.models",
    "SampleResult": "warehouse.models",
    "ArtifactRef": "warehouse.models",
    "Settings": "warehouse.settings",
    "load_settings": "warehouse.settings",
    "open_store": "warehouse.stores",
    "open_object_store": "warehouse.objects",
    "WarehouseError": "warehouse.errors",
    "ConfigurationError": "warehouse.errors",
    "InvalidRecord": "warehouse.errors",
    "QuerySyntaxError": "warehouse.errors",
    "NotFound": "warehouse.errors",
    "BackendUnavailable": "warehouse.errors",
    "StoreUnavailable": "warehouse.errors",
    "ObjectStoreUnavailable": "warehouse.errors",
    "SyncIncomplete": "warehouse.errors",
}
_RENAMED = {"load_settings": "load"}

__all__ = sorted([*_EXPORTS, "__version__"])

if TYPE_CHECKING:
    from warehouse.errors import (
        BackendUnavailable as BackendUnavailable,
    )
    from warehouse.errors import (
        ConfigurationError as ConfigurationError,
    )
    from warehouse.errors import (
        InvalidRecord as InvalidRecord,
    )
    from warehouse.errors import (
        NotFound as NotFound,
    )
    from warehouse.errors import (
        ObjectStoreUnavailable as ObjectStoreUnavailable,
    )
    from warehouse.errors import (
        QuerySyntaxError as QuerySyntaxError,
    )
    from warehouse.errors import (
        StoreUnavailable as StoreUnavailable,
    )
    from warehouse.errors import (
        SyncIncomplete as SyncIncomplete,
    )
    from warehouse.errors import (
        WarehouseError as WarehouseError,
    )
    from warehouse.live.steps import (
        StepOptions as StepOptions,
    )
    from warehouse.models import (
        ArtifactRef as ArtifactRef,
    )
    from warehouse.models import (
        Run as Run,
    )
    from warehouse.models import (
        RunStatus as RunStatus,
    )
    from warehouse.models import (
        SampleResult as SampleResult,
    )
    from warehouse.objects import (
        open_object_store as open_object_store,
    )
    from warehouse.query.api import (
        Result as Result,
    )
    from warehouse.query.api import (
        best as best,
    )
    from warehouse.query.api import (
        compare as compare,
    )
    from warehouse.query.api import (
        decomposition as decomposition,
    )
    from warehouse.query.api import (
        diff as diff,
    )
    from warehouse.query.api import (
        leaderboard as leaderboard,
    )
    from warehouse.query.api import (
        over_time as over_time,
    )
    from warehouse.query.api import (
        replicates as replicates,
    )
    from warehouse.query.api import (
        runs as runs,
    )
    from warehouse.query.api import (
        samples as samples,
    )
    from warehouse.query.api import (
        slices as slices,
    )
    from warehouse.query.api import (
        steps as steps,
    )
    from warehouse.recording.recorder import (
        Recorder as Recorder,
    )
    from warehouse.recording.recorder import (
        current_run as current_run,
    )
    from warehouse.recording.recorder import (
        log_step as log_step,
    )
    from warehouse.recording.recorder import (
        start_run as start_run,
    )
    from warehouse.recording.run import (
        ActiveRun as ActiveRun,
    )
    from warehouse.settings import (
        Settings as Settings,
    )
    from warehouse.settings import (
        load as load_settings,  # noqa: F401 - re-exported lazily under this name
    )
    from warehouse.stores import (
        open_store as open_store,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'warehouse' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    import inspect

    if inspect.isfunction(value):
        # a misspelt keyword (``warehouse.runs(limt=5)``) names the closest valid one
        from warehouse.errors import refuse_unknown_keywords

        value = refuse_unknown_keywords(value)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
