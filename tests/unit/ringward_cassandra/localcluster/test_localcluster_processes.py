"""Node processes the local cluster spawned are reaped however they stop."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.localcluster import cluster as cluster_module


def test_a_node_killed_by_another_process_is_reaped_when_the_cluster_is_next_read(tmp_path: Path) -> None:
    child = subprocess.Popen(["sleep", "600"])
    cluster_module._CHILDREN[child.pid] = child
    try:
        os.kill(child.pid, signal.SIGKILL)  # as `ringward cluster down` in another shell would
        deadline = time.monotonic() + 10
        while (Path(f"/proc/{child.pid}") / "stat").read_text().split(")")[-1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the killed process never became a zombie"
            time.sleep(0.05)

        LocalCluster(home=tmp_path, log=lambda _: None).running_pids()

        assert child.returncode == -signal.SIGKILL
        assert child.pid not in cluster_module._CHILDREN
    finally:
        cluster_module._CHILDREN.pop(child.pid, None)
        if child.poll() is None:
            child.kill()
            child.wait()


def test_stopping_a_node_returns_once_the_process_is_reaped() -> None:
    # A process that ignores SIGTERM, like a JVM stuck in shutdown: the stop escalates to SIGKILL.
    child = subprocess.Popen(["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"])
    cluster_module._CHILDREN[child.pid] = child
    try:
        time.sleep(0.2)  # let the shell install its trap
        cluster_module._terminate(child.pid, grace=0.5)

        assert child.returncode == -signal.SIGKILL
        assert not Path(f"/proc/{child.pid}").exists()
        assert child.pid not in cluster_module._CHILDREN
    finally:
        cluster_module._CHILDREN.pop(child.pid, None)
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_node_start_keeps_the_previous_logs(tmp_path: Path) -> None:
    from ringward_cassandra.localcluster.cluster import rotate_log

    log = tmp_path / "system.log"
    for run in range(1, 6):
        rotate_log(log, keep=3)
        log.write_text(f"run {run}\n")
    assert log.read_text() == "run 5\n"
    kept = {p.name: p.read_text() for p in tmp_path.glob("system.log.*")}
    assert kept == {"system.log.1": "run 4\n", "system.log.2": "run 3\n", "system.log.3": "run 2\n"}


def _nodes(script: str, count: int) -> dict[str, subprocess.Popen[bytes]]:
    children = {f"127.0.0.{n}": subprocess.Popen(["sh", "-c", script]) for n in range(2, 2 + count)}
    for child in children.values():
        cluster_module._CHILDREN[child.pid] = child
    time.sleep(0.2)  # let the shells install their traps
    return children


def _cleanup(children: dict[str, subprocess.Popen[bytes]]) -> None:
    for child in children.values():
        cluster_module._CHILDREN.pop(child.pid, None)
        if child.poll() is None:
            child.kill()
            child.wait()


def test_down_stops_every_node_at_once_not_one_after_another(tmp_path: Path) -> None:
    # Nodes that take 1 s to shut down once asked: one after another, three take 3 s.
    children = _nodes("trap 'sleep 1; exit 0' TERM; while :; do sleep 0.1; done", 3)
    cluster = LocalCluster(home=tmp_path, log=lambda _: None)
    cluster.running_pids = lambda: {address: child.pid for address, child in children.items()}  # type: ignore[method-assign]
    try:
        started = time.monotonic()
        cluster.down()
        took = time.monotonic() - started

        assert all(child.returncode == 0 for child in children.values()), "each node shut down on SIGTERM"
        assert took < 2.5, f"down took {took:.1f} s for three 1 s shutdowns"
    finally:
        _cleanup(children)


def test_down_with_purge_kills_at_once_what_it_deletes_next(tmp_path: Path) -> None:
    # Nodes that would take a minute to shut down gracefully: their data is deleted next, nothing to flush.
    children = _nodes("trap 'sleep 60' TERM; while :; do sleep 0.1; done", 2)
    cluster = LocalCluster(home=tmp_path, log=lambda _: None)
    alive = dict(children)
    cluster.running_pids = lambda: {a: c.pid for a, c in alive.items() if c.poll() is None}  # type: ignore[method-assign]
    try:
        started = time.monotonic()
        cluster.down(purge=True)

        assert time.monotonic() - started < 10
        assert all(child.returncode == -signal.SIGKILL for child in children.values())
        assert not cluster.root.exists()
    finally:
        _cleanup(children)


def test_a_resident_nodetool_is_kept_per_cluster_made_and_closed_by_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `resident_nodetool`, commands go to one client (its resident JVM) while the cluster stays as it was
    made; a cluster made again gets a new client (the old one closed), and `down` closes it."""
    made: list[FakeClient] = []

    class FakeClient:
        def __init__(self) -> None:
            self.commands: list[tuple[str, list[str]]] = []
            self.closed = False
            made.append(self)

        def run(self, address: str, args: list[str]) -> subprocess.CompletedProcess[str]:
            self.commands.append((address, args))
            return subprocess.CompletedProcess(["nodetool", *args], 0, "UN  127.0.0.2  ...\n", "")

        def close(self) -> None:
            self.closed = True

    cluster = LocalCluster(home=tmp_path, log=lambda _: None, resident_nodetool=True)
    monkeypatch.setattr(cluster, "nodetool_client", lambda login=None: FakeClient())
    cluster.root.mkdir(parents=True)
    cluster._state_file.write_text('{"topology_file": "seed.json", "cassandra_version": "5.0.9"}')

    assert cluster.nodetool("127.0.0.2", ["status"]).stdout.startswith("UN")
    cluster.nodetool("127.0.0.3", ["describecluster"])
    assert len(made) == 1 and made[0].commands == [("127.0.0.2", ["status"]), ("127.0.0.3", ["describecluster"])]

    cluster._state_file.write_text('{"topology_file": "cassandra41.json", "cassandra_version": "4.1.10"}')
    cluster.nodetool("127.0.0.2", ["status"])
    assert len(made) == 2 and made[0].closed and not made[1].closed

    cluster.down()
    assert made[1].closed
    cluster.nodetool("127.0.0.2", ["status"])  # a later command starts another
    assert len(made) == 3


def test_a_resident_nodetool_is_made_anew_when_the_setups_login_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a secured cluster the setup logs in as Cassandra's superuser until its roles exist, then as its own
    administrator (`_admin_jmx_login`): the resident client made for the first login is closed and another made
    with the second, as a nodetool process would get the new `-u`/`-pwf`; an unchanged login keeps the client."""
    made: list[tuple[tuple[str, str] | None, list[bool]]] = []

    class FakeClient:
        def __init__(self, login: tuple[str, str] | None) -> None:
            self.closed = [False]
            made.append((login, self.closed))

        def run(self, address: str, args: list[str]) -> subprocess.CompletedProcess[str]:
            return subprocess.CompletedProcess(["nodetool", *args], 0, "", "")

        def close(self) -> None:
            self.closed[0] = True

    cluster = LocalCluster(home=tmp_path, log=lambda _: None, resident_nodetool=True)
    monkeypatch.setattr(cluster, "nodetool_client", lambda login=None: FakeClient(login))
    cluster.root.mkdir(parents=True)
    cluster._state_file.write_text('{"topology_file": "secured.json", "cassandra_version": "5.0.9"}')
    login: tuple[str, str] = ("cassandra", "/secrets/superuser.pw")
    monkeypatch.setattr(cluster, "_admin_jmx_login", lambda: login)

    cluster.nodetool("127.0.0.2", ["status"])
    cluster.nodetool("127.0.0.3", ["status"])
    assert [who for who, _ in made] == [("cassandra", "/secrets/superuser.pw")]  # one client for one login

    login = ("ringward_admin", "/secrets/admin.pw")  # the roles now exist
    cluster.nodetool("127.0.0.2", ["flush"])
    assert [who for who, _ in made] == [("cassandra", "/secrets/superuser.pw"), ("ringward_admin", "/secrets/admin.pw")]
    assert made[0][1] == [True] and made[1][1] == [False]  # the first closed, the new one in use


def test_without_a_resident_nodetool_each_command_is_a_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = LocalCluster(home=tmp_path, log=lambda _: None)
    monkeypatch.setattr(cluster, "nodetool_client", lambda: pytest.fail("no resident client without the option"))
    monkeypatch.setattr(cluster, "topology", lambda: pytest.fail("reached the process path"))
    with pytest.raises(pytest.fail.Exception, match="reached the process path"):
        cluster.nodetool("127.0.0.2", ["status"])


def test_a_nodes_logs_are_found_by_its_address(tmp_path: Path) -> None:
    """`stdout_log` (where a SIGQUIT thread dump lands) and `log_tail` (system.log, then stdout.log) read the
    folder of the node at that address."""
    cluster = LocalCluster(home=tmp_path, log=lambda _: None)
    cluster.root.mkdir(parents=True)
    cluster._state_file.write_text('{"topology_file": "seed", "cassandra_version": "5.0.9"}')
    node = cluster.topology().nodes[1]
    logs = cluster.root / node.name / "logs"
    logs.mkdir(parents=True)
    (logs / "system.log").write_text("INFO one\nWARN two\n")
    (logs / "stdout.log").write_text('"main" #1 prio=5\nJNI global refs: 12\n')

    assert cluster.stdout_log(node.address) == logs / "stdout.log"
    assert cluster.log_tail(node.address, lines=1) == "WARN two\nJNI global refs: 12"
