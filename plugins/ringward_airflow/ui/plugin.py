"""The Airflow plugin: the pages' FastAPI app under /ringward, in the nav (Repair, Cluster) and on DAG runs
(Migration: the tab names the run in its URL; runs of other DAGs say that no migration is recorded)."""

from __future__ import annotations

from typing import ClassVar

from airflow.plugins_manager import AirflowPlugin

from ringward_airflow.ui.app import create_app

__all__ = ["URL_PREFIX", "RingwardPlugin"]

URL_PREFIX = "/ringward"


class RingwardPlugin(AirflowPlugin):
    name = "ringward"
    fastapi_apps: ClassVar[list[dict[str, object]]] = [
        {"app": create_app(), "url_prefix": URL_PREFIX, "name": "ringward pages"}
    ]
    # hrefs are relative to Airflow's base URL; {DAG_ID} and {RUN_ID} are filled in by the UI.
    external_views: ClassVar[list[dict[str, str]]] = [
        {"name": "Repair", "href": "ringward/repair", "destination": "nav", "category": "ringward",
         "url_route": "ringward-repair"},
        {"name": "Cluster", "href": "ringward/cluster", "destination": "nav", "category": "ringward",
         "url_route": "ringward-cluster"},
        {"name": "Migration", "href": "ringward/migration/{DAG_ID}/{RUN_ID}", "destination": "dag_run",
         "url_route": "ringward-migration"},
    ]  # fmt: skip
