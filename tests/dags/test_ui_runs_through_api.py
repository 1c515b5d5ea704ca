"""The pages' run reader against Airflow's real API app and a real metadata database (the test home's SQLite):
a small DAG run with `dag.test()` (mapped tasks, a custom XCom key, a tuple, a failed task and one that never ran)
read through /api/v2 in process with simple-auth-manager tokens must give the same RunInfo the former reader got
from the database directly (kept here only as the oracle), and nothing without a valid token."""

from __future__ import annotations

import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from ringward_airflow.ui.airflow_reads import AirflowAccessRefused, ApiRunReader, RunInfo, TaskTiming

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import ui_fixtures  # noqa: E402

airflow_api = ui_fixtures.airflow_api  # the fixture, registered in this module

DAG_ID = "ringward_ui_api_probe"
PROBE = """
from datetime import UTC, datetime

from airflow.sdk import DAG, get_current_context, task

with DAG("ringward_ui_api_probe", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):

    @task
    def precheck():
        return {"keyspace": "shop", "steps": [1, 2], "nested": {"none": None}}

    @task
    def alter(record):
        get_current_context()["ti"].xcom_push(key="step_1.verify_preview", value={"mismatches": 0})
        return (1, "two")

    @task
    def verify(n):
        return f"done-{n}"

    @task
    def jsonish():
        return '{"a": 1}'

    @task(retries=0)
    def boom():
        raise RuntimeError("refused on purpose")

    @task
    def after(value):
        return value

    alter(precheck()) >> verify.expand(n=[1, 2])
    jsonish()
    after(boom())
"""


def database_read(dag_id: str, run_id: str | None) -> RunInfo | None:
    """The former reader (ringward_airflow.ui.source.read_dag_run before the REST API), verbatim: the oracle."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(DagRun).where(DagRun.dag_id == dag_id)
        query = query.where(DagRun.run_id == run_id) if run_id else query.order_by(DagRun.id.desc()).limit(1)
        run = session.scalars(query).first()
        if run is None:
            return None
        tis = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run.run_id)
        ).all()
        timings = [
            TaskTiming(t.task_id, t.map_index, str(t.state or "none"), t.start_date, t.end_date, t.try_number)
            for t in tis
        ]
        tasks = tuple(
            sorted(timings, key=lambda t: (t.start is None, t.start.timestamp() if t.start else 0.0, t.task_id))
        )
        xcoms: dict[str, Any] = {}
        for row in session.scalars(
            select(XComModel).where(XComModel.dag_id == dag_id, XComModel.run_id == run.run_id)
        ).all():
            name = row.task_id if row.key == "return_value" else f"{row.task_id}:{row.key}"
            if row.map_index >= 0:
                name += f"[{row.map_index}]"
            xcoms[name] = XComModel.deserialize_value(row)
        return RunInfo(dag_id, run.run_id, str(run.state), run.start_date, run.end_date, xcoms, tasks)


@pytest.fixture(scope="module")
def probe_run(
    airflow_api: tuple[Any, Any, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, dict[str, str], str]]:
    """(Airflow's API app, tokens per role, the run id of a finished run of the probe DAG)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    test_client, _, tokens = airflow_api
    folder = tmp_path_factory.mktemp("probe_dag")
    (folder / "ringward_ui_api_probe.py").write_text(textwrap.dedent(PROBE))
    bag = DagBag(dag_folder=str(folder))
    assert DAG_ID in bag.dags, bag.import_errors
    DagBundlesManager().sync_bundles_to_db()  # the DAG's bundle row (a fresh home has none before a parse)
    sync_bag_to_db(bag, "dags-folder", None)
    with warnings.catch_warnings():  # pathspec's pattern name, when the task runner discovers plugins
        warnings.filterwarnings("ignore", message="GitWildMatchPattern")
        run = bag.dags[DAG_ID].test()
    yield test_client.app, tokens, run.run_id


def api_read(app: Any, token: str | None, run_id: str | None) -> RunInfo | None:
    return anyio.run(ApiRunReader(httpx.ASGITransport(app=app), token).read, DAG_ID, run_id)


@pytest.mark.parametrize("role", ["admin", "viewer"])
def test_the_api_reader_returns_what_the_database_reader_returned(
    probe_run: tuple[Any, dict[str, str], str], role: str
) -> None:
    app, tokens, run_id = probe_run
    oracle = database_read(DAG_ID, run_id)
    assert oracle is not None
    assert api_read(app, tokens[role], run_id) == oracle
    assert api_read(app, tokens[role], None) == database_read(DAG_ID, None)  # the latest run: this one
    # What the run holds, so the comparison is not of two empty reads.
    assert oracle.state == "failed" and oracle.start is not None and oracle.end is not None
    states = {(t.task_id, t.map_index): t.state for t in oracle.tasks}
    assert states == {("precheck", -1): "success", ("alter", -1): "success", ("verify", 0): "success",
                      ("verify", 1): "success", ("jsonish", -1): "success", ("boom", -1): "failed",
                      ("after", -1): "upstream_failed"}  # fmt: skip
    assert [t.tries for t in oracle.tasks if t.task_id == "after"] == [0]  # never ran (Airflow stamps its dates)
    assert oracle.xcoms["precheck"] == {"keyspace": "shop", "steps": [1, 2], "nested": {"none": None}}
    assert oracle.xcoms["alter:step_1.verify_preview"] == {"mismatches": 0}
    assert (oracle.xcoms["verify[0]"], oracle.xcoms["verify[1]"]) == ("done-1", "done-2")
    assert oracle.xcoms["jsonish"] == {"a": 1}  # a string holding JSON, parsed as the database reader did
    assert oracle.xcoms["alter"]["__classname__"] == "builtins.tuple"  # serde's form, as stored, in both


def test_no_such_run_is_none_through_both(probe_run: tuple[Any, dict[str, str], str]) -> None:
    app, tokens, _ = probe_run
    assert api_read(app, tokens["admin"], "no-such-run") is None is database_read(DAG_ID, "no-such-run")
    assert api_read(app, tokens["admin"], None) is not None
    assert anyio.run(ApiRunReader(httpx.ASGITransport(app=app), tokens["admin"]).read, "no_such_dag", None) is None


def test_without_a_valid_token_airflow_refuses_the_run(probe_run: tuple[Any, dict[str, str], str]) -> None:
    app, _, run_id = probe_run
    with pytest.raises(AirflowAccessRefused) as anonymous:
        api_read(app, None, run_id)
    assert anonymous.value.status == 401 and "Not authenticated" in str(anonymous.value)
    with pytest.raises(AirflowAccessRefused) as forged:
        api_read(app, "not-a-jwt", run_id)
    assert forged.value.status == 403 and "Invalid JWT token" in str(forged.value)
    with pytest.raises(AirflowAccessRefused):
        api_read(app, "not-a-jwt", None)
