"""system.local / system.peers_v2 rows -> Nodes, with plain objects standing in for driver rows."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from ringward.errors import ClusterError
from ringward.ring import Node
from ringward_cassandra.ring_reader import node_from_local_row, node_from_peer_row, ring_from_rows

HOST_2 = uuid.UUID("11111111-1111-1111-1111-111111111111")
HOST_3 = uuid.UUID("22222222-2222-2222-2222-222222222222")


def local_row(**overrides: object) -> SimpleNamespace:
    fields: dict[str, object] = {
        "broadcast_address": "127.0.0.2",
        "listen_address": "127.0.0.2",
        "data_center": "dc1",
        "rack": "rack1",
        # The driver returns set<text> as a SortedSet of strings.
        "tokens": {"9216178714344602529", "-8151920490432810868"},
        "host_id": HOST_2,
    }
    fields.update(overrides)
    return SimpleNamespace(**fields)


def peer_row(**overrides: object) -> SimpleNamespace:
    fields: dict[str, object] = {
        "peer": "127.0.0.3",
        "data_center": "dc1",
        "rack": "rack1",
        "tokens": {"-8556096403387275620"},
        "host_id": HOST_3,
    }
    fields.update(overrides)
    return SimpleNamespace(**fields)


def test_local_row() -> None:
    assert node_from_local_row(local_row()) == Node(
        "127.0.0.2",
        "dc1",
        "rack1",
        (-8151920490432810868, 9216178714344602529),
        host_id=str(HOST_2),
        state="UN",
    )


def test_local_row_falls_back_to_listen_address() -> None:
    assert node_from_local_row(local_row(broadcast_address=None)).address == "127.0.0.2"


def test_peer_row_down_node() -> None:
    node = node_from_peer_row(peer_row(), up=False)
    assert (node.address, node.tokens, node.state) == ("127.0.0.3", (-8556096403387275620,), "DN")


def test_ring_from_rows_uses_driver_up_state() -> None:
    ring = ring_from_rows(local_row(), [peer_row()], {str(HOST_3): False, str(HOST_2): True})
    assert [(n.address, n.state) for n in ring.nodes] == [("127.0.0.2", "UN"), ("127.0.0.3", "DN")]
    assert len(ring.sorted_tokens) == 3


@pytest.mark.parametrize(
    ("row", "complaint"),
    [
        (peer_row(tokens=None), "has no tokens"),
        (peer_row(tokens=set()), "has no tokens"),
        (peer_row(peer=None), "has no address"),
        (peer_row(rack=None), "no rack"),
    ],
)
def test_incomplete_peer_rows_are_refused(row: SimpleNamespace, complaint: str) -> None:
    with pytest.raises(ClusterError, match=complaint):
        node_from_peer_row(row)


def test_rows_from_two_coordinators_are_refused() -> None:
    with pytest.raises(ClusterError, match=r"both in system\.local and in system\.peers_v2"):
        ring_from_rows(local_row(), [peer_row(peer="127.0.0.2")])
