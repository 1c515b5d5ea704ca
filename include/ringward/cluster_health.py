"""Cluster-wide conditions a replication change refuses to start under (pure: the caller reads the cluster)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ringward.errors import ClusterError

__all__ = ["refuse_mixed_versions"]


def refuse_mixed_versions(versions: Mapping[str, Sequence[str]]) -> None:
    """Raise when the nodes run different Cassandra releases (`versions`: release -> node addresses).

    Schema changes during a rolling upgrade are unsafe: nodes on different majors cannot always exchange
    schema, and the ALTER's new placement must be computed the same way by every node.
    """
    if len(versions) <= 1:
        return
    ordered = sorted(versions.items(), key=lambda item: (len(item[1]), item[0]))  # the odd nodes out first
    described = "; ".join(f"{release} on {', '.join(sorted(nodes))}" for release, nodes in ordered)
    raise ClusterError(
        f"The nodes run different Cassandra releases ({described}): a replication change during an upgrade is unsafe.",
        "Finish the upgrade (every node on one release, `nodetool version`; upgradesstables done), then retry.",
    )
