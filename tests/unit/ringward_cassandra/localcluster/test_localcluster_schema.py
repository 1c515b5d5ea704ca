"""Schema agreement of the local cluster: versions read from nodetool, a node stuck on its own one reset."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.localcluster.errors import LocalClusterError

DESCRIBECLUSTER = """Cluster Information:
\tName: ringward
\tSchema versions:
\t\tcd350788-2af8-3d1a-b15d-4b66fd1e4a35: [127.0.0.2, 127.0.0.3, 127.0.0.4, 127.0.0.5]

\t\t47b599f2-28f4-3fca-8237-8cece60da6a5: [127.0.0.6]

Stats for all nodes:
\tLive: 5
"""
AGREED = "\tSchema versions:\n\t\tcd350788-2af8-3d1a-b15d-4b66fd1e4a35: [127.0.0.2:7000, 127.0.0.6:7000]\n\nStats for"


class ScriptedCluster(LocalCluster):
    """Answers describecluster from a script and records every other nodetool command."""

    def __init__(self, home: Path, answers: list[str]) -> None:
        super().__init__(home=home, log=lambda _: None)
        self.answers = answers
        self.commands: list[tuple[str, tuple[str, ...]]] = []

    def nodetool(self, address: str, args: Sequence[str], capture: bool = True) -> subprocess.CompletedProcess[str]:
        if list(args) == ["describecluster"]:
            answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
            return subprocess.CompletedProcess(args, 0, answer, "")
        self.commands.append((address, tuple(args)))
        return subprocess.CompletedProcess(args, 0, "", "")


def test_schema_versions_group_nodes_by_version(tmp_path: Path) -> None:
    versions = ScriptedCluster(tmp_path, [DESCRIBECLUSTER]).schema_versions("127.0.0.2")
    assert versions == {
        "cd350788-2af8-3d1a-b15d-4b66fd1e4a35": ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"],
        "47b599f2-28f4-3fca-8237-8cece60da6a5": ["127.0.0.6"],
    }


def test_a_node_stuck_on_its_own_version_is_reset(tmp_path: Path) -> None:
    cluster = ScriptedCluster(tmp_path, [DESCRIBECLUSTER, DESCRIBECLUSTER, AGREED])
    cluster.wait_schema_agreement(topology=None, deadline=time.monotonic() + 30, ask="127.0.0.2", reset_after=0)  # type: ignore[arg-type]
    assert cluster.commands == [("127.0.0.6", ("resetlocalschema",))]


def test_without_reset_after_nothing_is_reset_and_the_wait_fails_naming_the_versions(tmp_path: Path) -> None:
    cluster = ScriptedCluster(tmp_path, [DESCRIBECLUSTER])
    with pytest.raises(LocalClusterError, match=r"127\.0\.0\.6"):
        cluster.wait_schema_agreement(topology=None, deadline=time.monotonic() + 3, ask="127.0.0.2")  # type: ignore[arg-type]
    assert cluster.commands == []
