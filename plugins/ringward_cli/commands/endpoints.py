"""`ringward endpoints`: the replicas of a token or partition key, like `nodetool getendpoints`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ringward.errors import ConfigurationError
from ringward.placement import replicas_for_token
from ringward.replication import Replication
from ringward.ring import MAX_TOKEN, MIN_TOKEN, Ring

from ringward_cli.login import cql_login

__all__ = ["register"]

_EPILOG = """examples:
  ringward endpoints --ring ring.json --replication '{"class": "SimpleStrategy", "replication_factor": 2}' \\
      --token=-4069959284402364209
  ringward endpoints --ring 127.0.0.1:9042 --replication '{"class": "NetworkTopologyStrategy", "dc1": 3}' \\
      --type int 1
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "endpoints",
        help="print the replicas of a token or partition key, in Cassandra's order",
        description="Print the replicas of a token or partition key one per line, in the order "
        "`nodetool getendpoints` prints them (Cassandra 5.0 placement).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--ring",
        required=True,
        help="ring file (JSON or `nodetool ring` output), or a contact point host[:port]",
    )
    parser.add_argument("--replication", required=True, help="replication map as JSON, e.g. '{\"class\": ...}'")
    key = parser.add_mutually_exclusive_group(required=True)
    key.add_argument("--token", type=int, help="a Murmur3 token (write negative ones as --token=-42)")
    key.add_argument(
        "--type",
        dest="types",
        action="append",
        metavar="CQL_TYPE",
        help="CQL type of each partition key column, in order (repeat for composite keys)",
    )
    parser.add_argument("values", nargs="*", metavar="VALUE", help="partition key column values")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    token = _token(args)
    ring = _load_ring(args.ring)
    replication = Replication.parse(args.replication)
    for address in replicas_for_token(ring, replication, token):
        print(address)
    return 0


def _token(args: argparse.Namespace) -> int:
    if args.token is not None:
        if args.values:
            raise ConfigurationError(
                f"Key values {args.values} were given with --token.",
                "Give either --token or --type and values.",
            )
        if not MIN_TOKEN <= args.token <= MAX_TOKEN:
            raise ConfigurationError(
                f"Token {args.token} is outside the Murmur3 range.",
                f"Give a token in [{MIN_TOKEN}, {MAX_TOKEN}].",
            )
        return int(args.token)
    if len(args.values) != len(args.types):
        raise ConfigurationError(
            f"{len(args.types)} key column type(s) but {len(args.values)} value(s).",
            "Give one --type per partition key column and one value for each, in the same order.",
        )
    from ringward.tokens import token_of_text

    return token_of_text(args.values, args.types)


def _load_ring(source: str) -> Ring:
    path = Path(source)
    if path.is_file():
        from ringward.ring_sources import load_ring_file

        return load_ring_file(path)
    if path.suffix in {".json", ".txt"} or "/" in source:
        raise ConfigurationError(f"Ring file {source} does not exist.", "Check the path.")
    from ringward_cassandra.ring_reader import ring_from_contact_point

    host, port = contact_point(source)
    ring: Ring = ring_from_contact_point(host, port, **cql_login())
    return ring


def contact_point(text: str, default_port: int = 9042) -> tuple[str, int]:
    """`host`, `host:port`, `[v6]:port` or a bare IPv6 address -> (host, port)."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if not host or (port and not port.isdigit()):
        raise ConfigurationError(
            f"--ring {text!r} is neither an existing ring file nor a contact point.",
            "Give a ring file path, or host[:port] of a Cassandra node.",
        )
    return host, int(port) if port else default_port
