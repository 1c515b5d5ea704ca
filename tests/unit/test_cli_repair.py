"""`ringward repair status` choices that need no cluster: which settings, which table to draw."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from ringward.errors import ConfigurationError
from ringward.repair import dump_config, load_config, parse_config, repair_status
from ringward_cli.commands.repair import _chosen, _status_config
from ringward_cli.main import build_parser


def test_status_uses_the_last_runs_splitter_with_the_base_selection() -> None:
    base = load_config()
    last = parse_config({"splitter": {"subranges_per_range": 2}, "keyspaces": {"include": ["only_this"]}})
    run = SimpleNamespace(run_id="r1", config=dump_config(last))
    config = _status_config(base, [run])
    assert config.splitter == last.splitter
    assert config.keyspaces == base.keyspaces
    assert _status_config(base, []) is base


def test_an_unreadable_recorded_config_falls_back_to_the_base(capsys: pytest.CaptureFixture[str]) -> None:
    base = load_config()
    assert _status_config(base, [SimpleNamespace(run_id="old", config={"segment_timeout": "PT3H"})]) is base
    assert "segment_timeout" in capsys.readouterr().err


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
