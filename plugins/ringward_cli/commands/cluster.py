"""`ringward cluster`: the embedded local Cassandra cluster (5.0 by default; 4.1 and 4.0 on Java 11)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ringward_cassandra.localcluster import LocalCluster

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("cluster", help="start, stop and inspect the local Cassandra cluster")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser("up", help="start every node and wait until all are UN (idempotent)")
    up.add_argument("--topology", default="seed", help="preset (seed, two-dc) or a topology JSON file")
    up.add_argument("--heap-mb", type=int, default=512)
    up.add_argument("--cassandra", default=None, metavar="VERSION",
                    help="Cassandra series or release: 5.0 (default), 4.1, 4.0, or e.g. 4.1.10")  # fmt: skip
    up.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the nodes")
    up.set_defaults(handler=_up)
    down = actions.add_parser("down", help="stop every node (idempotent)")
    down.add_argument("--purge", action="store_true", help="also delete the cluster's data")
    down.set_defaults(handler=_down)
    actions.add_parser("status", help="one line per node").set_defaults(handler=_status)
    stop = actions.add_parser("stop", help="stop one node")
    stop.add_argument("address")
    stop.add_argument("--kill", action="store_true", help="SIGKILL at once, as a crash")
    stop.set_defaults(handler=_stop)
    start = actions.add_parser("start", help="start one node and wait until it is UN")
    start.add_argument("address")
    start.set_defaults(handler=_start)
    jars = actions.add_parser("jars", help="resolve Cassandra's jars from Maven Central (once per version)")
    jars.add_argument("--cassandra", default=None, metavar="VERSION", help="5.0 (default), 4.1, 4.0")
    jars.set_defaults(handler=_jars)
    nodetool = actions.add_parser("nodetool", help="run Cassandra's nodetool against one node")
    nodetool.add_argument("address")
    nodetool.add_argument("args", nargs=argparse.REMAINDER)
    nodetool.set_defaults(handler=_nodetool)


def _cluster() -> LocalCluster:
    from ringward_cassandra.localcluster import LocalCluster

    return LocalCluster()


def _jars(args: argparse.Namespace) -> int:
    from ringward_cassandra.localcluster.runtime import ensure_jars, java_binary, resolve_version, server_java_binary

    version = resolve_version(args.cassandra)
    java_binary()
    server_java_binary(version)
    print(f"Cassandra {version} jars in {ensure_jars(version)}")
    return 0


def _up(args: argparse.Namespace) -> int:
    cluster = _cluster()
    topology = cluster.up(args.topology, heap_mb=args.heap_mb, timeout=args.timeout, cassandra=args.cassandra)
    print(f"cluster {topology.name!r} (Cassandra {cluster.version()}) is up: {', '.join(topology.addresses)}")
    return 0


def _down(args: argparse.Namespace) -> int:
    _cluster().down(purge=args.purge)
    print("cluster is down" + (" and purged" if args.purge else ""))
    return 0


def _status(args: argparse.Namespace) -> int:
    rows = _cluster().status()
    print(f"{'address':<12} {'dc':<6} {'rack':<7} {'state':<8} pid")
    for row in rows:
        print(f"{row.address:<12} {row.datacenter:<6} {row.rack:<7} {row.state:<8} {row.pid or '-'}")
    return 0 if all(row.state == "UN" for row in rows) else 1


def _stop(args: argparse.Namespace) -> int:
    _cluster().stop(args.address, kill=args.kill)
    return 0


def _start(args: argparse.Namespace) -> int:
    _cluster().start(args.address)
    return 0


def _nodetool(args: argparse.Namespace) -> int:
    result = _cluster().nodetool(args.address, args.args, capture=False)
    sys.stdout.flush()
    return int(result.returncode)
