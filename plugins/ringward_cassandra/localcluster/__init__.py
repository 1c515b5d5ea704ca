"""The embedded local Cassandra cluster used by `make demo`, the tests and `ringward cluster`."""

from ringward_cassandra.localcluster.cluster import LocalCluster, NodeStatus
from ringward_cassandra.localcluster.errors import LocalClusterError
from ringward_cassandra.localcluster.topology import LocalNode, Topology, load_topology

__all__ = ["LocalCluster", "LocalClusterError", "LocalNode", "NodeStatus", "Topology", "load_topology"]
