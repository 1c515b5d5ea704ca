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
        help="one line per keyspace.table: share repaired within gc_grace as the nightly runs reported it "
        "(--live: computed now, with oldest range, deadline, failing and health)",
        description="By default, each table's coverage as the latest nightly run report that lists it gave it "
        "(ringward_ops.repair_runs: the Repair page's source), with the run and when it reported, the progress of "
        "a run under way, and the tables in scope no report covers yet: a few small reads, nothing planned. "
        "With --live (or --svg), segments are planned as the last recorded run planned them (its splitter), over "
        "every keyspace the configuration selects, and the whole ringward_ops repair history is read: exact "
        "now, minutes of CPU on a large fleet. Without any stored run report the live computation is used.",
    )
    status.add_argument("--contact", help="host[:port] of a node (default: the local cluster's first node)")
    status.add_argument("--config", help=f"repair configuration YAML (default: ${CONFIG_PATH_ENV} or shipped)")
    status.add_argument(
        "--live",
        action="store_true",
        help="compute the coverage now: plan every selected keyspace on the live ring and read the whole repair "
        "history (exact; minutes of CPU on a 1000-node fleet)",
    )
    status.add_argument(
        "--svg",
        help="write the ring coloured by repair age to this file (needs each range's record: implies --live)",
    )
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
    from ringward.repair import load_config, status_config
    from ringward_cassandra.cql import connect
    from ringward_cassandra.ops_store import OpsStore

    base = load_config(args.config or os.environ.get(CONFIG_PATH_ENV) or None)
    host, _, port = (args.contact or _default_contact()).partition(":")
    now = datetime.now(UTC)
    with connect([host], int(port or 9042), **cql_login()) as session:
        store = OpsStore(session)
        has_ops = store.exists()
        runs = store.repair_runs() if has_ops else []
        chosen_config = status_config(base, runs[0].config if runs else None, runs[0].run_id if runs else None)
        if chosen_config.note:
            print(f"note: {chosen_config.note}", file=sys.stderr)
        live = bool(args.live or args.svg)
        if not live and not runs:
            why = "ringward_ops holds no nightly run report" if has_ops else "ringward_ops does not exist here"
            print(f"note: {why}: computing the coverage live (plans every selected keyspace, reads the whole "
                  "repair history; slow on a large cluster)", file=sys.stderr)  # fmt: skip
            live = True
        if not live:
            return _reported_status(session, store, chosen_config.config, runs)
        return _live_status(args, session, store if has_ops else None, chosen_config.config, runs, now)


def _reported_status(session: Any, store: Any, config: Any, runs: list[Any]) -> int:
    """Each table's coverage from the stored run reports, the run under way: what the Repair page shows, from
    the same reads (the driver's schema metadata, repair_runs, repair_progress); no ring read, no planning."""
    from ringward.repair import progress_figures, repair_scope, reported_coverage, reported_table, run_under_way
    from ringward_cassandra.schema import driver_schema

    covered, _ = repair_scope(driver_schema(session), config, [(run.run_id, run.config) for run in runs])
    tables = [f"{keyspace}.{table}" for keyspace, table in covered]
    reported = reported_coverage(runs)
    print(reported_table(tables, reported))
    latest = runs[0]
    print(f"last run: {latest.run_id} {latest.state} (reported {_when(latest.updated_at)})")
    for keyspace, why in sorted(dict(latest.summary.get("skipped_keyspaces") or {}).items()):
        print(f"skipped by the last run: {keyspace}: {why}")
    current = run_under_way(store.progress_runs(), runs)
    progress = store.run_progress(current) if current is not None else None
    if current is not None and progress:
        figures = progress_figures(progress, running=not progress.get("final"))
        print(
            f"run under way: {current}: {figures['finished']}/{figures['total']} segments ({figures['percent']}%), "
            f"{figures['done']} done, {figures['failed']} failed, {figures['postponed']} postponed, "
            f"{figures['running']} running, ETA {figures['eta']} (progress stored {_when(figures['updated_at'])})"
        )
    missing = [table for table in tables if table not in reported]
    if missing:
        print(
            f"not reported yet ({len(missing)} table(s) in scope): {', '.join(missing)}: no stored run report covers "
            "them; run the nightly DAG (nightly_subrange_repair) or pass --live for their coverage now"
        )
    print("REPAIRED: share of the ring repaired within gc_grace when the run reported; --live computes it now, "
          "with the oldest range, deadline and health")  # fmt: skip
    return 0


def _when(moment: datetime | str | None) -> str:
    """A stored time in UTC, to the minute (an ISO string as the progress stores it, or a datetime)."""
    if isinstance(moment, str):
        try:
            parsed = datetime.fromisoformat(moment)
        except ValueError:
            return moment
        moment = parsed
    if moment is None:
        return "-"
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _live_status(
    args: argparse.Namespace, session: Any, store: Any, config: Any, runs: list[Any], now: datetime
) -> int:
    """Today's exact status: the segments planned on the live ring, their records from the whole history."""
    from ringward.repair import coverage_entries, status_table
    from ringward_cassandra.cluster_repairs import plan_cluster, status_records, table_statuses
    from ringward_cassandra.ring_reader import ring_from_cluster

    ring = ring_from_cluster(session)
    plan = plan_cluster(session, ring, config)
    records = status_records(plan, store.repair_history()) if store is not None else {}
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
