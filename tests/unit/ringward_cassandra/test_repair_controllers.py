"""Other repair controllers: AutoRepair settings read from real 5.0.9 nodetool output, what a migration turns
off and sets back; Reaper schedules paused and resumed through its REST API (an in-process fake of Reaper)."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from ringward.errors import ClusterError
from ringward.repair_controllers import (
    AutoRepairChange,
    AutoRepairSettings,
    ReaperSchedule,
    autorepair_pause_changes,
    autorepair_restore_changes,
    describe_autorepair,
    parse_autorepair_config,
    reaper_schedules_to_pause,
    reaper_schedules_to_resume,
    settings_from_json,
    settings_to_json,
)
from ringward_cassandra.nodetool import NodetoolClient
from ringward_cassandra.repair_controllers import ReaperClient, apply_autorepair_changes, read_autorepair

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "autorepair"
# Captured from `nodetool getautorepairconfig` on a Cassandra 5.0.9 node of the `autorepair` topology, before
# and after `setautorepairconfig -t <type> enabled false` for both types, then `-t full enabled true`.
BOTH_ON = (FIXTURES / "getautorepairconfig-full-incremental.txt").read_text()
FULL_ONLY = (FIXTURES / "getautorepairconfig-full-only.txt").read_text()


def test_real_output_parses_per_repair_type() -> None:
    both = parse_autorepair_config("127.0.0.2", BOTH_ON)
    assert both.available
    assert dict(both.enabled) == {"full": True, "incremental": True, "preview_repaired": False}
    assert both.active_types == ("full", "incremental")
    assert parse_autorepair_config("127.0.0.2", FULL_ONLY).active_types == ("full",)


def test_a_node_without_autorepair_has_nothing_active() -> None:
    off = parse_autorepair_config("127.0.0.4", "Auto-repair is not enabled\n")
    assert not off.available and off.active_types == ()
    with pytest.raises(ClusterError) as refusal:
        parse_autorepair_config("127.0.0.4", "something else entirely")
    assert "127.0.0.4" in refusal.value.problem and "getautorepairconfig" in refusal.value.fix


def test_pause_turns_off_every_enabled_type_on_every_node() -> None:
    settings = [
        parse_autorepair_config("127.0.0.3", FULL_ONLY),
        parse_autorepair_config("127.0.0.2", BOTH_ON),
        AutoRepairSettings("127.0.0.10", available=False),
    ]
    assert autorepair_pause_changes(settings) == [
        AutoRepairChange("127.0.0.2", "full", False),
        AutoRepairChange("127.0.0.2", "incremental", False),
        AutoRepairChange("127.0.0.3", "full", False),
    ]
    assert AutoRepairChange("127.0.0.2", "full", False).nodetool_args == (
        "setautorepairconfig", "-t", "full", "enabled", "false",
    )  # fmt: skip


def test_restore_sets_back_exactly_what_differs_from_before() -> None:
    before = [parse_autorepair_config("127.0.0.2", BOTH_ON), parse_autorepair_config("127.0.0.3", FULL_ONLY)]
    paused = {
        "127.0.0.2": AutoRepairSettings("127.0.0.2", True, {"full": False, "incremental": False,
                                                            "preview_repaired": False}),
        # Someone turned preview_repaired on meanwhile; full is still on (its pause did not happen).
        "127.0.0.3": AutoRepairSettings("127.0.0.3", True, {"full": True, "incremental": False,
                                                            "preview_repaired": True}),
    }  # fmt: skip
    assert autorepair_restore_changes(before, paused) == [
        AutoRepairChange("127.0.0.2", "full", True),
        AutoRepairChange("127.0.0.2", "incremental", True),
        AutoRepairChange("127.0.0.3", "preview_repaired", False),
    ]
    assert autorepair_restore_changes(before, {s.node: s for s in before}) == []


def test_restore_refuses_naming_a_node_that_did_not_answer() -> None:
    before = [parse_autorepair_config("127.0.0.2", BOTH_ON), parse_autorepair_config("127.0.0.3", FULL_ONLY)]
    with pytest.raises(ClusterError) as refusal:
        autorepair_restore_changes(before, {"127.0.0.2": before[0]})
    assert "127.0.0.3" in refusal.value.problem and "127.0.0.2" not in refusal.value.problem
    assert "setautorepairconfig" in refusal.value.fix


def test_saved_settings_survive_json() -> None:
    settings = [parse_autorepair_config("127.0.0.2", BOTH_ON), AutoRepairSettings("127.0.0.9", False)]
    assert settings_from_json(json.loads(json.dumps(settings_to_json(settings)))) == settings


def test_approval_text_names_nodes_and_types() -> None:
    text = describe_autorepair([parse_autorepair_config("127.0.0.2", BOTH_ON), AutoRepairSettings("127.0.0.3", False)])
    assert "1 of 2 node(s)" in text and "- 127.0.0.2: full, incremental" in text and "127.0.0.3" not in text
    assert "nothing to pause" in describe_autorepair([AutoRepairSettings("127.0.0.3", False)])


class FakeNodetool(NodetoolClient):
    """A nodetool that answers from per-node AutoRepair state, as a 5.0.9 node does."""

    def __init__(self, state: dict[str, dict[str, bool] | None], down: Sequence[str] = ()) -> None:
        super().__init__()
        self.state = state
        self.down = set(down)
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def run(self, address: str, args: Sequence[str], timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        self.calls.append((address, tuple(args)))
        if address in self.down:
            return subprocess.CompletedProcess(args, 1, "nodetool: Failed to connect to '127.0.0.1:7300'", "")
        if args[0] == "version":
            return subprocess.CompletedProcess(args, 0, "ReleaseVersion: 5.0.9\n", "")
        types = self.state[address]
        if types is None:
            return subprocess.CompletedProcess(args, 0, "Auto-repair is not enabled\n", "")
        if args[0] == "getautorepairconfig":
            text = "repair scheduler configuration:\n\trepair_check_interval: 5m\n" + "".join(
                f"configuration for repair_type: {kind}\n\tenabled: {str(on).lower()}\n" for kind, on in types.items()
            )
            return subprocess.CompletedProcess(args, 0, text, "")
        assert args[0] == "setautorepairconfig" and args[1] == "-t" and args[3] == "enabled"
        types[args[2]] = args[4] == "true"
        return subprocess.CompletedProcess(args, 0, "", "")


def test_adapter_pauses_and_restores_through_nodetool() -> None:
    state: dict[str, dict[str, bool] | None] = {
        "127.0.0.2": {"full": True, "incremental": True, "preview_repaired": False},
        "127.0.0.3": {"full": False, "incremental": True, "preview_repaired": False},
        "127.0.0.4": None,
    }
    original = json.loads(json.dumps(state))
    nodetool = FakeNodetool(state)
    before = read_autorepair(nodetool, list(state))
    assert apply_autorepair_changes(nodetool, autorepair_pause_changes(before)) == []
    assert all(not any(t.values()) for t in state.values() if t is not None)
    now = {s.node: s for s in read_autorepair(nodetool, list(state))}
    assert apply_autorepair_changes(nodetool, autorepair_restore_changes(before, now)) == []
    assert state == original


def test_adapter_reports_an_unreachable_node_by_name() -> None:
    nodetool = FakeNodetool({"127.0.0.3": {"full": True}}, down=["127.0.0.3"])
    with pytest.raises(ClusterError) as refusal:
        read_autorepair(nodetool, ["127.0.0.3"])
    assert "127.0.0.3" in refusal.value.problem
    failures = apply_autorepair_changes(nodetool, [AutoRepairChange("127.0.0.3", "full", True)])
    assert len(failures) == 1 and failures[0].startswith("127.0.0.3: full on")


def test_reaper_schedule_choices() -> None:
    schedules = [
        ReaperSchedule("a", "shop", "prod", "ACTIVE"),
        ReaperSchedule("b", "shop", "prod", "PAUSED"),  # paused by someone else: left paused afterwards
        ReaperSchedule("c", "other", "prod", "ACTIVE"),
        ReaperSchedule("d", "shop", "staging", "ACTIVE"),
    ]
    assert [s.id for s in reaper_schedules_to_pause(schedules, "shop", "prod")] == ["a"]
    assert [s.id for s in reaper_schedules_to_pause(schedules, "shop")] == ["a", "d"]
    now = [ReaperSchedule("a", "shop", "prod", "PAUSED"), ReaperSchedule("b", "shop", "prod", "PAUSED")]
    assert [s.id for s in reaper_schedules_to_resume(["a", "gone"], now)] == ["a"]


class FakeReaper:
    """Reaper's REST API as ringward uses it: POST /login (JWT), GET /repair_schedule, PUT state."""

    def __init__(self) -> None:
        self.schedules = [
            {"id": "s1", "keyspace_name": "shop", "cluster_name": "ringward", "state": "ACTIVE"},
            {"id": "s2", "keyspace_name": "shop", "cluster_name": "ringward", "state": "PAUSED"},
            {"id": "s3", "keyspace_name": "other", "cluster_name": "ringward", "state": "ACTIVE"},
        ]
        self.requests: list[tuple[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                if self.headers.get("Authorization") != "Bearer jwt-123":
                    self._send(401, {"error": "login first"})
                    return False
                return True

            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                fake.requests.append(("POST", self.path))
                if form == {"username": ["admin"], "password": ["secret"]}:
                    self._send(200, {"token": "jwt-123"})
                else:
                    self._send(403, {"error": "bad login"})

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path))
                url = urlparse(self.path)
                query = parse_qs(url.query)
                if self._authorized() and url.path == "/repair_schedule":
                    keyspaces, clusters = query.get("keyspace"), query.get("clusterName")
                    rows = [s for s in fake.schedules if (not keyspaces or s["keyspace_name"] in keyspaces)
                            and (not clusters or s["cluster_name"] in clusters)]  # fmt: skip
                    self._send(200, rows)

            def do_PUT(self) -> None:
                fake.requests.append(("PUT", self.path))
                url = urlparse(self.path)
                if not self._authorized():
                    return
                schedule_id = url.path.rsplit("/", 1)[1]
                for schedule in fake.schedules:
                    if schedule["id"] == schedule_id:
                        schedule["state"] = parse_qs(url.query)["state"][0]
                        self._send(200, schedule)
                        return
                self._send(404, {"error": "no such schedule"})

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@pytest.fixture
def reaper() -> Iterator[FakeReaper]:
    fake = FakeReaper()
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
        fake.thread.join()


def test_reaper_pause_and_resume_over_http(reaper: FakeReaper) -> None:
    client = ReaperClient(reaper.url, "admin", "secret")
    active = reaper_schedules_to_pause(client.schedules("shop", "ringward"), "shop", "ringward")
    assert [s.id for s in active] == ["s1"]
    for schedule in active:
        client.set_state(schedule.id, "PAUSED")
    assert {s["id"]: s["state"] for s in reaper.schedules} == {"s1": "PAUSED", "s2": "PAUSED", "s3": "ACTIVE"}
    for schedule in reaper_schedules_to_resume(["s1"], client.schedules("shop", "ringward")):
        client.set_state(schedule.id, "ACTIVE")
    assert {s["id"]: s["state"] for s in reaper.schedules} == {"s1": "ACTIVE", "s2": "PAUSED", "s3": "ACTIVE"}
    assert reaper.requests[0] == ("POST", "/login")
    assert ("PUT", "/repair_schedule/s1?state=PAUSED") in reaper.requests


def test_reaper_errors_name_the_problem(reaper: FakeReaper) -> None:
    with pytest.raises(ClusterError) as refusal:
        ReaperClient(reaper.url, "admin", "wrong").schedules("shop")
    assert "HTTP 403" in refusal.value.problem and "reaper_default" in refusal.value.fix
    with pytest.raises(ClusterError) as refusal:
        ReaperClient(reaper.url).set_state("s1", "PAUSED")  # no login: 401
    assert "HTTP 401" in refusal.value.problem
    with pytest.raises(ClusterError) as refusal:
        ReaperClient("http://127.0.0.1:9", timeout=2).schedules("shop")
    assert "did not answer" in refusal.value.problem


def test_reaper_connection_is_optional_and_read_from_airflow(monkeypatch: pytest.MonkeyPatch) -> None:
    from ringward_airflow.repair_controller_operators import reaper_client

    monkeypatch.delenv("AIRFLOW_CONN_REAPER_DEFAULT", raising=False)
    assert reaper_client() is None
    connection = {"conn_type": "http", "host": "reaper.internal", "port": 8080, "login": "admin",
                  "password": "pw", "extra": {"cluster_name": "prod"}}  # fmt: skip
    monkeypatch.setenv("AIRFLOW_CONN_REAPER_DEFAULT", json.dumps(connection))
    found = reaper_client()
    assert found is not None
    client, cluster = found
    assert (client.base_url, client.username, client.password, cluster) == (
        "http://reaper.internal:8080", "admin", "pw", "prod",
    )  # fmt: skip


def test_restore_without_a_plan_is_skipped_not_silently_passed() -> None:
    from airflow.sdk.exceptions import AirflowSkipException
    from ringward_airflow.repair_controller_operators import RestoreRepairControllersOperator

    class NoPlan:
        def xcom_pull(self, task_ids: str) -> None:
            return None

    operator = RestoreRepairControllersOperator(task_id="restore_repair_controllers")
    assert operator.trigger_rule == "all_done"
    with pytest.raises(AirflowSkipException, match="nothing was paused"):
        operator.execute({"ti": NoPlan()})  # type: ignore[arg-type]


def test_the_controller_operators_load_the_migration_and_the_hook_the_migration_operator_s_way() -> None:
    """Pause and restore are MigrationOperators: the precheck's typed record (`load_migration`), its cached
    hook, released at the end; without a record the pause refuses with the migration's refusal."""
    from types import SimpleNamespace

    from airflow.sdk.exceptions import AirflowSkipException
    from ringward.errors import MigrationError
    from ringward.migration import MigrationStep
    from ringward.migration_record import MigrationRecord
    from ringward.replication import Replication
    from ringward.ring_sources import load_ring_file
    from ringward_airflow.migration_base import MigrationOperator
    from ringward_airflow.repair_controller_operators import (
        PauseRepairControllersOperator,
        RestoreRepairControllersOperator,
    )

    class NoPlan:
        def xcom_pull(self, task_ids: str) -> None:
            return None

    pause = PauseRepairControllersOperator(task_id="pause_repair_controllers")
    assert isinstance(pause, MigrationOperator)
    with pytest.raises(MigrationError, match="The precheck left no plan"):
        pause.execute({"ti": NoPlan()})  # type: ignore[arg-type]

    ring = load_ring_file(Path(__file__).resolve().parents[2] / "fixtures" / "rings" / "local_num_tokens_4.json")
    old, new = Replication.simple(1), Replication.simple(2)
    record = MigrationRecord("ks@r1", "ks", ring, old, new, new, (MigrationStep(1, 1, old, new),), "ks@r1", "r1")
    asked: list[tuple[str, str]] = []
    closed: list[str] = []
    store = SimpleNamespace(controller_pause=lambda migration_id, controller: asked.append((migration_id, controller)))
    hook = SimpleNamespace(ops_store=lambda: store, close=lambda: closed.append("hook"))
    nodetool = SimpleNamespace(close=lambda: closed.append("nodetool"))
    restore = RestoreRepairControllersOperator(task_id="restore_repair_controllers")
    restore._hook, restore._nodetool = hook, nodetool  # type: ignore[assignment]  # what the cached hook holds

    class Planned:
        def xcom_pull(self, task_ids: str) -> dict[str, Any]:
            assert task_ids == "precheck"
            return record.to_json()

    with pytest.raises(AirflowSkipException, match="ks@r1 paused no repair controller"):
        restore.execute({"ti": Planned()})  # type: ignore[arg-type]
    assert asked == [("ks@r1", "autorepair")]
    assert closed == ["hook", "nodetool"]  # released in the end, as every migration task does


@pytest.mark.parametrize(
    "answer",
    [
        "nodetool: Found unexpected parameters: [getautorepairconfig]\nSee 'nodetool help'.",
        "error: type=AutoRepairService\n-- StackTrace --\njavax.management.InstanceNotFoundException",
    ],
)
def test_a_node_that_cannot_run_autorepair_reads_as_unavailable(answer: str) -> None:
    class Older(NodetoolClient):
        def run(self, address: str, args: Sequence[str], timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
            return subprocess.CompletedProcess(args, 1, answer, "")

    (settings,) = read_autorepair(Older(), ["10.0.0.1"])
    assert not settings.available and autorepair_pause_changes([settings]) == []


NOT_STARTED = (
    'Exception in thread "main" java.lang.IllegalArgumentException: Server is not initialized yet, cannot run '
    "nodetool.\n\tat org.apache.cassandra.tools.NodeTool.err(NodeTool.java:328)"
)  # what 5.0.9 started without -Dcassandra.autorepair.enable answers (seen on the seed cluster)


@pytest.mark.parametrize("node_serves", [True, False])
def test_server_not_initialized_means_no_autorepair_only_on_a_node_that_serves(node_serves: bool) -> None:
    class Seed(NodetoolClient):
        def run(self, address: str, args: Sequence[str], timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
            if args[0] == "statusbinary":  # a node still starting fails this too
                return subprocess.CompletedProcess(args, 0 if node_serves else 1, "running\n", "")
            return subprocess.CompletedProcess(args, 1, NOT_STARTED, "")

    if node_serves:
        (settings,) = read_autorepair(Seed(), ["127.0.0.2"])
        assert not settings.available
    else:
        with pytest.raises(ClusterError, match=r"127\.0\.0\.2"):
            read_autorepair(Seed(), ["127.0.0.2"])
