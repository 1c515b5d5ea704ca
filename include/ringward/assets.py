"""Asset URIs of ringward's data: `cassandra://<cluster>/<keyspace>`, one per cluster and keyspace, so a
downstream DAG can be scheduled on "keyspace X migrated (or its nightly repair covered) on cluster Y".

Pure: strings in, strings out; `ringward_airflow.assets` builds the Airflow Assets and emits their events.
`cluster` is the cluster's name as the DAGs know it (`asset_cluster`): a declared cluster's name (`eu_west`,
ringward.clusters); the single-cluster deployment (no clusters file) declares none, and its Assets keep the
authority they had before clusters were declared, its Cassandra connection id (`cassandra_default`).

Airflow 3 keeps a `cassandra` URI as written (no provider registers a normaliser for the scheme; Airflow only drops
trailing slashes, fragments and user info): the names here need no escaping and are never changed, so the URI a
downstream DAG writes by hand is the one the report tasks emit. Besides those, the migration DAGs emit one Asset of
their own per cluster (`migrations_asset_uri`): `cassandra://ringward/keyspace_migration[__<cluster>]`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from ringward.clusters import MIGRATION_DAG_ID, cluster_suffix, metrics_cluster
from ringward.errors import ConfigurationError
from ringward.repair import RepairStatus

__all__ = ["SCHEME", "asset_cluster", "covered_keyspaces", "keyspace_asset_uri", "migrations_asset_uri"]

SCHEME: Final = "cassandra"
# A URI authority: letters, digits and `- . _` (a Cassandra connection id or cluster name, not a host:port).
_CLUSTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_KEYSPACE = re.compile(r"^[A-Za-z0-9_]+$")  # Cassandra's own rule for keyspace names


def keyspace_asset_uri(cluster: str, keyspace: str) -> str:
    """`cassandra://<cluster>/<keyspace>`; a name that cannot be a URI part is refused, naming the fix."""
    if not _CLUSTER.match(cluster):
        raise ConfigurationError(f"Cluster name {cluster!r} cannot be an asset URI's authority.",
                                 "Name the cluster with letters, digits, '-', '.' or '_' only.")  # fmt: skip
    if not _KEYSPACE.match(keyspace):
        raise ConfigurationError(f"Keyspace {keyspace!r} is not a Cassandra keyspace name.",
                                 "Pass the keyspace's name as Cassandra stores it (letters, digits, '_').")  # fmt: skip
    return f"{SCHEME}://{cluster}/{keyspace}"


def asset_cluster(cluster: str | None, cassandra_conn_id: str) -> str:
    """The authority of a cluster's keyspace Assets: its declared name; without one (the single-cluster
    deployment, `cluster=None`) its CQL connection id, the URI's authority before clusters were declared. The
    same name the metrics' `cluster` tag carries (ringward.clusters.metrics_cluster)."""
    return metrics_cluster(cluster, cassandra_conn_id)


def migrations_asset_uri(cluster: str | None) -> str:
    """`cassandra://ringward/keyspace_migration` (the single cluster), `...__<cluster>` (a declared one): the
    Asset every finished migration of the cluster emits, whatever its keyspace (`ringward` is a reserved
    cluster name, so no keyspace Asset has this authority)."""
    return f"{SCHEME}://ringward/{MIGRATION_DAG_ID}{cluster_suffix(cluster)}"


def covered_keyspaces(statuses: Iterable[RepairStatus]) -> list[str]:
    """Keyspaces whose every table that needs repair has all its ranges repaired within gc_grace_seconds (a
    keyspace where nothing needs repair, RF 1 everywhere, is left out: there is no coverage to announce)."""
    covered: dict[str, bool] = {}
    for status in statuses:
        if status.repaired_share is None:
            continue
        complete = status.repaired_share >= 1.0 and status.health != "OVERDUE"
        covered[status.keyspace] = covered.get(status.keyspace, True) and complete
    return sorted(keyspace for keyspace, complete in covered.items() if complete)
