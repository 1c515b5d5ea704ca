"""Loaded by Airflow's plugin manager from the plugins folder (the packages beside it are in .airflowignore):
registers ringward's UI pages when ringward is not installed as a distribution. The plugin itself lives in
ringward_airflow.ui.plugin.

An installed ringward (`pip install ringward`, or this repository's editable install) registers the plugin
through its `airflow.plugins` entry point; Airflow would then skip this module's copy as "already registered"
and list that as a plugin import error. So this module exposes the plugin only when no installed distribution
declares it.
"""

from __future__ import annotations

from importlib.metadata import entry_points

ENTRY_POINT = "ringward_airflow.ui.plugin:RingwardPlugin"


def installed_entry_point() -> bool:
    """Whether an installed distribution declares ringward's plugin under `airflow.plugins`."""
    return any(entry.value == ENTRY_POINT for entry in entry_points(group="airflow.plugins"))


if not installed_entry_point():
    from ringward_airflow.ui.plugin import RingwardPlugin

    __all__ = ["RingwardPlugin"]
