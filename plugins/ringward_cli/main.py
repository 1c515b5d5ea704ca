"""The `ringward` command. Each module in `ringward_cli.commands` adds one subcommand."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from ringward.errors import RingwardError

from ringward_cli import commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ringward",
        description="Safe Cassandra replication changes and subrange repair scheduling.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{module_info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except RingwardError as error:
        print(f"ringward: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
