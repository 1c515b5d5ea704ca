"""`ringward plan` end to end on fixture rings: exit codes, output formats, the SVG file."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from ringward.placement import replicas_for_token
from ringward.replication import Replication
from ringward.ring import Ring
from ringward.ring_sources import load_ring_file, ring_to_json
from ringward_cassandra.schema import default_keyspace_rf, keyspace_names, keyspace_replication, table_gc_grace
from ringward_cli.main import main

RINGS = Path(__file__).resolve().parents[2] / "fixtures" / "rings"
SEED = str(RINGS / "seed_num_tokens_4.txt")
SIMPLE_2 = '{"class": "SimpleStrategy", "replication_factor": 2}'
NTS_DC1_2 = '{"class": "NetworkTopologyStrategy", "dc1": 2}'


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["plan", *args])
    return code, capsys.readouterr().out


def test_json_output_counts_the_seed_change(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(
        capsys,
        "--ring",
        SEED,
        "--from",
        SIMPLE_2,
        "--to",
        NTS_DC1_2,
        "--keyspace",
        "test",
        "--format",
        "json",
    )
    assert code == 0
    data = json.loads(out)
    ring = load_ring_file(SEED)
    old, new = Replication.parse(SIMPLE_2), Replication.parse(NTS_DC1_2)
    moved = sum(
        set(replicas_for_token(ring, old, r.end)) != set(replicas_for_token(ring, new, r.end)) for r in ring.ranges()
    )
    assert data["affected_ranges"] == moved
    assert len(data["ranges"]) == len(ring.sorted_tokens)


def test_table_format_prints_table_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "--ring", SEED, "--from", SIMPLE_2, "--to", NTS_DC1_2, "--format", "table")
    assert code == 0
    assert out.splitlines()[0].split()[:3] == ["range", "old", "new"]
    assert "affected" in out and "SAFE" in out


def test_refused_change_exits_3_and_prints_the_findings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(
        capsys, "--ring", SEED, "--from", SIMPLE_2, "--to", '{"class": "NetworkTopologyStrategy", "DC1": 2}'
    )
    assert code == 3
    assert "unknown_datacenter" in out and "'dc1'" in out


def test_replication_can_come_from_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "from.json").write_text(SIMPLE_2)
    (tmp_path / "to.json").write_text(NTS_DC1_2)
    code, out = run(capsys, "--ring", SEED, "--from", str(tmp_path / "from.json"), "--to", str(tmp_path / "to.json"))
    assert code == 0 and "affected" in out


def test_svg_file_is_written(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    picture = tmp_path / "plan.svg"
    code, _ = run(capsys, "--ring", SEED, "--from", SIMPLE_2, "--to", NTS_DC1_2, "--svg", str(picture))
    assert code == 0
    assert ET.parse(picture).getroot().tag.endswith("svg")


def test_ring_after_plans_a_topology_change(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    before = load_ring_file(SEED)
    after = Ring.of(n for n in before.nodes if n.address != "172.24.0.4")
    (tmp_path / "after.json").write_text(ring_to_json(after))
    code, out = run(
        capsys,
        "--ring",
        SEED,
        "--ring-after",
        str(tmp_path / "after.json"),
        "--to",
        NTS_DC1_2,
        "--format",
        "json",
    )
    data = json.loads(out)
    assert code == 0
    assert data["ring_change"] is True and data["affected_ranges"] > 0
    assert all("172.24.0.4" not in r["new"] for r in data["ranges"])


def test_gc_grace_option_sets_the_deadline(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(
        capsys,
        "--ring",
        SEED,
        "--from",
        SIMPLE_2,
        "--to",
        NTS_DC1_2,
        "--gc-grace",
        "3600",
        "--format",
        "json",
    )
    data = json.loads(out)
    assert code == 0
    assert data["deadline_seconds"] == 3600
    assert "gc_grace_short" in {f["code"] for f in data["findings"]}


def test_keyspace_without_from_needs_a_contact_point(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--ring", SEED, "--to", NTS_DC1_2, "--keyspace", "test"])
    assert code == 2
    assert "--contact" in capsys.readouterr().err


def test_missing_ring_file_is_a_configuration_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--ring", "no-such-ring.txt", "--from", SIMPLE_2, "--to", NTS_DC1_2]) == 2
    assert "does not exist" in capsys.readouterr().err


class FakeSession:
    """Answers the three schema queries like the driver does (rows as mappings)."""

    def execute(self, query: str, parameters: Any = None) -> list[dict[str, Any]]:
        if "replication FROM" in query:
            replication = {"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "2"}
            return [{"replication": replication}] if parameters == ("test",) else []
        if "gc_grace_seconds" in query:
            return [
                {"table_name": "users", "gc_grace_seconds": 864000},
                {"table_name": "events", "gc_grace_seconds": 0},
            ]
        if "system_views.settings" in query:
            return [{"value": "3"}] if parameters == ("default_keyspace_rf",) else []
        return [{"keyspace_name": "test"}, {"keyspace_name": "system"}]


def test_schema_reader_parses_the_live_replication() -> None:
    session = FakeSession()
    assert keyspace_replication(session, "test") == Replication.simple(2)
    assert table_gc_grace(session, "test") == {"users": 864000, "events": 0}
    assert keyspace_names(session) == ["system", "test"]


def test_schema_reader_reads_default_keyspace_rf() -> None:
    assert default_keyspace_rf(FakeSession()) == 3

    class Unlisted(FakeSession):
        def execute(self, query: str, parameters: Any = None) -> list[dict[str, Any]]:
            return [] if "system_views" in query else super().execute(query, parameters)

    assert default_keyspace_rf(Unlisted()) == 1  # Cassandra's own default


def test_simple_strategy_without_factor_takes_the_given_default_keyspace_rf(capsys: pytest.CaptureFixture[str]) -> None:
    """From NTS, a SimpleStrategy without factor takes default_keyspace_rf, as ALTER KEYSPACE does."""
    args = ["--ring", SEED, "--from", NTS_DC1_2, "--to", '{"class": "SimpleStrategy"}', "--format", "json"]
    _, out = run(capsys, *args, "--default-keyspace-rf", "3")
    data = json.loads(out)
    assert {len(r["new"]) for r in data["ranges"]} == {3}
    _, out = run(capsys, *args)
    assert {len(r["new"]) for r in json.loads(out)["ranges"]} == {1}


def test_allow_quorum_gap_stages_with_a_kept_replica_only(capsys: pytest.CaptureFixture[str]) -> None:
    """SimpleStrategy RF 3 -> NTS dc1: 1 drops two replicas of a range at once: staged unless the gap is allowed."""
    args = ["--ring", SEED, "--from", '{"class": "SimpleStrategy", "replication_factor": 3}']
    args += ["--to", '{"class": "NetworkTopologyStrategy", "dc1": 1}', "--format", "json"]
    code, out = run(capsys, *args)
    assert code == 0 and len(json.loads(out)["steps"]) == 2
    code, out = run(capsys, *args, "--allow-quorum-gap")
    assert code == 0 and len(json.loads(out)["steps"]) == 1


def test_schema_reader_refuses_a_missing_keyspace() -> None:
    from ringward.errors import ClusterError

    with pytest.raises(ClusterError):
        keyspace_replication(FakeSession(), "nope")


DEEP = '{"class": ' + "[" * 100_000 + "]" * 100_000 + "}"


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        (DEEP, "nested too deeply"),
        ('{"class": "NetworkTopologyStrategy", "dc1": 3, "dc1": 0}', "'dc1' is given twice"),
    ],
)
def test_malformed_target_json_is_a_refusal_not_a_traceback(
    capsys: pytest.CaptureFixture[str], target: str, problem: str
) -> None:
    # Security review (issue 25, finding 12 b and c).
    code = main(["plan", "--ring", SEED, "--from", SIMPLE_2, "--to", target])
    err = capsys.readouterr().err
    assert code == 2
    assert problem in err and "Fix:" in err


def test_a_deeply_nested_ring_file_is_a_refusal_not_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ring = tmp_path / "ring.json"
    ring.write_text('{"nodes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code = main(["plan", "--ring", str(ring), "--from", SIMPLE_2, "--to", NTS_DC1_2])
    err = capsys.readouterr().err
    assert code == 2
    assert "nested too deeply" in err and "Fix:" in err
