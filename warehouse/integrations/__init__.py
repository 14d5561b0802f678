"""Recording from inside the frameworks: each module is a small adapter over the public
recording API (``start_run``, ``log_metrics``, ``log_step``) and imports its framework only
when it is imported itself (``pip install 'results-warehouse[<framework>]'``):

- :mod:`warehouse.integrations.lightning`: ``WarehouseLogger``, a Lightning ``Logger``;
- :mod:`warehouse.integrations.keras`: ``WarehouseCallback``, a Keras 3 callback;
- :mod:`warehouse.integrations.transformers`: ``WarehouseCallback``, a ``TrainerCallback``
  (also ``report_to="warehouse"``);
- :mod:`warehouse.integrations.xgboost`: ``WarehouseCallback``, a ``TrainingCallback``;
- :mod:`warehouse.integrations.lightgbm`: ``WarehouseCallback``, a LightGBM callback.

What they share (which run, which split, steps): :mod:`warehouse.integrations.session`.
"""
