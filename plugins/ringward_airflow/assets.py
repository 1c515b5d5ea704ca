"""Airflow Assets per cluster and keyspace (`cassandra://<cluster>/<keyspace>`, `ringward.assets`) and their
events: a task declares an AssetAlias as its outlet (the keyspace is known only when it runs) and adds one event
per keyspace to it; a downstream DAG is scheduled on the keyspace's Asset itself, e.g.
`schedule=[Asset("cassandra://cassandra_default/shop")]`.

- MIGRATED: the migration's report task, when the migration finished (extra: migration_id, from, to).
- REPAIRED: the nightly report task, for each keyspace whose every table is repaired within gc_grace (extra:
  run_id, repair_type).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow.sdk import Asset, AssetAlias
from ringward.assets import keyspace_asset_uri

__all__ = ["LEGACY_MIGRATION_ASSET", "MIGRATED", "REPAIRED", "add_keyspace_events", "keyspace_asset"]

MIGRATED = "ringward_keyspace_migrated"
REPAIRED = "ringward_keyspace_repaired"
# The one constant Asset the migration DAGs emitted before; still emitted, for DAGs scheduled on it.
LEGACY_MIGRATION_ASSET = "cassandra://ringward/keyspace_migration"


def keyspace_asset(cluster: str, keyspace: str) -> Asset:
    return Asset(keyspace_asset_uri(cluster, keyspace))


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
