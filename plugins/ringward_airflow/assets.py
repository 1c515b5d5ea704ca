"""Airflow Assets per cluster and keyspace (`cassandra://<cluster>/<keyspace>`, `ringward.assets`) and their
events: a task declares an AssetAlias as its outlet (the keyspace is known only when it runs) and adds one event
per keyspace to it; a downstream DAG is scheduled on the keyspace's Asset itself, e.g.
`schedule=[keyspace_asset("eu_west", "shop")]` (`cassandra://eu_west/shop`, a declared cluster) or
`schedule=[Asset("cassandra://cassandra_default/shop")]` (the single cluster: its CQL connection id).

- MIGRATED: the migration's report task, when the migration finished (extra: migration_id, from, to).
- REPAIRED: the nightly report task, for each keyspace whose every table is repaired within gc_grace (extra:
  run_id, state).

A declared cluster's aliases carry its name (`ringward_keyspace_migrated__eu_west`), so a DAG scheduled on one
alias sees one cluster's keyspaces; the single cluster's keep the names above.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import Asset, AssetAlias
from ringward.assets import keyspace_asset_uri, migrations_asset_uri
from ringward.clusters import cluster_suffix

__all__ = [
    "LEGACY_MIGRATION_ASSET",
    "MIGRATED",
    "REPAIRED",
    "add_keyspace_events",
    "keyspace_asset",
    "migrated_alias",
    "migrations_asset",
    "repaired_alias",
]

MIGRATED = "ringward_keyspace_migrated"
REPAIRED = "ringward_keyspace_repaired"
# The one constant Asset the migration DAGs emitted before; still emitted, for DAGs scheduled on it.
LEGACY_MIGRATION_ASSET = migrations_asset_uri(None)


def keyspace_asset(cluster: str, keyspace: str) -> Asset:
    """`cassandra://<cluster>/<keyspace>`: `cluster` is the declared cluster's name (the single cluster: its CQL
    connection id, ringward.assets.asset_cluster)."""
    return Asset(keyspace_asset_uri(cluster, keyspace))


def migrations_asset(cluster: str | None) -> Asset:
    """What every finished migration of the cluster emits (`cassandra://ringward/keyspace_migration[__<cluster>]`)."""
    return Asset(migrations_asset_uri(cluster))


def migrated_alias(cluster: str | None) -> str:
    """The migration report's AssetAlias: `ringward_keyspace_migrated[__<cluster>]`."""
    return MIGRATED + cluster_suffix(cluster)


def repaired_alias(cluster: str | None) -> str:
    """The nightly report's AssetAlias: `ringward_keyspace_repaired[__<cluster>]`."""
    return REPAIRED + cluster_suffix(cluster)


def add_keyspace_events(
    context: Mapping[str, Any], alias: str, cluster: str, keyspaces: Iterable[str], extra: Mapping[str, Any]
) -> list[Asset]:
    """Add an event of each keyspace's Asset to the task's AssetAlias outlet `alias`; none when the task does
    not declare that outlet (an operator used outside the shipped DAGs). Returns the Assets."""
    task = context.get("task")
    declared = any(isinstance(o, AssetAlias) and o.name == alias for o in getattr(task, "outlets", None) or ())
    if not declared:
        return []
    events = context["outlet_events"][AssetAlias(alias)]
    assets = [keyspace_asset(cluster, keyspace) for keyspace in keyspaces]
    for asset in assets:
        events.add(asset, extra=dict(extra))
    return assets
