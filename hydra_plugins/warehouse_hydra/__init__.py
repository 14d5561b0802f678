"""Hydra search-path plugin: makes ``hydra/callbacks=warehouse`` a one-line config."""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class WarehouseSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(
            provider="results-warehouse", path="pkg://hydra_plugins.warehouse_hydra.conf"
        )
