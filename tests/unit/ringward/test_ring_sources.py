"""Reading rings from `nodetool ring` text and ringward JSON."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ringward._nodetool_ring import parse_load
from ringward.errors import RingError
from ringward.ring import MAX_TOKEN, MIN_TOKEN, Node, Ring
from ringward.ring_sources import load_ring_file, ring_from_json, ring_from_nodetool, ring_to_json

RINGS = Path(__file__).resolve().parents[2] / "fixtures" / "rings"


def to_local_addresses(ring: Ring) -> Ring:
    """The seed cluster ran on 172.24.0.x; the local test cluster uses 127.0.0.x."""
    return Ring.of(replace(n, address=n.address.replace("172.24.0.", "127.0.0.")) for n in ring.nodes)


class TestSeedListings:
    def test_num_tokens_1(self) -> None:
        ring = ring_from_nodetool((RINGS / "seed_num_tokens_1.txt").read_text())
        assert ring.addresses() == ["172.24.0.2", "172.24.0.3", "172.24.0.4"]
        assert ring.node("172.24.0.3").tokens == (-2609423468938814500,)
        assert ring.node("172.24.0.4").rack == "rack2"
        assert ring.node("172.24.0.3").load_bytes == round(65.22 * 1024)
        assert ring.sorted_tokens == (-2609423468938814500, -1864680695487047011, 2913852835856394332)

    def test_num_tokens_4_collects_each_nodes_tokens_from_many_lines(self) -> None:
        ring = ring_from_nodetool((RINGS / "seed_num_tokens_4.txt").read_text())
        assert ring.node("172.24.0.2").tokens == (
            -8151920490432810868,
            -433108085672519511,
            8824499221154258863,
            9216178714344602529,
        )
        assert len(ring.sorted_tokens) == 12
        assert {n.state for n in ring.nodes} == {"UN"}
        assert {n.datacenter for n in ring.nodes} == {"dc1"}
        assert ring.node("172.24.0.4").load_bytes == round(145.41 * 1024)

    def test_bare_token_under_the_header_is_not_a_node(self) -> None:
        ring = ring_from_nodetool((RINGS / "seed_num_tokens_4.txt").read_text())
        assert sum(len(n.tokens) for n in ring.nodes) == 12  # 9216178714344602529 counted once

    @pytest.mark.parametrize("num_tokens", [1, 4])
    def test_json_fixture_is_the_seed_ring_on_local_addresses(self, num_tokens: int) -> None:
        from_text = to_local_addresses(load_ring_file(RINGS / f"seed_num_tokens_{num_tokens}.txt"))
        from_json = load_ring_file(RINGS / f"local_num_tokens_{num_tokens}.json")
        assert from_json == from_text
        assert from_json.nodes == from_text.nodes

    def test_two_dc_fixture(self) -> None:
        ring = load_ring_file(RINGS / "two_dc.json")
        seed = to_local_addresses(load_ring_file(RINGS / "seed_num_tokens_4.txt"))
        dcs = ring.datacenters()
        assert [n.address for n in dcs["dc1"]] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
        assert [n.tokens for n in dcs["dc1"]] == [n.tokens for n in seed.nodes]
        assert [(n.address, n.rack) for n in dcs["dc2"]] == [("127.0.0.5", "rack1"), ("127.0.0.6", "rack1")]
        dc2_tokens = sorted(t for n in dcs["dc2"] for t in n.tokens)
        assert all(len(n.tokens) == 4 for n in dcs["dc2"])
        gaps = {b - a for a, b in itertools.pairwise(dc2_tokens)}
        assert gaps == {2**61}  # evenly spread: 8 tokens, one eighth of the ring apart


MULTI_DC = """\
  Warning: "nodetool ring" is used to output all the tokens of a node.
  To view status related info of a node use "nodetool status" instead.

Datacenter: dc1
==========
Address         Rack        Status State   Load            Owns                Token
                                                                               100
127.0.0.2       rack1       Up     Normal  1.5 MiB         ?                   -100
127.0.0.3       rack2       Down   Leaving ?               ?                   100

Datacenter: dc2
==========
Address         Rack        Status State   Load            Owns                Token
                                                                               200
127.0.0.5:7000  r1          Up     Joining 10 bytes        ?                   0
127.0.0.6       r1          Up     Moving  2 GiB           ?                   200

  Note: Non-system keyspaces don't have the same replication settings, """
MULTI_DC += "effective ownership information is meaningless\n"


class TestNodetoolParsing:
    def test_several_datacenters_states_and_loads(self) -> None:
        ring = ring_from_nodetool(MULTI_DC)
        by_address = {n.address: n for n in ring.nodes}
        assert {a: (n.datacenter, n.state) for a, n in by_address.items()} == {
            "127.0.0.2": ("dc1", "UN"),
            "127.0.0.3": ("dc1", "DL"),
            "127.0.0.5": ("dc2", "UJ"),
            "127.0.0.6": ("dc2", "UM"),
        }
        assert by_address["127.0.0.2"].load_bytes == 1572864
        assert by_address["127.0.0.3"].load_bytes is None
        assert by_address["127.0.0.5"].load_bytes == 10
        assert by_address["127.0.0.6"].load_bytes == 2 * 2**30

    @pytest.mark.parametrize(
        ("load", "expected"),
        [("65.28 KiB", 66847), ("1 KB", 1024), ("0 bytes", 0), ("3.5 TiB", int(3.5 * 2**40)), ("?", None)],
    )
    def test_load_units(self, load: str, expected: int | None) -> None:
        assert parse_load(load) == expected

    @pytest.mark.parametrize(
        ("text", "complaint"),
        [
            ("", "no node rows"),
            ("127.0.0.2 rack1 Up Normal 1 KiB ? 5\n", "before any 'Datacenter:' header"),
            ("Datacenter: dc1\n127.0.0.2 rack1 Up Normal\n", "line 2: cannot read"),
            ("Datacenter: dc1\n127.0.0.2 rack1 Up Normal 1 KiB ? x5\n", "line 2: cannot read"),
            ("Datacenter: dc1\n127.0.0.2 rack1 Up Sleeping 1 KiB ? 5\n", "line 2: unknown Status/State"),
            ("Datacenter: dc1\n127.0.0.2 rack1 Up Normal 1 XB ? 5\n", "line 2: load '1 XB'"),
            ("Datacenter: dc1\n127.0.0.2 rack1 Up Normal one KiB ? 5\n", "line 2: load 'one KiB'"),
            (
                "Datacenter: dc1\n127.0.0.2 rack1 Up Normal 1 KiB ? 5\n127.0.0.2 rack2 Up Normal 1 KiB ? 6\n",
                "line 3: 127.0.0.2 is in dc1/rack2, but line 2",
            ),
            ("Datacenter:\n", "line 1: empty datacenter"),
        ],
    )
    def test_unreadable_listings_name_the_line(self, text: str, complaint: str) -> None:
        with pytest.raises(RingError, match=complaint):
            ring_from_nodetool(text)


def _node_json(**overrides: object) -> str:
    node: dict[str, object] = {"address": "127.0.0.2", "datacenter": "dc1", "rack": "rack1", "tokens": [1, 2]}
    node.update(overrides)
    return json.dumps({"nodes": [node]})


class TestJson:
    def test_optional_fields(self) -> None:
        text = _node_json(host_id="abc", state="DN", load_bytes=12, tokens=["5", -3])
        node = ring_from_json(text).node("127.0.0.2")
        assert node == Node("127.0.0.2", "dc1", "rack1", (-3, 5), host_id="abc", state="DN", load_bytes=12)

    def test_state_defaults_to_up_normal(self) -> None:
        assert ring_from_json(_node_json()).node("127.0.0.2").state == "UN"

    @pytest.mark.parametrize(
        ("text", "complaint"),
        [
            ("{", "malformed at line 1"),
            ("[]", "no 'nodes' list"),
            ('{"nodes": [1]}', r"nodes\[0\] is not an object"),
            (_node_json(address=""), r"nodes\[0\].address must be a non-empty string"),
            (_node_json(rack=None), r"nodes\[0\].rack"),
            (_node_json(tokens=[]), r"nodes\[0\].tokens must be a non-empty list"),
            (_node_json(tokens=[1, 2.5]), r"nodes\[0\].tokens\[1\] is not an integer"),
            (_node_json(tokens=[True]), r"nodes\[0\].tokens\[0\] is not an integer"),
            (_node_json(load_bytes=-1), r"nodes\[0\].load_bytes must be a non-negative integer"),
            (_node_json(colour="red"), r"unknown field\(s\) colour"),
            (_node_json(tokens=[MIN_TOKEN]), "outside the Murmur3 range"),
        ],
    )
    def test_bad_json_names_the_field(self, text: str, complaint: str) -> None:
        with pytest.raises(RingError, match=complaint):
            ring_from_json(text)

    def test_file_that_cannot_be_read(self, tmp_path: Path) -> None:
        with pytest.raises(RingError, match="Cannot read ring file"):
            load_ring_file(tmp_path / "missing.json")


nodes = st.builds(
    Node,
    address=st.sampled_from(["127.0.0.2", "127.0.0.3", "10.0.0.1", "::1"]),
    datacenter=st.sampled_from(["dc1", "dc2"]),
    rack=st.sampled_from(["rack1", "rack2"]),
    tokens=st.just(()),
    host_id=st.none() | st.uuids().map(str),
    state=st.sampled_from(["UN", "DN", "UL", "UJ", "UM"]),
    load_bytes=st.none() | st.integers(0, 2**50),
)


@given(
    st.lists(nodes, min_size=1, max_size=4, unique_by=lambda n: n.address),
    st.sets(st.integers(MIN_TOKEN + 1, MAX_TOKEN), min_size=4, max_size=16),
)
def test_json_round_trip(node_list: list[Node], token_set: set[int]) -> None:
    token_list = sorted(token_set)
    share = len(token_list) // len(node_list)
    ring = Ring.of(
        replace(node, tokens=tuple(token_list[i * share : (i + 1) * share])) for i, node in enumerate(node_list)
    )
    assert ring_from_json(ring_to_json(ring)) == ring
