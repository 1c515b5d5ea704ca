"""The pages' reader of Airflow's runs through /api/v2 (ringward_airflow.ui.airflow_reads), against a fake API on
httpx's MockTransport: the API's JSON mapped to RunInfo, the requests it costs, and each answer's mapping
(404: no such run, 401/403: the page's access error, anything else: a named error)."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from ringward_airflow.ui import airflow_reads
from ringward_airflow.ui.airflow_reads import (
    ROOT_APP_KEY,
    AirflowAccessRefused,
    AirflowApiError,
    ApiRunReader,
    RootAppInScope,
    RunInfo,
    TaskTiming,
    run_info,
    stored_value,
    viewer_token,
    xcom_name,
)

DAG = "keyspace_migration"
RUN = "manual__2026-11-23T10:00:00+00:00"
TOKEN = "the-viewers-token"


def at(second: int) -> datetime:
    return datetime(2026, 11, 23, 10, 0, second, tzinfo=UTC)


def iso(second: int) -> str:
    return at(second).isoformat().replace("+00:00", "Z")  # as Airflow's API writes them


def ti(
    task_id: str, state: str | None, start: int | None, end: int | None, tries: int = 1, map_index: int = -1
) -> dict[str, Any]:
    return {"task_id": task_id, "map_index": map_index, "state": state, "try_number": tries,
            "start_date": None if start is None else iso(start), "end_date": None if end is None else iso(end),
            "rendered_fields": {}, "operator": "PythonOperator"}  # fmt: skip


class FakeApi:
    """/api/v2 as Airflow 3.3.2 answers the reads (lists without values, an entry with its value), and a log of
    the requests; `status` overrides the answer of a path containing its key."""

    def __init__(self) -> None:
        self.run = {"dag_run_id": RUN, "dag_id": DAG, "state": "running", "start_date": iso(1), "end_date": None}
        self.tis = [ti("alter", "success", 4, 9, tries=2), ti("precheck", "success", 1, 3),
                    ti("repair", None, None, None), ti("verify", "running", 10, None, map_index=0),
                    ti("verify", "success", 10, 12, map_index=1)]  # fmt: skip
        self.xcoms: dict[tuple[str, str, int], Any] = {
            ("precheck", "return_value", -1): {"keyspace": "shop", "steps": [1, 2]},
            ("alter", "step_1.verify_preview", -1): {"mismatches": 0},
            ("verify", "return_value", 1): "done",
            ("verify", "return_value", 0): '{"legacy": "json in a string"}',
            ("report", "a/key with/slashes", -1): 7,
        }
        self.status: dict[str, tuple[int, Any]] = {}
        self.requests: list[httpx.Request] = []

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path  # decoded, as Starlette routes it
        for part, (status, body) in self.status.items():
            if part in path:
                return httpx.Response(status, json=body)
        params = request.url.params
        runs = f"/api/v2/dags/{DAG}/dagRuns"
        if not path.startswith(runs):
            return httpx.Response(404, json={"detail": "The Dag with ID: `x` was not found"})
        if path == runs:
            return httpx.Response(200, json={"dag_runs": [self.run][: int(params["limit"])], "total_entries": 1})
        if path == f"{runs}/{RUN}":
            return httpx.Response(200, json=self.run)
        if not path.startswith(f"{runs}/{RUN}/taskInstances"):
            return httpx.Response(404, json={"detail": "The DagRun was not found"})
        tail = path.removeprefix(f"{runs}/{RUN}/taskInstances")
        offset, limit = int(params.get("offset", 0)), int(params.get("limit", 50))
        if tail == "":
            return httpx.Response(200, json={"task_instances": self.tis[offset : offset + limit],
                                             "total_entries": len(self.tis)})  # fmt: skip
        if tail == "/~/xcomEntries":
            entries = [{"task_id": t, "key": k, "map_index": m, "dag_id": DAG, "run_id": RUN}
                       for (t, k, m) in self.xcoms]  # fmt: skip
            return httpx.Response(200, json={"xcom_entries": entries[offset : offset + limit],
                                             "total_entries": len(entries)})  # fmt: skip
        task_id, _, key = tail.removeprefix("/").partition("/xcomEntries/")
        found = (task_id, key, int(params.get("map_index", -1)))
        assert params.get("deserialize") == "false"
        if found not in self.xcoms:
            return httpx.Response(404, json={"detail": f"XCom entry with key: `{key}` not found"})
        return httpx.Response(200, json={"key": key, "task_id": task_id, "value": self.xcoms[found]})


def read(api: FakeApi, run_id: str | None = RUN, token: str | None = TOKEN, **options: Any) -> RunInfo | None:
    reader = ApiRunReader(api.transport(), token, **options)
    return anyio.run(reader.read, DAG, run_id)


EXPECTED_XCOMS = {
    "precheck": {"keyspace": "shop", "steps": [1, 2]},
    "alter:step_1.verify_preview": {"mismatches": 0},
    "verify[1]": "done",
    "verify[0]": {"legacy": "json in a string"},
    "report:a/key with/slashes": 7,
}


def test_a_run_with_its_task_instances_in_start_order_and_its_xcoms_named_as_the_pages_use_them() -> None:
    api = FakeApi()
    run = read(api)
    assert run == RunInfo(DAG, RUN, "running", at(1), None, EXPECTED_XCOMS, (
        TaskTiming("precheck", -1, "success", at(1), at(3), 1),
        TaskTiming("alter", -1, "success", at(4), at(9), 2),
        TaskTiming("verify", 0, "running", at(10), None, 1),
        TaskTiming("verify", 1, "success", at(10), at(12), 1),
        TaskTiming("repair", -1, "none", None, None, 1),
    ))  # fmt: skip
    assert run is not None and run.tasks[1].seconds == 5.0
    # The run, the two lists, one request per XCom value: nothing else.
    paths = [r.url.path for r in api.requests]
    assert paths[:3] == [f"/api/v2/dags/{DAG}/dagRuns/{RUN}", f"/api/v2/dags/{DAG}/dagRuns/{RUN}/taskInstances",
                         f"/api/v2/dags/{DAG}/dagRuns/{RUN}/taskInstances/~/xcomEntries"]  # fmt: skip
    assert len(paths) == 3 + len(api.xcoms)
    # Every request carries the viewer's token, as a bearer token (the form Airflow's get_user takes first).
    assert {r.headers.get("authorization") for r in api.requests} == {f"Bearer {TOKEN}"}
    # Run ids, task ids and keys are quoted whole in the path ('+', ':', '/').
    assert f"/dagRuns/{RUN.replace(':', '%3A').replace('+', '%2B')}" in str(api.requests[0].url)
    assert any("a%2Fkey%20with%2Fslashes" in str(r.url) for r in api.requests)


def test_the_latest_run_is_the_newest_by_id_one_run_asked() -> None:
    api = FakeApi()
    run = read(api, run_id=None)
    assert run is not None and run.run_id == RUN and run.xcoms == EXPECTED_XCOMS
    first = api.requests[0]
    assert first.url.path == f"/api/v2/dags/{DAG}/dagRuns"
    assert dict(first.url.params) == {"order_by": "-id", "limit": "1"}


def test_no_such_run_or_dag_is_none() -> None:
    assert read(FakeApi(), run_id="no-such-run") is None
    api = FakeApi()
    api.run = {}
    api.status["/dagRuns"] = (200, {"dag_runs": [], "total_entries": 0})
    assert read(api, run_id=None) is None  # a DAG without runs
    api = FakeApi()
    api.status[f"/dags/{DAG}"] = (404, {"detail": "The Dag with ID: `keyspace_migration` was not found"})
    assert read(api, run_id=None) is None and read(api) is None


def test_lists_are_read_a_page_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(airflow_reads, "PAGE", 2)
    api = FakeApi()
    run = read(api)
    assert run is not None and len(run.tasks) == 5 and run.xcoms == EXPECTED_XCOMS
    listed = [dict(r.url.params) for r in api.requests if r.url.path.endswith("/taskInstances")]
    assert listed == [{"limit": "2", "offset": "0"}, {"limit": "2", "offset": "2"}, {"limit": "2", "offset": "4"}]


@pytest.mark.parametrize(("status", "detail"), [(401, "Token Expired"), (403, "Forbidden")])
def test_the_run_refused_is_the_pages_access_error(status: int, detail: str) -> None:
    api = FakeApi()
    api.status["/dagRuns"] = (status, {"detail": detail})
    for run_id in (RUN, None):
        with pytest.raises(AirflowAccessRefused) as refused:
            read(api, run_id=run_id)
        assert refused.value.status == status and detail in str(refused.value)
        assert ("Sign in to Airflow again" if status == 401 else "read access to the runs of") in str(refused.value)


def test_task_instances_or_xcoms_refused_leave_that_part_empty_not_the_run() -> None:
    api = FakeApi()
    api.status[f"{RUN}/taskInstances/~/xcomEntries"] = (403, {"detail": "Forbidden"})
    run = read(api)
    assert run is not None and run.xcoms == {} and len(run.tasks) == 5
    api = FakeApi()
    api.status[f"{RUN}/taskInstances"] = (403, {"detail": "Forbidden"})  # the XCom list is under it too
    run = read(api)
    assert run is not None and run.state == "running" and run.tasks == () and run.xcoms == {}


def test_an_xcom_deleted_between_the_list_and_its_read_is_left_out() -> None:
    api = FakeApi()
    api.status["/xcomEntries/step_1.verify_preview"] = (404, {"detail": "XCom entry not found"})
    run = read(api)
    assert run is not None and "alter:step_1.verify_preview" not in run.xcoms and "precheck" in run.xcoms


def test_other_failures_are_named_with_what_to_check() -> None:
    api = FakeApi()
    api.status["/taskInstances"] = (500, {"detail": "Internal Server Error"})
    with pytest.raises(AirflowApiError, match=r"answered 500 reading task instances of keyspace_migration") as error:
        read(api)
    assert "api-server's log" in str(error.value)

    def broken(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("database is locked")

    with pytest.raises(AirflowApiError, match="failed reading the runs of keyspace_migration: RuntimeError: database"):
        anyio.run(ApiRunReader(httpx.MockTransport(broken), TOKEN).read, DAG, RUN)

    def not_json(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>a proxy's page</html>")

    with pytest.raises(AirflowApiError, match="JSONDecodeError"):
        anyio.run(ApiRunReader(httpx.MockTransport(not_json), TOKEN).read, DAG, RUN)


def test_a_read_that_does_not_finish_in_time_fails_saying_so() -> None:
    async def slow(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(5)
        return httpx.Response(200, json={})

    with pytest.raises(AirflowApiError, match=r"did not answer within 0.2 s (.|\n)* worker threads"):
        anyio.run(ApiRunReader(httpx.MockTransport(slow), TOKEN, timeout=0.2).read, DAG, RUN)


def test_no_token_sends_no_authorization_and_the_refusal_is_the_access_error() -> None:
    api = FakeApi()
    api.status["/dagRuns"] = (401, {"detail": "Not authenticated"})
    with pytest.raises(AirflowAccessRefused):
        read(api, token=None)
    assert "authorization" not in api.requests[0].headers


def test_the_root_path_of_airflows_app_prefixes_every_path() -> None:
    seen = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(404, json={"detail": "Not Found"})

    anyio.run(ApiRunReader(httpx.MockTransport(handle), TOKEN, root_path="/airflow/").read, DAG, RUN)
    assert seen == [f"/airflow/api/v2/dags/{DAG}/dagRuns/{RUN}"]


def test_the_sync_read_runs_on_the_event_loop_from_a_handlers_worker_thread() -> None:
    """FastAPI runs sync handlers in anyio worker threads: `dag_run` awaits the requests on the loop from there;
    from any other thread it says why it cannot."""
    api = FakeApi()
    reader = ApiRunReader(api.transport(), TOKEN)
    loop_thread: list[int] = []

    async def handler_thread() -> RunInfo | None:
        loop_thread.append(threading.get_ident())
        return await anyio.to_thread.run_sync(reader.dag_run, DAG, RUN)

    run = anyio.run(handler_thread)
    assert run is not None and run.xcoms == EXPECTED_XCOMS
    with pytest.raises(AirflowApiError, match="from a request's handler thread"):
        reader.dag_run(DAG, RUN)


def test_a_request_without_airflows_app_in_its_scope_says_the_root_middleware_is_missing() -> None:
    request = SimpleNamespace(scope={}, headers={}, cookies={})
    reader = ApiRunReader.for_request(request)
    with pytest.raises(AirflowApiError, match="root middleware is not installed") as error:
        anyio.run(reader.read, DAG, RUN)
    assert "RootAppInScope" in str(error.value)


def test_the_root_middleware_puts_the_root_app_in_scope_and_the_reader_uses_it() -> None:
    seen: dict[str, Any] = {}

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        seen.update(scope)

    root = object()
    scope: dict[str, Any] = {"type": "http", "app": root}
    anyio.run(RootAppInScope(inner), scope, None, None)
    assert seen[ROOT_APP_KEY] is root
    # A request inside the mounted app: scope["app"] is the mounted app by then; the root one is kept.
    scope["app"] = object()
    anyio.run(RootAppInScope(inner), scope, None, None)
    assert seen[ROOT_APP_KEY] is root
    lifespan: dict[str, Any] = {"type": "lifespan", "app": root}
    anyio.run(RootAppInScope(inner), lifespan, None, None)
    assert ROOT_APP_KEY not in lifespan


def test_the_viewers_token_bearer_first_then_the_cookie() -> None:
    def request(headers: dict[str, str], cookies: dict[str, str]) -> Any:
        return SimpleNamespace(headers=headers, cookies=cookies)

    assert viewer_token(request({"authorization": "Bearer abc"}, {"_token": "cookie"})) == "abc"
    assert viewer_token(request({}, {"_token": "cookie"})) == "cookie"
    assert viewer_token(request({"authorization": "Basic abc"}, {"_token": "cookie"})) == "cookie"
    assert viewer_token(request({}, {})) is None


def test_mapping_helpers() -> None:
    assert xcom_name("precheck", "return_value", -1) == "precheck"
    assert xcom_name("alter", "step_1.verify_counts", -1) == "alter:step_1.verify_counts"
    assert xcom_name("verify", "return_value", 3) == "verify[3]"
    assert xcom_name("verify", "extra", 0) == "verify:extra[0]"
    assert stored_value('{"a": [1, 2]}') == {"a": [1, 2]}
    assert stored_value("plain text") == "plain text"
    assert stored_value({"a": 1}) == {"a": 1} and stored_value(None) is None
    run = run_info(DAG, {"dag_run_id": RUN, "state": None, "start_date": None, "end_date": None}, [], {})
    assert run == RunInfo(DAG, RUN, "none", None, None, {}, ())
    json.dumps(EXPECTED_XCOMS)  # the fake's values are what JSON carries


def test_in_process_reads_starved_of_worker_threads_fail_in_time_instead_of_hanging() -> None:
    """The page's handler holds a worker thread while Airflow's sync endpoints need one of the same pool: with
    none left (here a pool of one; in the api-server 40 pages at once) the read gives up after its timeout."""
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/api/v2/dags/{dag_id}/dagRuns/{run_id}")
    def run(dag_id: str, run_id: str) -> dict[str, Any]:  # sync, as Airflow's: run in a worker thread
        return {"dag_run_id": run_id, "state": "running", "start_date": None, "end_date": None}

    async def page(tokens: int) -> RunInfo | None:
        anyio.to_thread.current_default_thread_limiter().total_tokens = tokens
        reader = ApiRunReader(httpx.ASGITransport(app=app), TOKEN, timeout=1.0)
        return await anyio.to_thread.run_sync(reader.dag_run, DAG, "no-tasks-here")

    with pytest.raises(AirflowApiError, match="did not answer within 1 s"):
        anyio.run(page, 1)
    run_read = anyio.run(page, 2)  # one thread for the page, one for the endpoint: read
    assert run_read is not None and run_read.state == "running"
