"""Which node is on which schema version, read through one node and described odd one first."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ringward_cassandra.schema import describe_schema_versions, schema_versions

MAIN = "7134970d-c149-3bd1-b11e-80c6c0344c8e"
ODD = "317bd95f-72be-38da-b64c-0e70c8af7dc3"


class OneNodeSession:
    """Answers system.local and system.peers as 127.0.0.2 would; records which host each query went to."""

    def __init__(self) -> None:
        up, down = SimpleNamespace(is_up=True), SimpleNamespace(is_up=False)
        self.cluster = SimpleNamespace(metadata=SimpleNamespace(all_hosts=lambda: [down, up]))
        self.up = up
        self.hosts: list[Any] = []

    def execute(self, query: str, host: Any = None) -> list[dict[str, str]]:
        self.hosts.append(host)
        if "system.local" in query:
            return [{"broadcast_address": "127.0.0.2", "schema_version": MAIN}]
        return [{"peer": "127.0.0.6", "schema_version": ODD}, {"peer": "127.0.0.3", "schema_version": MAIN}]


def test_versions_come_from_one_live_node() -> None:
    session = OneNodeSession()
    assert schema_versions(session) == {MAIN: ["127.0.0.2", "127.0.0.3"], ODD: ["127.0.0.6"]}
    assert session.hosts == [session.up, session.up]  # local and peers from the same node: one view


def test_the_odd_node_out_is_named_first() -> None:
    versions = {MAIN: ["127.0.0.2", "127.0.0.3"], ODD: ["127.0.0.6"]}
    assert (
        describe_schema_versions(versions) == "version 317bd95f on 127.0.0.6; version 7134970d on 127.0.0.2, 127.0.0.3"
    )


def test_a_refusal_survives_versions_it_cannot_read() -> None:
    from ringward_cassandra.schema import LiveCql

    class Unreachable(OneNodeSession):
        def execute(self, query: str, host: Any = None) -> list[dict[str, str]]:
            raise OSError("connection refused")

    text = LiveCql(Unreachable()).schema_versions_text()
    assert text.startswith("versions unreadable: ") and "connection refused" in text, text
    assert LiveCql(OneNodeSession()).schema_versions_text().startswith("version 317bd95f on 127.0.0.6; ")
