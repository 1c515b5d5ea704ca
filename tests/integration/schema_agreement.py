"""Waiting for a test's own DDL to reach every node of the local cluster."""

from __future__ import annotations

import time
from typing import Any

from ringward_cassandra.localcluster import LocalCluster


def settle_schema(session: Any, patience: float = 30.0) -> None:
    """Return once every node has the DDL just run through `session`.

    A node of a fresh cluster on two loaded cores has stayed on its own schema version for minutes, pulls
    notwithstanding (CI, 2026-11-23): after `patience` seconds the nodes still on a minority version get
    `nodetool resetlocalschema`, which the cluster log records.
    """
    if session.cluster.control_connection.wait_for_schema_agreement(wait_time=patience):
        return
    cluster = LocalCluster(log=lambda line: print(f"[cluster] {line}"))
    cluster.wait_schema_agreement(cluster.topology(), time.monotonic() + 120, reset_after=0)
    assert session.cluster.control_connection.wait_for_schema_agreement(wait_time=patience)
