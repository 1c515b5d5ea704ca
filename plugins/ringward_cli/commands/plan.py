"""`ringward plan`: what a replication (or ring) change moves, whether it is safe, and how to stage it."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ringward.cassandra_release import CASSANDRA_5_0, CassandraRelease
from ringward.errors import ClusterError, ConfigurationError, MigrationError
from ringward.migration import migration_steps
from ringward.plan import MigrationPlan, build_plan, build_ring_change_plan
from ringward.replication import DEFAULT_KEYSPACE_RF, Replication
from ringward.ring import Ring
from ringward.ring_sources import load_ring_file

from ringward_cli.login import cql_login

__all__ = ["EXIT_REFUSED", "EXIT_SAFE", "handler", "register"]

EXIT_SAFE = 0
EXIT_REFUSED = 3
_RING_FILE_SUFFIXES = {".txt", ".json", ".ring", ".out"}
_ALL_TABLES = "(all tables)"  # the table name of a --gc-grace given for every table


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "plan",
        help="plan a replication change: affected ranges, safety findings, staged steps",
        description="Compare replica placement before and after a replication change (or a ring change) "
        "and refuse what would lose data. Exit 0 when safe, 3 when refused.",
    )
    parser.add_argument("--ring", required=True, help="ring file (nodetool ring output or JSON) or host[:port]")
    parser.add_argument("--ring-after", help="second ring: plan a topology change under one replication")
    parser.add_argument("--to", dest="to_replication", help="target replication, JSON text or a JSON file")
    parser.add_argument("--from", dest="from_replication", help="current replication, JSON text or file")
    parser.add_argument("--keyspace", help="keyspace name; without --from its replication is read live")
    parser.add_argument("--contact", help="host[:port] to read the schema from (default: --ring if not a file)")
    parser.add_argument("--gc-grace", type=int, help="gc_grace_seconds to assume when not read live")
    parser.add_argument("--consistency", help="the clients' read consistency level, e.g. LOCAL_ONE")
    parser.add_argument(
        "--allow-quorum-gap",
        action="store_true",
        help="stage the change keeping only a replica of every range per step, not the QUORUM overlap and "
        "one-replica-per-datacenter rules (QUORUM reads may miss writes until each step's repair)",
    )
    parser.add_argument(
        "--default-keyspace-rf",
        type=int,
        help="the cluster's default_keyspace_rf, taken by a SimpleStrategy or bare NTS without a factor "
        "(read live with --keyspace; else 1, Cassandra's default)",
    )
    parser.add_argument(
        "--release",
        help="the cluster's Cassandra release, e.g. 3.11.19: the ALTER semantics the plan models "
        "(read live with --keyspace; else 5.0). Below 4.0 the plan also prints the commands to run it by hand",
    )
    parser.add_argument("--format", choices=("table", "json", "summary"), default="summary")
    parser.add_argument("--svg", help="write a picture of the ring before and after to this file")
    parser.set_defaults(handler=handler)


@dataclass
class _Inputs:
    keyspace: str
    current: Replication | None
    gc_grace: dict[str, int] | None
    known_keyspaces: list[str] | None
    default_keyspace_rf: int = DEFAULT_KEYSPACE_RF
    release: CassandraRelease = CASSANDRA_5_0

    @property
    def tables(self) -> list[str]:
        """The keyspace's tables, when read live (`--gc-grace` names none)."""
        return sorted(name for name in self.gc_grace or {} if name != _ALL_TABLES)


def handler(args: argparse.Namespace) -> int:
    ring = _load_ring(args.ring)
    inputs = _schema_inputs(args)
    if args.ring_after:
        replication = _parse_replication(args.to_replication) if args.to_replication else inputs.current
        if replication is None:
            raise ConfigurationError("A ring change needs the replication.", "Pass --to, --from or --keyspace.")
        plan = build_ring_change_plan(
            ring,
            _load_ring(args.ring_after),
            replication,
            keyspace=inputs.keyspace,
            table_gc_grace_seconds=inputs.gc_grace,
            client_consistency=args.consistency,
        )
    else:
        if not args.to_replication or inputs.current is None:
            raise ConfigurationError(
                "A replication change needs the current and the target replication.",
                "Pass --to JSON and either --from JSON or --keyspace KS (read from the cluster).",
            )
        plan = build_plan(
            ring,
            inputs.current,
            _parse_replication(args.to_replication),
            keyspace=inputs.keyspace,
            table_gc_grace_seconds=inputs.gc_grace,
            client_consistency=args.consistency,
            known_keyspaces=inputs.known_keyspaces,
            keep_quorum=not args.allow_quorum_gap,
            default_keyspace_rf=inputs.default_keyspace_rf,
            release=inputs.release,
        )
    _print(plan, args.format, _by_hand(plan, inputs))
    if args.svg:
        from ringward.svg import render_placement_svg

        Path(args.svg).write_text(render_placement_svg(plan), encoding="utf-8")
    return EXIT_SAFE if plan.safe else EXIT_REFUSED


def _print(plan: MigrationPlan, output_format: str, by_hand: list[str] | None) -> None:
    if output_format == "json":
        document = plan.to_json()
        if by_hand is not None:
            document["manual_procedure"] = by_hand
        print(json.dumps(document, indent=2))
        return
    if output_format == "table":
        print(plan.table())
        print()
    print(plan.summary())
    if by_hand is not None:
        print()
        print("\n".join(by_hand))


def _by_hand(plan: MigrationPlan, inputs: _Inputs) -> list[str] | None:
    """On a release ringward only plans for (3.11), a safe plan's way on: the DAG refuses it, so the lines
    say so and give the commands to run it by hand. None on other releases and for refused plans."""
    if not inputs.release.is_read_only or not plan.safe:
        return None
    from ringward_cassandra.manual_procedure import refuse_read_only_release

    try:
        refuse_read_only_release(inputs.release, plan, migration_steps(plan), inputs.tables)
    except MigrationError as refusal:
        return [refusal.problem, *refusal.fix.splitlines()]
    return None


def _schema_inputs(args: argparse.Namespace) -> _Inputs:
    keyspace = args.keyspace or "(unnamed)"
    current = _parse_replication(args.from_replication) if args.from_replication else None
    gc_grace = {_ALL_TABLES: args.gc_grace} if args.gc_grace is not None else None
    given_rf = args.default_keyspace_rf
    if given_rf is not None and given_rf < 1:
        raise ConfigurationError(
            f"--default-keyspace-rf {given_rf} is not a replication factor.", "Give 1 or more (Cassandra's default: 1)."
        )
    given_release = _release(args.release) if args.release else None
    if current is not None or not args.keyspace:
        return _Inputs(
            keyspace, current, gc_grace, None, given_rf or DEFAULT_KEYSPACE_RF, given_release or CASSANDRA_5_0
        )
    from ringward_cassandra import schema

    session = schema.connect(_contact_point(args), **cql_login())
    try:
        return _Inputs(
            keyspace,
            schema.keyspace_replication(session, keyspace),
            gc_grace if gc_grace is not None else schema.table_gc_grace(session, keyspace),
            schema.keyspace_names(session),
            given_rf or schema.default_keyspace_rf(session),
            # A mixed cluster (mid-upgrade) is planned with its oldest release; the DAG refuses to change it.
            given_release or min(map(CassandraRelease.parse, schema.release_versions(session))),
        )
    finally:
        session.cluster.shutdown()


def _release(text: str) -> CassandraRelease:
    try:
        return CassandraRelease.parse(text)
    except ClusterError:
        raise ConfigurationError(
            f"--release {text!r} is not a Cassandra version.", "Give it as the nodes report it, e.g. 3.11.19."
        ) from None


def _contact_point(args: argparse.Namespace) -> str:
    if args.contact:
        return str(args.contact)
    if not Path(args.ring).exists():
        return str(args.ring)
    raise ConfigurationError(
        "--keyspace without --from reads the current replication from the cluster, but no contact point was given.",
        "Pass --contact host[:port], or --from JSON to plan offline.",
    )


def _load_ring(source: str) -> Ring:
    """A ring file, or the live ring read through the node at `host[:port]`."""
    path = Path(source)
    if path.exists():
        return load_ring_file(path)
    if path.suffix in _RING_FILE_SUFFIXES or "/" in source:
        raise ConfigurationError(f"Ring file {source} does not exist.", "Check the path.")
    try:
        from ringward_cassandra.ring_reader import ring_from_contact_point
    except ImportError:
        raise ConfigurationError(
            f"{source!r} is not a ring file, and reading a live ring is not available in this build.",
            "Save `nodetool ring` output (or ringward's ring JSON) to a file and pass its path.",
        ) from None
    host, _, port = source.partition(":")
    ring: Ring = ring_from_contact_point(host, int(port) if port else 9042, **cql_login())
    return ring


def _parse_replication(value: str) -> Replication:
    """JSON text, or the path of a file holding it."""
    text = value
    if not value.lstrip().startswith("{") and Path(value).exists():
        text = Path(value).read_text(encoding="utf-8")
    return Replication.parse(text)
