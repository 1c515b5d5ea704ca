"""Node processes the local cluster spawned are reaped however they stop."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

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
