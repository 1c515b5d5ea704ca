"""`ringward spark`: run ringward's Spark jobs (spark-submit, local[2]) and print their JSON result.

The connector jars come from $RINGWARD_SPARK_JARS_DIR (set in the image); in a checkout without it, they are
resolved from Maven Central into .cache/ once (`ringward spark jars`).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ringward_cli.login import cql_login

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("spark", help="run a Spark job (count, range-counts) or fetch the connector jars")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("jars", help="resolve the Spark Cassandra Connector jars (checkout) and list them").set_defaults(
        handler=_jars
    )
    for name, handler, help_text in (
        ("count", _count, "count a whole table through the Spark Cassandra Connector"),
        ("range-counts", _range_counts, "count rows per token range (default: the live ring's ranges)"),
    ):
        job = actions.add_parser(name, help=help_text)
        job.add_argument("--hosts", help="contact points, comma-separated (default: the local cluster's nodes)")
        job.add_argument("--port", type=int, default=9042)
        job.add_argument("--keyspace", required=True)
        job.add_argument("--table", required=True)
        job.add_argument("--consistency", help="ALL, QUORUM, ONE, ... (default ALL; ONE with --pin-host)")
        job.add_argument("--master", default="local[2]")
        job.set_defaults(handler=handler)
    scan = actions.choices["range-counts"]
    scan.add_argument("--pin-host", help="the only coordinator; reads at CL ONE unless --consistency is given")
    scan.add_argument("--cutoff-us", type=int, help="rows written after this writetime (µs) are counted apart")
    scan.add_argument("--splits-per-range", type=int, default=1)


def _hosts(args: argparse.Namespace) -> list[str]:
    if args.hosts:
        return [host.strip() for host in args.hosts.split(",") if host.strip()]
    from ringward_cassandra.localcluster import LocalCluster

    return LocalCluster().topology().addresses


def _jars_environment() -> None:
    """$RINGWARD_SPARK_JARS_DIR as set (the image), else the checkout's Maven-resolved cache."""
    from ringward_spark.jars import JARS_DIR_VARIABLE

    if not os.environ.get(JARS_DIR_VARIABLE):
        from ringward_cassandra.localcluster.spark_jars import local_jars_environment

        os.environ.update(local_jars_environment())


def _jars(args: argparse.Namespace) -> int:
    from ringward_spark.jars import JARS_DIR_VARIABLE, connector_jars

    _jars_environment()
    print("\n".join(connector_jars()))
    print(f"export {JARS_DIR_VARIABLE}={os.environ[JARS_DIR_VARIABLE]}")
    return 0


def _count(args: argparse.Namespace) -> int:
    from ringward_spark.submit import count_job_args, run_job

    _jars_environment()
    consistency = args.consistency or "ALL"
    job = count_job_args(_hosts(args), args.keyspace, args.table, consistency=consistency, port=args.port)
    print(json.dumps(run_job(job, master=args.master), indent=1))
    return 0


def _range_counts(args: argparse.Namespace) -> int:
    from ringward_cassandra.ring_reader import ring_from_contact_point
    from ringward_spark.submit import range_counts_job_args, run_job

    _jars_environment()
    hosts = _hosts(args)
    consistency = args.consistency or ("ONE" if args.pin_host else "ALL")
    ranges = ring_from_contact_point(hosts[0], args.port, **cql_login()).ranges()
    job = range_counts_job_args(
        hosts, args.keyspace, args.table, ranges, consistency=consistency, pinned_host=args.pin_host,
        cutoff_us=args.cutoff_us, splits_per_range=args.splits_per_range, port=args.port,
    )  # fmt: skip
    print(json.dumps(run_job(job, master=args.master), indent=1))
    return 0
