"""What the pages read from Airflow itself, in one module: a DAG run, its task instances and its XComs through
Airflow's public REST API (/api/v2) as the viewer, and the two internals that have no public equivalent.

Runs, task instances, XComs: /api/v2, as the viewer
  The reader sends the viewer's own token (the `Authorization: Bearer` token, else the `_token` cookie: the order
  Airflow's own `get_user` takes them), so Airflow's per-DAG authorization decides what the page shows, as it does
  for Airflow's own UI. Answers, mapped:
    - the run refused (401, 403): `AirflowAccessRefused`, the page's access error (403);
    - the run not found (404): None, "no such run";
    - the task-instance or XCom list refused or not found: that part empty (the viewer may read the run but not
      them; the Migration page says what it hides, from the same auth manager's answer, `RunAccess` in app.py);
    - anything else (5xx, an answer of another shape, no answer within `TIMEOUT`): `AirflowApiError`, shown in
      the run's place on the page with what to check.

  Transport: in process. The requests go to the api-server's own root ASGI app through httpx's ASGITransport,
  awaited on the server's event loop with `anyio.from_thread.run` (FastAPI runs the pages' sync handlers in anyio
  worker threads). No network hop, no TLS, no base URL to configure: a wrong `[api] base_url` behind a proxy
  cannot break the pages, and each request passes Airflow's own middleware, exception handlers and security
  dependencies as any client's does. The root app is not reachable from a request to a mounted app: Starlette
  sets scope["app"] to the mounted app, and scope["router"] is only the root's router (calling it skips the
  root's exception handlers: a 404 would escape as an exception). So the plugin adds a root middleware
  (`fastapi_root_middlewares`, Airflow's public plugin interface) that copies scope["app"], at that point the
  root app, into scope[ROOT_APP_KEY]; nothing else.
  The cost of in-process: an inner request runs its sync endpoint in a worker thread of the same pool whose
  thread the page holds while it waits (anyio's default limiter, 40 threads). With 40 pages waiting at once the
  inner requests could not start: the whole read is bounded by `TIMEOUT` and then fails saying so, not hangs.

  Requests per read: the run (GET dagRuns/{run_id}; for the latest run the dagRuns list ordered by -id, limit 1,
  as the former database read ordered), the run's task-instance list, the run's XCom list (task id `~`), then one
  GET per XCom for its value: in 3.3.2 the XCom list (`get_xcom_entries`, `XComResponse`) carries no values, the
  entry (`get_xcom_entry`) does. It is asked with deserialize=false, which returns the value as stored; a stored
  string holding JSON is parsed here, as the former reader's `XComModel.deserialize_value` did (it also decoded
  serde objects inside such legacy strings with Airflow's XComDecoder; values written by tasks through the task
  SDK are stored as JSON already and come back unchanged). Lists are read a page of `PAGE` at a time (the server
  may cap it lower: `[api] maximum_page_limit`). The Repair page's nightly run has 3 task instances and a few
  XComs: about six in-process requests per 15 s reload.

Internals that stay, because no public interface gives the same:
  - `Connection.get_connection_from_secrets` (`airflow_connection`): the connection as tasks see it, secrets
    backends and AIRFLOW_CONN_* variables included. The REST API's connection endpoint reads only the metadata
    database's table, and masks the password the driver needs.
  - `DagModel.get_team_name` (`dag_team_name`): the auth manager's DAG checks take the DAG's team (multi-team
    deployments); app.py asks the auth manager what the viewer may read of a run (`RunAccess`) with it, as
    Airflow's own `requires_access_dag` does. The REST API has no "may I" endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from ringward.errors import RingwardError

__all__ = [
    "PAGE",
    "ROOT_APP_KEY",
    "TIMEOUT",
    "AirflowAccessRefused",
    "AirflowApiError",
    "ApiRunReader",
    "RootAppInScope",
    "RunInfo",
    "TaskTiming",
    "airflow_connection",
    "dag_team_name",
    "run_info",
    "viewer_token",
    "xcom_name",
]

ROOT_APP_KEY = "ringward.airflow_app"  # the ASGI scope key the root middleware puts the root app under
TIMEOUT = 10.0  # seconds for a whole read (all its requests)
PAGE = 100  # list entries asked per request
API = "/api/v2"


@dataclass(frozen=True)
class TaskTiming:
    task_id: str
    map_index: int
    state: str
    start: datetime | None
    end: datetime | None
    tries: int

    @property
    def seconds(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return (self.end - self.start).total_seconds()


@dataclass(frozen=True)
class RunInfo:
    dag_id: str
    run_id: str
    state: str
    start: datetime | None
    end: datetime | None
    xcoms: dict[str, Any] = field(default_factory=dict)  # "task_id" or "task_id:key", "[map_index]" if mapped
    tasks: tuple[TaskTiming, ...] = ()  # started tasks in start order, then the ones not started yet


class AirflowAccessRefused(RingwardError):
    """Airflow's API refused the viewer the run (401: no valid token, 403: no permission)."""

    def __init__(self, problem: str, fix: str = "", *, status: int = 403) -> None:
        super().__init__(problem, fix)
        self.status = status


class AirflowApiError(RingwardError):
    """Airflow's API did not answer as expected."""


# -- the internals that stay --------------------------------------------------------------------------------


def airflow_connection(conn_id: str) -> Any:
    """The connection as tasks get it (secrets backends included); see the module's docstring."""
    from airflow.models.connection import Connection

    return Connection.get_connection_from_secrets(conn_id)


def dag_team_name(dag_id: str) -> str | None:
    """The DAG's team, which the auth manager's DAG checks take; see the module's docstring."""
    from airflow.models.dag import DagModel

    return DagModel.get_team_name(dag_id)


# -- the root app, for in-process requests ------------------------------------------------------------------


class RootAppInScope:
    """A root middleware of the api-server's app: puts that app (scope["app"] when the root's middleware runs)
    under scope[ROOT_APP_KEY], where the pages' mounted app finds it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and ROOT_APP_KEY not in scope:
            scope[ROOT_APP_KEY] = scope.get("app")
        await self.app(scope, receive, send)


def viewer_token(request: Any) -> str | None:
    """The token Airflow authenticated the request with: `Authorization: Bearer …`, else the `_token` cookie."""
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
    from fastapi.security.utils import get_authorization_scheme_param

    scheme, credentials = get_authorization_scheme_param(request.headers.get("authorization"))
    if scheme.lower() == "bearer" and credentials:
        return str(credentials)
    cookie = request.cookies.get(COOKIE_NAME_JWT_TOKEN)
    return str(cookie) if cookie else None


# -- from the API's JSON to RunInfo -------------------------------------------------------------------------


def _moment(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def xcom_name(task_id: str, key: str, map_index: int) -> str:
    """How the pages name an XCom: "task_id" (return value) or "task_id:key", then "[map_index]" if mapped."""
    name = task_id if key == "return_value" else f"{task_id}:{key}"
    return f"{name}[{map_index}]" if map_index >= 0 else name


def stored_value(value: Any) -> Any:
    """An XCom value as get_xcom_entry (deserialize=false) returns it, as the pages read it: a stored string that
    holds JSON parsed (see the module's docstring)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def run_info(
    dag_id: str, run: Mapping[str, Any], task_instances: list[Mapping[str, Any]], xcoms: dict[str, Any]
) -> RunInfo:
    """RunInfo from the API's run (DAGRunResponse), its task instances (TaskInstanceResponse) and the XComs."""
    timings = [
        TaskTiming(str(t["task_id"]), int(t["map_index"]), str(t.get("state") or "none"), _moment(t.get("start_date")),
                   _moment(t.get("end_date")), int(t.get("try_number") or 0))
        for t in task_instances
    ]  # fmt: skip
    tasks = tuple(sorted(timings, key=lambda t: (t.start is None, t.start.timestamp() if t.start else 0.0, t.task_id)))
    return RunInfo(dag_id, str(run["dag_run_id"]), str(run.get("state") or "none"), _moment(run.get("start_date")),
                   _moment(run.get("end_date")), xcoms, tasks)  # fmt: skip


# -- the reader ---------------------------------------------------------------------------------------------


def _path(*parts: str) -> str:
    return "/".join(quote(p, safe="") for p in parts)


class ApiRunReader:
    """Reads a DAG run as RunInfo through /api/v2 with the viewer's token, over `transport` (in process: the
    api-server's root app; tests: any httpx transport)."""

    def __init__(self, transport: Any, token: str | None, *, root_path: str = "", timeout: float = TIMEOUT) -> None:
        self.transport = transport
        self.token = token
        self.prefix = root_path.rstrip("/") + API
        self.timeout = timeout

    @classmethod
    def for_request(cls, request: Any) -> ApiRunReader:
        """The reader of the viewer of `request`, over the api-server's root app (see the module's docstring)."""
        import httpx

        app = request.scope.get(ROOT_APP_KEY)
        if app is None:
            return cls(httpx.MockTransport(_no_app), None)
        # The root app's own root path (from [api] base_url) prefixed: the router strips it as for any request.
        return cls(httpx.ASGITransport(app=app), viewer_token(request), root_path=str(getattr(app, "root_path", "")))

    # The pages' handlers are sync and run in anyio worker threads; the requests are awaited on the server's loop.
    def dag_run(self, dag_id: str, run_id: str | None) -> RunInfo | None:
        import anyio.from_thread

        try:
            return anyio.from_thread.run(self.read, dag_id, run_id)
        except RingwardError:
            raise
        except RuntimeError as error:  # not an anyio worker thread: no event loop to run the requests on
            raise AirflowApiError(
                f"Airflow's API can only be read in process from a request's handler thread: {error}",
                "Read runs from a page's handler (FastAPI runs sync handlers in anyio worker threads).",
            ) from error

    async def read(self, dag_id: str, run_id: str | None) -> RunInfo | None:
        """The run (`run_id`, or the latest when None) with its task instances and XComs; None: no such run."""
        import anyio
        import httpx

        headers = {"Accept-Encoding": "identity"}  # in process: nothing to gain from Airflow's gzip
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            with anyio.fail_after(self.timeout):
                async with httpx.AsyncClient(transport=self.transport, base_url="http://airflow-api.in-process",
                                             headers=headers) as client:  # fmt: skip
                    return await self._read(client, dag_id, run_id)
        except RingwardError:
            raise
        except TimeoutError:
            raise AirflowApiError(
                f"Airflow's API did not answer within {self.timeout:g} s for the runs of {dag_id}.",
                "Check the api-server's load and its metadata database; many pages loading at once wait for the "
                "api-server's worker threads.",
            ) from None
        except Exception as error:  # an exception out of Airflow's app, an answer of another shape
            raise AirflowApiError(
                f"Airflow's API failed reading the runs of {dag_id}: {type(error).__name__}: {error}",
                "Check the api-server's log for this request.",
            ) from error

    async def _read(self, client: Any, dag_id: str, run_id: str | None) -> RunInfo | None:
        runs = f"{self.prefix}/dags/{_path(dag_id)}/dagRuns"
        if run_id:
            response = await client.get(f"{runs}/{_path(run_id)}")
            if response.status_code == 404:
                return None
            run = self._json(response, dag_id, "the run")
        else:
            response = await client.get(runs, params={"order_by": "-id", "limit": 1})
            if response.status_code == 404:  # no such DAG
                return None
            found = self._json(response, dag_id, "its latest run")["dag_runs"]
            if not found:
                return None
            run = found[0]
        base = f"{runs}/{_path(str(run['dag_run_id']))}/taskInstances"
        task_instances = await self._list(client, base, "task_instances", dag_id)
        entries = await self._list(client, f"{base}/~/xcomEntries", "xcom_entries", dag_id)
        xcoms: dict[str, Any] = {}
        for entry in entries:
            task_id, key, map_index = str(entry["task_id"]), str(entry["key"]), int(entry["map_index"])
            response = await client.get(f"{base}/{_path(task_id)}/xcomEntries/{_path(key)}",
                                        params={"map_index": map_index, "deserialize": "false"})  # fmt: skip
            if response.status_code in (403, 404):  # refused, or deleted since the list was read
                continue
            xcoms[xcom_name(task_id, key, map_index)] = stored_value(self._json(response, dag_id, "an XCom")["value"])
        return run_info(dag_id, run, task_instances, xcoms)

    async def _list(self, client: Any, url: str, items: str, dag_id: str) -> list[Any]:
        """Every entry of a list endpoint, a page at a time; empty when the viewer may not read it (403) or the
        API finds nothing to list it from (404: e.g. the DAG's serialized version is gone)."""
        found: list[Any] = []
        while True:
            response = await client.get(url, params={"limit": PAGE, "offset": len(found)})
            if response.status_code in (403, 404):
                return []
            body = self._json(response, dag_id, items.replace("_", " "))
            page = list(body[items])
            found.extend(page)
            if not page or len(found) >= int(body["total_entries"]):
                return found

    def _json(self, response: Any, dag_id: str, what: str) -> Any:
        """The answer's JSON; a refusal or a failure raised, named."""
        status = response.status_code
        if status == 200:
            return response.json()
        detail = _detail(response)
        if status == 401:
            raise AirflowAccessRefused(
                f"Airflow did not accept your sign-in when reading {what} of {dag_id} ({detail}).",
                "Sign in to Airflow again and reload the page.",
                status=401,
            )
        if status == 403:
            raise AirflowAccessRefused(
                f"Airflow refused you {what} of {dag_id} ({detail}).",
                f"Ask an Airflow administrator for read access to the runs of {dag_id}.",
            )
        raise AirflowApiError(
            f"Airflow's API answered {status} reading {what} of {dag_id}: {detail}",
            "Check the api-server's log for this request.",
        )


def _detail(response: Any) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = None
    return str(detail or response.text[:200] or response.reason_phrase)


def _no_app(request: Any) -> Any:
    """The transport's handler for a request that came without the root app in its scope: every read says why."""
    raise AirflowApiError(
        "This request reached ringward's pages without Airflow's app in its scope, so they cannot read runs "
        "through Airflow's API: the ringward plugin's root middleware is not installed.",
        "Load the ringward plugin in the api-server (Admin → Plugins lists it with its root middleware "
        f"RootAppInScope); an app mounting the pages elsewhere must put its Airflow app under scope[{ROOT_APP_KEY!r}].",
    )
