"""`ringward grants`: the CQL an administrator runs so ringward works under CassandraAuthorizer (and under
Cassandra's JMX authorizer, for the JMX role)."""

from __future__ import annotations

import argparse
from typing import Any

from ringward.errors import ConfigurationError
from ringward.permissions import (
    JMX_ROLE,
    SPARK_ROLE,
    cluster_grants,
    create_role_statement,
    grant_statements,
    jmx_grant_statements,
    jmx_grants,
    keyspace_grants,
    ops_keyspace_statement,
    spark_grant_statements,
    spark_keyspace_grants,
)

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "grants",
        help="print the CREATE and GRANT statements ringward's CQL role needs",
        description="Print, for an administrator to run, the ops keyspace, ringward's role and its GRANTs, then "
        "the Spark verification's read-only role and its GRANTs (docs/operators-guide.md §2.6), then the JMX role "
        "and its per-MBean GRANTs for Cassandra's JMX authorizer (§2.2). Nothing is sent to a cluster.",
    )
    parser.add_argument("--role", default="ringward", help="the role ringward's cassandra connection logs in as")
    parser.add_argument(
        "--spark-role", default=SPARK_ROLE,
        help="the read-only role the Spark verification's connection (cassandra_spark) logs in as",
    )  # fmt: skip
    parser.add_argument(
        "--jmx-role", default=JMX_ROLE,
        help="the role nodetool logs in as over JMX when Cassandra's roles authenticate JMX (CassandraLogin)",
    )  # fmt: skip
    parser.add_argument(
        "--auto-repair", action="store_true",
        help="the nodes run CEP-37 AutoRepair (5.0.9+): also EXECUTE on its MBean, which ringward pauses during a "
        "migration (the GRANT is refused where the MBean does not exist)",
    )  # fmt: skip
    parser.add_argument(
        "--keyspace", dest="keyspaces", action="append", default=[], metavar="NAME",
        help="a keyspace whose replication ringward may change (repeat)",
    )  # fmt: skip
    parser.add_argument(
        "--datacenter", dest="datacenters", action="append", default=[], metavar="NAME=NODES",
        help="a datacenter and its node count, for the ops keyspace's replication (repeat; default dc1=3)",
    )  # fmt: skip
    parser.add_argument("--why", action="store_true", help="say after each GRANT why ringward needs it")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    datacenters = dict(_datacenter(text) for text in args.datacenters) or {"dc1": 3}
    print(ops_keyspace_statement(datacenters))
    print(create_role_statement(args.role))
    reasons = [grant.why for grant in cluster_grants()]
    reasons += [grant.why for keyspace in args.keyspaces for grant in keyspace_grants(keyspace)]
    for statement, why in zip(grant_statements(args.role, args.keyspaces), reasons, strict=True):
        print(f"{statement}  -- {why}" if args.why else statement)
    print(create_role_statement(args.spark_role))
    spark_reasons = [grant.why for keyspace in args.keyspaces for grant in spark_keyspace_grants(keyspace)]
    for statement, why in zip(spark_grant_statements(args.spark_role, args.keyspaces), spark_reasons, strict=True):
        print(f"{statement}  -- {why}" if args.why else statement)
    print(create_role_statement(args.jmx_role))
    jmx = jmx_grants(args.auto_repair)
    for statement, why in zip(jmx_grant_statements(args.jmx_role, args.auto_repair), [g.why for g in jmx], strict=True):
        print(f"{statement}  -- {why}" if args.why else statement)
    return 0


def _datacenter(text: str) -> tuple[str, int]:
    name, _, count = text.partition("=")
    if not name or not count.isdigit() or int(count) < 1:
        raise ConfigurationError(f"--datacenter {text!r} is not NAME=NODES.", "Give e.g. --datacenter dc1=6.")
    return name, int(count)
