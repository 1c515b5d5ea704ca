"""spark-submit entry point of ringward's Spark jobs: arguments, a SparkSession, then the job's logic.

    count         whole-table count through the Spark Cassandra Connector's DataFrame API (the connector pushes
                  it down as CQL count(*) per token range, as cassandraCount() does); --table may repeat
    range-counts  rows per token range (python driver in Spark tasks; cutoff by writetime; optional pinning)
    stage         a verification stage: phases of range-counts scans (any tables, pinnings, cutoffs) in one
                  application, each phase one Spark job over the subranges of all its scans, phases in order

The result is written as JSON to --output (the driver's stdout is Spark's, not ours).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ringward.ring import TokenRange

from ringward_spark.range_counts import (
    CONSISTENCY_LEVELS,
    RangeTally,
    ScanSettings,
    Subrange,
    count_pieces,
    count_subranges,
    plan_subranges,
    shutdown_sessions,
    tally_ranges,
)
from ringward_spark.submit import PASSWORD_VARIABLE

__all__ = ["connector_conf", "main", "parse_args", "parse_range", "plan_phase_pieces"]

# Subranges of a stage's phase are cut to at most 1/PIECES_PER_RING of the ring (a full-ring scan becomes that
# many reads, shared out over the tasks); PIECES_PER_TASK pieces per task keep a slow range from idling a core.
PIECES_PER_RING = 64
TASKS_PER_CORE = 4


def parse_range(text: str) -> TokenRange:
    """`START:END` with integer tokens; pass it as `--range=START:END` since tokens may be negative."""
    start, _, end = text.partition(":")
    try:
        return TokenRange(int(start), int(end))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"range {text!r} is not START:END with integer tokens") from error


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ringward_job.py", description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    for name in ("count", "range-counts"):
        mode = modes.add_parser(name)
        mode.add_argument("--hosts", required=True, help="contact points, comma-separated")
        mode.add_argument("--port", type=int, default=9042)
        mode.add_argument("--keyspace", required=True)
        if name == "count":  # several tables: counted one after the other in the one application
            mode.add_argument("--table", dest="tables", action="append", required=True)
        else:
            mode.add_argument("--table", required=True)
        mode.add_argument("--consistency", choices=CONSISTENCY_LEVELS, default="ALL")
        mode.add_argument("--output", required=True, help="where the JSON result is written")
        mode.add_argument("--local-dc", help="the datacenter to read from (the connection's local_dc)")
        mode.add_argument("--username", help=f"Cassandra role; its password is read from ${PASSWORD_VARIABLE}")
        mode.add_argument("--ssl-options", type=json.loads, help="the connection's ssl_options, as JSON")
    stage = modes.add_parser("stage")
    stage.add_argument("--hosts", required=True, help="contact points, comma-separated")
    stage.add_argument("--port", type=int, default=9042)
    stage.add_argument("--keyspace", required=True)
    stage.add_argument("--plan", required=True, help="JSON file: {phases: [{name, scans: [{table, ranges, ...}]}]}")
    stage.add_argument("--output", required=True, help="where the JSON result is written")
    stage.add_argument("--local-dc", help="the datacenter to read from (the connection's local_dc)")
    stage.add_argument("--username", help=f"Cassandra role; its password is read from ${PASSWORD_VARIABLE}")
    stage.add_argument("--ssl-options", type=json.loads, help="the connection's ssl_options, as JSON")
    stage.add_argument("--fetch-size", type=int, default=5000)
    scan = modes.choices["range-counts"]
    scan.add_argument("--range", dest="ranges", type=parse_range, action="append", required=True)
    scan.add_argument("--pin-host", help="the only coordinator (a replica serves CL ONE from its own data)")
    scan.add_argument("--cutoff-us", type=int, help="count rows written later than this apart (µs)")
    scan.add_argument("--splits-per-range", type=int, default=1)
    scan.add_argument("--fetch-size", type=int, default=5000)
    return parser.parse_args(argv)


def _count(spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    counts = {}
    for table in args.tables:
        frame = (
            spark.read.format("org.apache.spark.sql.cassandra")
            .options(keyspace=args.keyspace, table=table)
            .option("spark.cassandra.input.consistency.level", args.consistency)
            .load()
        )
        counts[table] = frame.count()
    return {"rows": sum(counts.values()), "tables": counts}


def _range_counts(spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    settings = ScanSettings(
        hosts=tuple(args.hosts.split(",")), port=args.port, keyspace=args.keyspace, table=args.table,
        consistency=args.consistency, pinned_host=args.pin_host, cutoff_us=args.cutoff_us,
        fetch_size=args.fetch_size, local_dc=args.local_dc, username=args.username,
        password=os.environ.get(PASSWORD_VARIABLE) if args.username else None,
        ssl_options=tuple(sorted((args.ssl_options or {}).items())),
    )  # fmt: skip
    subranges = plan_subranges(args.ranges, args.splits_per_range)
    context = spark.sparkContext
    slices = max(1, min(len(subranges), context.defaultParallelism * 4))
    tallies = (
        context.parallelize(subranges, slices).mapPartitions(lambda part: count_subranges(part, settings)).collect()
    )
    per_range = tally_ranges(len(args.ranges), tallies)
    return {
        "pinned_host": args.pin_host,
        "cutoff_us": args.cutoff_us,
        "tasks": slices,
        "ranges": [
            {"start": r.start, "end": r.end, **tally.as_dict()} for r, tally in zip(args.ranges, per_range, strict=True)
        ],
        "rows": sum(t.rows for t in per_range),
        "later_rows": sum(t.later_rows for t in per_range),
    }


def _scan_settings(args: argparse.Namespace, scan: Mapping[str, Any]) -> ScanSettings:
    return ScanSettings(
        hosts=tuple(args.hosts.split(",")), port=args.port, keyspace=args.keyspace, table=str(scan["table"]),
        consistency=str(scan.get("consistency") or "ALL"), pinned_host=scan.get("pinned_host"),
        cutoff_us=scan.get("cutoff_us"), fetch_size=args.fetch_size, local_dc=args.local_dc,
        username=args.username, password=os.environ.get(PASSWORD_VARIABLE) if args.username else None,
        ssl_options=tuple(sorted((args.ssl_options or {}).items())),
    )  # fmt: skip


def plan_phase_pieces(scans: Sequence[Mapping[str, Any]]) -> list[tuple[int, Subrange]]:
    """`(scan number, subrange)` of every scan of a phase, no piece wider than 1/PIECES_PER_RING of the ring."""
    max_width = 2**64 // PIECES_PER_RING
    return [
        (number, piece)
        for number, scan in enumerate(scans)
        for piece in plan_subranges(
            [TokenRange(int(start), int(end)) for start, end in scan["ranges"]],
            int(scan.get("splits_per_range") or 1),
            max_width,
        )
    ]


def _count_phase(
    context: Any, pieces: list[tuple[int, Subrange]], settings: list[ScanSettings], slices: int
) -> list[tuple[int, RangeTally]]:
    tallied: list[tuple[int, RangeTally]] = (
        context.parallelize(pieces, slices).mapPartitions(lambda part: count_pieces(part, settings)).collect()
    )
    return tallied


def _stage(spark: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Every phase of the plan in order, each one Spark job over the pieces of all its scans."""
    plan = json.loads(Path(args.plan).read_text())
    context = spark.sparkContext
    phases = []
    for phase in plan["phases"]:
        started = time.monotonic()
        scans = list(phase["scans"])
        settings = [_scan_settings(args, scan) for scan in scans]
        pieces = plan_phase_pieces(scans)
        slices = max(1, min(len(pieces), context.defaultParallelism * TASKS_PER_CORE))
        tallied = _count_phase(context, pieces, settings, slices) if pieces else []
        by_scan: dict[int, list[RangeTally]] = {}
        for number, tally in tallied:
            by_scan.setdefault(number, []).append(tally)
        results = []
        for number, scan in enumerate(scans):
            ranges = [TokenRange(int(start), int(end)) for start, end in scan["ranges"]]
            per_range = tally_ranges(len(ranges), by_scan.get(number, []))
            results.append({
                "mode": "range-counts", "keyspace": args.keyspace, "table": settings[number].table,
                "consistency": settings[number].consistency, "pinned_host": settings[number].pinned_host,
                "cutoff_us": settings[number].cutoff_us,
                "ranges": [{"start": r.start, "end": r.end, **t.as_dict()}
                           for r, t in zip(ranges, per_range, strict=True)],
                "rows": sum(t.rows for t in per_range), "later_rows": sum(t.later_rows for t in per_range),
            })  # fmt: skip
        phases.append({"name": phase.get("name"), "tasks": slices, "pieces": len(pieces), "scans": results,
                       "seconds": round(time.monotonic() - started, 3)})  # fmt: skip
    return {"phases": phases}


def connector_conf(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, str]:
    """The Spark Cassandra Connector's settings from the job's arguments (the password from the environment).

    TLS for the connector needs Java trust stores: give `spark.cassandra.connection.ssl.trustStore.*` in the
    Spark connection's `ringward-conf` extra; here TLS is only switched on when the connection asks for it.
    """
    conf = {"spark.cassandra.connection.host": args.hosts, "spark.cassandra.connection.port": str(args.port)}
    if args.local_dc:
        conf["spark.cassandra.connection.localDC"] = args.local_dc
    if args.username:
        conf["spark.cassandra.auth.username"] = args.username
        conf["spark.cassandra.auth.password"] = environ.get(PASSWORD_VARIABLE, "")
    if args.ssl_options:
        conf["spark.cassandra.connection.ssl.enabled"] = "true"
    return conf


def _tables_named(args: argparse.Namespace) -> str:
    if args.mode == "stage":
        return ""
    tables = args.tables if args.mode == "count" else [args.table]
    return f".{tables[0]}" + ("..." if len(tables) > 1 else "")


def main(argv: Sequence[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    args = parse_args(argv)
    started = time.monotonic()
    builder = SparkSession.builder.appName(f"ringward-{args.mode}-{args.keyspace}{_tables_named(args)}")
    for key, value in connector_conf(args, os.environ).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        result = {"count": _count, "range-counts": _range_counts, "stage": _stage}[args.mode](spark, args)
    finally:
        shutdown_sessions()
        spark.stop()
    described = {"keyspace": args.keyspace}
    if args.mode == "count":
        described |= {
            "table": args.tables[0] if len(args.tables) == 1 else args.tables,
            "consistency": args.consistency,
        }
    elif args.mode == "range-counts":
        described |= {"table": args.table, "consistency": args.consistency}
    result = {"mode": args.mode, **described, **result, "seconds": round(time.monotonic() - started, 3)}
    Path(args.output).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
