"""`ringward repair status`: how much of each table's ring was fully repaired within gc_grace_seconds."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ringward_cli.login import cql_login

__all__ = ["register"]

CONFIG_PATH_ENV = "RINGWARD_REPAIR_CONFIG"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("repair", help="nightly subrange repair: coverage per table")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = actions.add_parser(
        "status",
        help="one line per keyspace.table: share repaired within gc_grace, oldest range, deadline, failing",
        description="Segments are planned as the last recorded run planned them (its splitter), over every "
        "keyspace the configuration selects; history comes from ringward_ops.repair_history.",
    )
    status.add_argument("--contact", help="host[:port] of a node (default: the local cluster's first node)")
    status.add_argument("--config", help=f"repair configuration YAML (default: ${CONFIG_PATH_ENV} or shipped)")
    status.add_argument("--svg", help="write the ring coloured by repair age to this file")
    status.add_argument("--table", help="keyspace.table to draw with --svg (default: the least covered)")
    status.set_defaults(handler=_status)


def _default_contact() -> str:
    from ringward.errors import ConfigurationError
    from ringward_cassandra.localcluster import LocalCluster

    try:
        return LocalCluster().topology().addresses[0]
    except ConfigurationError as error:
        raise ConfigurationError(
            "No --contact given and no local cluster is running.", "Pass --contact HOST[:PORT] of a node."
        ) from error


def _status(args: argparse.Namespace) -> int:
    from ringward.repair import coverage_entries, load_config, status_config, status_table
    from ringward_cassandra.cluster_repairs import plan_cluster, status_records, table_statuses
    from ringward_cassandra.cql import connect
    from ringward_cassandra.ops_store import OpsStore
    from ringward_cassandra.ring_reader import ring_from_cluster

    base = load_config(args.config or os.environ.get(CONFIG_PATH_ENV) or None)
    host, _, port = (args.contact or _default_contact()).partition(":")
    now = datetime.now(UTC)
    with connect([host], int(port or 9042), **cql_login()) as session:
        ring = ring_from_cluster(session)
        store = OpsStore(session)
        has_ops = store.exists()
        runs = store.repair_runs() if has_ops else []
        chosen_config = status_config(base, runs[0].config if runs else None, runs[0].run_id if runs else None)
        if chosen_config.note:
            print(f"note: {chosen_config.note}", file=sys.stderr)
        config = chosen_config.config
        plan = plan_cluster(session, ring, config)
        records = status_records(plan, store.repair_history()) if has_ops else {}
    statuses = table_statuses(plan, records, now, config.gc_grace_alarm)
    print(status_table(statuses))
    if runs:
        print(f"last run: {runs[0].run_id} {runs[0].state}")
    if args.svg and statuses:
        from ringward.svg import render_repair_svg

        chosen = _chosen(statuses, args.table)
        mine = [s for s in plan.segments if (s.keyspace, chosen.table) == (chosen.keyspace, _table_of(s, chosen.table))]
        entries = coverage_entries(mine, records, chosen.gc_grace_seconds, now)
        title = f"{chosen.keyspace}.{chosen.table}: {chosen.repaired_percent} repaired within gc_grace"
        Path(args.svg).write_text(render_repair_svg(entries, title=title), encoding="utf-8")
        print(f"wrote {args.svg}")
    return 0


def _table_of(segment: Any, table: str) -> str | None:
    """`table` when the segment repairs it (a segment without tables repairs them all)."""
    return table if not segment.tables or table in segment.tables else None


def _chosen(statuses: list[Any], name: str | None) -> Any:
    from ringward.errors import ConfigurationError

    if name is None:
        return min(statuses, key=lambda s: s.repaired_share if s.repaired_share is not None else 2.0)
    for status in statuses:
        if f"{status.keyspace}.{status.table}" == name:
            return status
    raise ConfigurationError(f"No repaired table {name!r}.", "Pass --table as keyspace.table from the status list.")
