"""The pages read Airflow's runs through its REST API in process inside a real `airflow api-server` (uvicorn, the
root app's middleware, the plugin's root middleware), as the viewer. No cluster: the plugin is loaded through a
wrapper that gives it the in-memory cluster of tests/unit/ringward_airflow/ui/test_ui_plugin.py, while its runs are
read for real (`ApiRunReader`). The runs are made with `dag.test()` of stand-ins named as ringward's DAGs; nothing is
triggered, no scheduler runs. The api-server is on a free port of 127.0.0.1 with a home of its own,
and stopped after."""

from __future__ import annotations

import html
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from ringward_cli.airflow_env import migrate_airflow_db

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from airflow_stack import free_port  # noqa: E402

AIRFLOW = str(Path(sys.executable).parent / "airflow")
RUN_ID = "manual__2026-11-23T10:00:00+00:00"  # the run the in-memory cluster's migration record names
PASSWORDS = {"admin": "admin-pw", "viewer": "viewer-pw"}

STAND_INS = """
from datetime import UTC, datetime

from airflow.sdk import DAG, TaskGroup, task

with DAG("keyspace_migration", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):

    @task
    def precheck():
        return {"keyspace": "shop"}

    @task
    def verify_preview():
        return {"preview_ranges_in_sync": 7}

    first = precheck()
    with TaskGroup("step_1"):
        first >> verify_preview()

with DAG("nightly_subrange_repair", schedule=None, start_date=datetime(2026, 1, 1, tzinfo=UTC)):

    @task
    def plan():
        return {"due": 6}

    plan()
"""

MAKE_RUNS = """
import sys, warnings
from datetime import UTC, datetime
from airflow.dag_processing.bundles.manager import DagBundlesManager
from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db
warnings.filterwarnings("ignore")
bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
DagBundlesManager().sync_bundles_to_db()
sync_bag_to_db(bag, "dags-folder", None)
moment = datetime(2026, 11, 23, 10, tzinfo=UTC)
migration = bag.dags["keyspace_migration"].test(run_after=moment, logical_date=moment)
nightly = bag.dags["nightly_subrange_repair"].test()
print("RUNS", migration.run_id, nightly.run_id)
"""

WRAPPER = """
import sys
from importlib.metadata import entry_points

sys.path[:0] = [{tests!r}, {unit!r}]
from ringward_airflow.ui.airflow_reads import ApiRunReader
from ringward_airflow.ui.plugin import _app
from test_ui_plugin import ApiRuns, _world

# The plugin: the installed ringward's `airflow.plugins` entry point, or this module when ringward is not
# installed (as plugins/ringward_plugin.py does: never both, Airflow would report the second as an error).
if not any(e.value == "ringward_airflow.ui.plugin:RingwardPlugin" for e in entry_points(group="airflow.plugins")):
    from ringward_airflow.ui.plugin import RingwardPlugin

WORLD = _world()
_app().state.source_factory = lambda request: ApiRuns(
    WORLD.ring_, WORLD.store, {{}}, WORLD.gc_grace, WORLD.replication, ApiRunReader.for_request(request)
)
"""


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str], str, Path]]:
    """(the api-server's URL, a token per user, the nightly run's id, the api-server's log)."""
    base = tmp_path_factory.mktemp("ui-api-server")
    home, dags, plugins = base / "home", base / "dags", base / "plugins"
    for folder in (home, dags, plugins):
        folder.mkdir()
    (dags / "stand_ins.py").write_text(textwrap.dedent(STAND_INS))
    (plugins / "ringward_with_memory_cluster.py").write_text(
        WRAPPER.format(tests=str(ROOT / "tests"), unit=str(ROOT / "tests" / "unit" / "ringward_airflow" / "ui"))
    )
    (home / "passwords.json").write_text(json.dumps(PASSWORDS))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTEST"))}
    env.update({
        "AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "no-plugins"),  # the runs are made without the wrapper
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}", "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port), "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API_AUTH__JWT_SECRET": "ringward-ui-api-" + os.urandom(8).hex(), "AIRFLOW__CORE__FERNET_KEY": "",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "include"), str(ROOT / "plugins")]),
        "AIRFLOW_CONN_CASSANDRA_DEFAULT": '{"conn_type": "cassandra", "host": "127.0.0.1", "port": 1}',
    })  # fmt: skip
    migrate_airflow_db(env, str(AIRFLOW))
    made = subprocess.run([sys.executable, "-c", MAKE_RUNS, str(dags)], env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    runs = [line.split() for line in made.stdout.splitlines() if line.startswith("RUNS ")]
    assert made.returncode == 0 and runs, (made.stdout + made.stderr)[-4000:]
    assert runs[0][1] == RUN_ID
    log_path = home / "api-server.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen([AIRFLOW, "api-server"], env={**env, "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins)},
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, log_path.read_text(errors="replace")[-4000:]
            try:
                if httpx.get(f"{url}/api/v2/version", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the api-server did not answer within 240 s"
            time.sleep(1)
        tokens = {}
        for user, password in PASSWORDS.items():
            response = httpx.post(f"{url}/auth/token", json={"username": user, "password": password}, timeout=30)
            response.raise_for_status()
            tokens[user] = response.json()["access_token"]
        yield url, tokens, runs[0][2], log_path
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)


MIGRATION = f"/ringward/api/migration/keyspace_migration/{quote(RUN_ID, safe='')}"


def _inner_reads(log_path: Path) -> list[str]:
    """The access log's lines of /api/v2 requests the pages made in process (httpx's ASGITransport's client)."""
    lines = log_path.read_text(errors="replace").splitlines()
    return [line for line in lines if "client_addr=127.0.0.1:123 " in line and "path=/api/v2/dags/" in line]


@pytest.mark.parametrize("user", ["admin", "viewer"])
def test_the_migration_page_shows_the_run_its_tasks_and_its_xcoms_read_through_the_api(
    api_server: tuple[str, dict[str, str], str, Path], user: str
) -> None:
    url, tokens, _, log_path = api_server
    before = len(_inner_reads(log_path))
    response = httpx.get(url + MIGRATION, headers={"Authorization": f"Bearer {tokens[user]}"}, timeout=30)
    assert response.status_code == 200, response.text[:500]
    data = response.json()
    run = data["run"]
    assert run["run_id"] == RUN_ID and run["state"] == "success" and run["hidden"] == []
    assert [(t["task_id"], t["state"], t["tries"]) for t in run["tasks"]] == [
        ("precheck", "success", 1), ("step_1.verify_preview", "success", 1)]  # fmt: skip
    assert data["steps"][0]["verification"] == {"verify_preview": {"preview_ranges_in_sync": 7}}  # an XCom's value
    # The run, the two lists, the two values: in process, through Airflow's app (its access log has them).
    assert len(_inner_reads(log_path)) - before == 5


def test_the_repair_page_by_cookie_shows_the_latest_nightly_run(
    api_server: tuple[str, dict[str, str], str, Path],
) -> None:
    url, tokens, nightly_run, _ = api_server
    response = httpx.get(f"{url}/ringward/api/repair", cookies={"_token": tokens["viewer"]}, timeout=30)
    assert response.status_code == 200, response.text[:500]
    assert response.json()["current_run"]["run_id"] == nightly_run
    assert response.json()["current_run"]["state"] == "success"


def test_the_migration_html_and_the_refusals(api_server: tuple[str, dict[str, str], str, Path]) -> None:
    url, tokens, _, _ = api_server
    page = MIGRATION.replace("/api/", "/")
    response = httpx.get(url + page, headers={"Authorization": f"Bearer {tokens['admin']}"}, timeout=30)
    assert response.status_code == 200
    text = html.unescape(response.text)
    assert RUN_ID in text and "step_1.verify_preview" in text and "preview repair" in text
    assert httpx.get(url + MIGRATION, timeout=30).status_code == 401
    assert httpx.get(url + MIGRATION, headers={"Authorization": "Bearer forged"}, timeout=30).status_code == 403


def test_nothing_went_wrong_in_the_api_server(api_server: tuple[str, dict[str, str], str, Path]) -> None:
    _, _, _, log_path = api_server
    text = log_path.read_text(errors="replace")
    assert "Traceback" not in text
    statuses: Any = {line.rsplit("status_code=", 1)[-1].strip() for line in _inner_reads(log_path)}
    assert statuses == {"200"}, statuses
