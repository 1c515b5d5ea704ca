"""The real local Cassandra cluster for integration tests: started once per topology, always stopped.

Tests ask for `seed_cluster` or `two_dc_cluster`; tests are ordered so each topology starts once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from ringward_cassandra.localcluster import LocalCluster, Topology

_TOPOLOGY_ORDER = {"seed_cluster": 0, "two_dc_cluster": 1}


class ClusterManager:
    def __init__(self) -> None:
        self.cluster = LocalCluster(log=lambda line: print(f"[cluster] {line}"))
        self.current: str | None = None

    def ensure(self, topology: str) -> Topology:
        # A developer may run the cluster-agnostic tests on other loopback addresses, beside another cluster.
        topology = os.environ.get(f"RINGWARD_TEST_TOPOLOGY_{topology.upper().replace('-', '_')}", topology)
        if self.current != topology:
            self.cluster.down(purge=True)
            self.current = topology
        return self.cluster.up(topology)


@pytest.fixture(scope="session")
def cluster_manager() -> Iterator[ClusterManager]:
    manager = ClusterManager()
    manager.cluster.down(purge=True)
    try:
        yield manager
    finally:
        manager.cluster.down(purge=True)


@pytest.fixture
def seed_cluster(cluster_manager: ClusterManager) -> LocalCluster:
    cluster_manager.ensure("seed")
    return cluster_manager.cluster


@pytest.fixture
def two_dc_cluster(cluster_manager: ClusterManager) -> LocalCluster:
    cluster_manager.ensure("two-dc")
    return cluster_manager.cluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run all tests of one topology together, so each cluster starts once."""

    def rank(item: pytest.Item) -> int:
        fixtures = getattr(item, "fixturenames", ())
        return min((_TOPOLOGY_ORDER[name] for name in fixtures if name in _TOPOLOGY_ORDER), default=-1)

    items.sort(key=rank)
