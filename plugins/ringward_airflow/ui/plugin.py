"""The Airflow plugin: the pages' FastAPI app under /ringward, in the nav (Repair, Cluster) and on DAG runs
(Migration: the tab names the run in its URL; runs of other DAGs say that no migration is recorded).

Every Airflow process loads plugins (task runners for macros, the DAG processor for timetables), so this
module stays light: the FastAPI app and Airflow's API security code are imported only when the API server
asks for `fastapi_apps` (and the root middleware that lets the pages call Airflow's REST API in process, for
`fastapi_root_middlewares`).
"""

from __future__ import annotations

from functools import cache
from typing import Any
from urllib.parse import quote

from airflow.plugins_manager import AirflowPlugin

__all__ = ["URL_PREFIX", "RingwardPlugin", "migration_page_path"]

URL_PREFIX = "/ringward"


@cache
def _app() -> Any:
    from ringward_airflow.ui.app import create_app

    return create_app()


def migration_page_path(dag_id: str, run_id: str) -> str:
    """The Migration page of a run, relative to Airflow's base URL (run ids hold ':' and '+', so quoted)."""
    return f"{URL_PREFIX.lstrip('/')}/migration/{quote(dag_id, safe='')}/{quote(run_id, safe='')}"


class RingwardPlugin(AirflowPlugin):
    name = "ringward"
    # hrefs are relative to Airflow's base URL; {DAG_ID} and {RUN_ID} are filled in by the UI.
    external_views: list[dict[str, str]] = [  # noqa: RUF012 (AirflowPlugin declares it a plain attribute)
        {"name": "Repair", "href": "ringward/repair", "destination": "nav", "category": "ringward",
         "url_route": "ringward-repair"},
        {"name": "Cluster", "href": "ringward/cluster", "destination": "nav", "category": "ringward",
         "url_route": "ringward-cluster"},
        {"name": "Migration", "href": "ringward/migration/{DAG_ID}/{RUN_ID}", "destination": "dag_run",
         "url_route": "ringward-migration"},
    ]  # fmt: skip

    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [{"app": _app(), "url_prefix": URL_PREFIX, "name": "ringward pages"}]

    @property
    def fastapi_root_middlewares(self) -> list[dict[str, Any]]:  # type: ignore[override]
        """Puts the api-server's app where the pages find it: they read runs through its REST API in process."""
        from ringward_airflow.ui.airflow_reads import RootAppInScope

        return [{"middleware": RootAppInScope, "args": [], "kwargs": {}, "name": "ringward: Airflow's app in scope"}]
