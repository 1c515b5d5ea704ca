"""ringward's pure core: the decisions of a replication change and of nightly repair.

No Airflow, PySpark or Cassandra driver imports here (tests/unit/ringward/test_core_package.py checks it); the
plugins read the cluster and hand these modules plain data. The public modules are exactly `__all__`;
modules starting with `_` are private to the package. Each public module declares its own `__all__`.
"""

from __future__ import annotations

__all__ = [
    "assets",
    "capacity",
    "cassandra_release",
    "cluster_health",
    "clusters",
    "consistency",
    "diff",
    "errors",
    "governance",
    "markdown",
    "migration",
    "migration_page_codec",
    "migration_pages",
    "migration_progress",
    "migration_record",
    "migration_storage",
    "permissions",
    "placement",
    "plan",
    "private_files",
    "repair",
    "repair_controllers",
    "replication",
    "report",
    "ring",
    "ring_picture",
    "ring_sources",
    "safety",
    "session_watch",
    "staging",
    "stored_replication",
    "svg",
    "text",
    "tokens",
    "verification",
]
