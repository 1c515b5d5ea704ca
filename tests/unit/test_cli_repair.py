"""`ringward repair status` choices that need no cluster: which settings, which table to draw."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from ringward.errors import ConfigurationError
from ringward.repair import repair_status
from ringward_cli.commands.repair import _chosen
from ringward_cli.main import build_parser


def test_the_svg_shows_the_named_or_the_least_covered_table() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    good = repair_status("ks", "good", [], {}, 864000, now)
    statuses = [good, repair_status("ks", "bad", [], {}, 864000, now)]
    assert _chosen(statuses, "ks.good") is good
    with pytest.raises(ConfigurationError, match=r"ks\.nope"):
        _chosen(statuses, "ks.nope")


def test_the_status_command_parses() -> None:
    args = build_parser().parse_args(["repair", "status", "--contact", "10.0.0.1", "--svg", "ring.svg"])
    assert (args.contact, args.svg, args.table) == ("10.0.0.1", "ring.svg", None)
