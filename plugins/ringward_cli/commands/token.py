"""`ringward token`: the Murmur3 token of a partition key, as Cassandra's `SELECT token(...)` gives it."""

from __future__ import annotations

import argparse
from typing import Any

from ringward.tokens import SUPPORTED_TYPES, murmur3_token, partition_key_of_text

__all__ = ["register"]

_EPILOG = f"""\
Supported types: {", ".join(sorted(SUPPORTED_TYPES))}.
Value forms: blob 0xCAFE; timestamp 2019-01-01, '2019-01-01 00:00:00+0000' or milliseconds (no zone = UTC);
date YYYY-MM-DD or the raw day number; boolean true/false; uuid/timeuuid 8-4-4-4-12 hex; inet an IP.
Put values starting with '-' after '--':  ringward token --type bigint -- -42
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "token",
        help="print the Murmur3 token of a partition key",
        description="Print the Murmur3Partitioner token of a partition key (one --type per key column).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--type",
        dest="types",
        action="append",
        required=True,
        metavar="CQL_TYPE",
        help="CQL type of the next partition key column (repeat for composite keys, in key order)",
    )
    parser.add_argument("--show-key", action="store_true", help="also print the serialized partition key in hex")
    parser.add_argument("values", nargs="+", metavar="VALUE", help="one value per partition key column")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    key = partition_key_of_text(args.values, args.types)
    if args.show_key:
        print("key: 0x" + key.hex())
    print(murmur3_token(key))
    return 0
