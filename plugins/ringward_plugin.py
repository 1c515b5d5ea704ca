"""Loaded by Airflow's plugin manager from the plugins folder (the packages beside it are in .airflowignore):
registers ringward's UI pages. The plugin itself lives in ringward_airflow.ui.plugin."""

from ringward_airflow.ui.plugin import RingwardPlugin

__all__ = ["RingwardPlugin"]
