"""Triggers survive the round trip through the triggerer's serialization."""

from __future__ import annotations

import importlib
from datetime import UTC

import pytest
from ringward_airflow.triggers import RepairSessionTrigger


def test_repair_session_trigger_round_trip() -> None:
    """With the labels the migration's repair task sends (`session_labels` of the commands it started)."""
    from ringward.repair import RepairCommand, Segment
    from ringward.ring import TokenRange
    from ringward_airflow.migration_stages import session_labels

    segments = (Segment("ks", (), TokenRange(1, 2), ("127.0.0.4", "127.0.0.2")),)
    labels = session_labels({"f3d78270-e608-11f1-97bc-b74011bb59d4": RepairCommand(segments)})
    assert labels["f3d78270-e608-11f1-97bc-b74011bb59d4"] == {
        "ranges": [[1, 2]], "coordinator": "127.0.0.4", "replicas": ["127.0.0.4", "127.0.0.2"],
    }  # fmt: skip
    trigger = RepairSessionTrigger(
        contact_points=["127.0.0.2"], parent_ids=["f3d78270-e608-11f1-97bc-b74011bb59d4"], poll_interval=1.5,
        timeout_seconds=60, started_at=123.0, labels=labels,
    )  # fmt: skip
    path, kwargs = trigger.serialize()
    module, _, name = path.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (path, kwargs)
    assert module == "ringward_airflow.triggers"  # importable by the triggerer from plugins/, not dags/


# -- the trigger's run against a scripted cluster -------------------------------------------------------

PARENT = "f3d78270-e608-11f1-97bc-b74011bb59d4"


class _Row:
    def __init__(self, **fields: object) -> None:
        self.__dict__.update(fields)


class _Result(list):  # type: ignore[type-arg]
    def one(self) -> object:
        return self[0] if self else None


class _ScriptedCluster:
    """A driver Cluster whose session answers from `script` (a list of poll states, one used per poll)."""

    def __init__(self, script: list[dict[str, object]]) -> None:
        self.script = script
        self.polls = 0
        self.shut = False

    def connect(self) -> _ScriptedCluster:
        return self

    def shutdown(self) -> None:
        self.shut = True

    def execute(self, statement: object, params: object = None) -> _Result:
        state = self.script[min(self.polls, len(self.script) - 1)]
        if "gossip_info" in str(statement):
            gossip = state["generations"].items()  # type: ignore[attr-defined]
            return _Result(_Row(address=a, port=7012, generation=g) for a, g in gossip)
        self.polls += 1
        return _Result([state["row"]] if state["row"] else [])


def _run(trigger: RepairSessionTrigger) -> list[dict[str, object]]:
    import asyncio

    async def collect() -> list[dict[str, object]]:
        return [event.payload async for event in trigger.run()]

    return asyncio.run(collect())


def _trigger(**kwargs: object) -> RepairSessionTrigger:
    return RepairSessionTrigger(
        contact_points=["127.0.0.2"], parent_ids=[PARENT], poll_interval=0.01, timeout_seconds=60,
        labels={PARENT: {"ranges": [[1, 2]], "coordinator": "127.0.0.4"}}, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_restarted_coordinator_ends_the_wait_at_once_naming_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import datetime

    started = datetime(2026, 11, 23, 21, 19, 34)  # naive UTC, as the driver returns it
    running = _Row(parent_id=PARENT, started_at=started, finished_at=None, exception_message=None)
    before = int(started.replace(tzinfo=UTC).timestamp()) - 600
    script = [
        {"row": running, "generations": {"127.0.0.4": before}},
        {"row": running, "generations": {"127.0.0.4": before + 620}},  # came back 20 s into the session
    ]
    cluster = _ScriptedCluster(script)
    builds: list[object] = []
    monkeypatch.setattr("ringward_cassandra.cql.build_cluster", lambda *a, **k: builds.append(a) or cluster)
    monkeypatch.setattr("ringward_airflow.triggers.accepts_connections", lambda *a, **k: True)
    [event] = _run(_trigger())
    assert event["status"] == "dead"
    session = event["sessions"][PARENT]  # type: ignore[index]
    assert session["dead"] and not session["ok"] and "127.0.0.4 restarted" in session["error"]
    assert len(builds) == 1 and cluster.polls == 2 and cluster.shut  # one connection for the run


def test_an_unreachable_coordinator_is_dead_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    running = _Row(parent_id=PARENT, started_at=None, finished_at=None, exception_message=None)
    cluster = _ScriptedCluster([{"row": running, "generations": {"127.0.0.4": 1}}])
    monkeypatch.setattr("ringward_cassandra.cql.build_cluster", lambda *a, **k: cluster)
    monkeypatch.setattr("ringward_airflow.triggers.accepts_connections", lambda *a, **k: False)
    [event] = _run(_trigger(down_grace_seconds=0.05))
    assert event["status"] == "dead"
    assert "127.0.0.4 has been unreachable" in event["sessions"][PARENT]["error"]  # type: ignore[index]


def test_a_coordinator_with_its_cql_port_closed_but_gossiping_is_not_dead(monkeypatch: pytest.MonkeyPatch) -> None:
    """`nodetool disablebinary` closes CQL on a node that still coordinates its session: the internode port (as
    gossip gives it) still answers, so the session is waited for, not declared dead."""
    from datetime import datetime

    running = _Row(parent_id=PARENT, started_at=None, finished_at=None, exception_message=None)
    done = _Row(parent_id=PARENT, started_at=datetime(2026, 1, 1), finished_at=datetime(2026, 1, 1, 0, 1),
                exception_message=None)  # fmt: skip
    cluster = _ScriptedCluster([{"row": running, "generations": {"127.0.0.4": 1}}] * 20
                               + [{"row": done, "generations": {"127.0.0.4": 1}}])  # fmt: skip
    probed: list[tuple[str, int]] = []

    def accepts(address: str, port: int = 9042, timeout: float = 2.0) -> bool:
        probed.append((address, port))
        return port == 7012  # CQL refused, the internode port gossip names answers

    monkeypatch.setattr("ringward_cassandra.cql.build_cluster", lambda *a, **k: cluster)
    monkeypatch.setattr("ringward_airflow.triggers.accepts_connections", accepts)
    [event] = _run(_trigger(down_grace_seconds=0.05))
    assert event["status"] == "finished", event
    assert ("127.0.0.4", 9042) in probed and ("127.0.0.4", 7012) in probed


def test_a_finished_session_is_reported_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import datetime

    done = _Row(parent_id=PARENT, started_at=datetime(2026, 1, 1), finished_at=datetime(2026, 1, 1, 0, 1),
                exception_message=None)  # fmt: skip
    cluster = _ScriptedCluster([{"row": done, "generations": {"127.0.0.4": 1}}])
    monkeypatch.setattr("ringward_cassandra.cql.build_cluster", lambda *a, **k: cluster)
    [event] = _run(_trigger())
    assert event["status"] == "finished" and event["sessions"][PARENT]["ok"]  # type: ignore[index]


def test_a_coordinator_gone_from_gossip_is_dead(monkeypatch: pytest.MonkeyPatch) -> None:
    running = _Row(parent_id=PARENT, started_at=None, finished_at=None, exception_message=None)
    cluster = _ScriptedCluster([{"row": running, "generations": {"127.0.0.2": 1}}])
    monkeypatch.setattr("ringward_cassandra.cql.build_cluster", lambda *a, **k: cluster)
    monkeypatch.setattr("ringward_airflow.triggers.accepts_connections", lambda *a, **k: True)
    [event] = _run(_trigger())
    assert "no longer in the ring" in event["sessions"][PARENT]["error"]  # type: ignore[index]


def test_a_trigger_logs_in_with_its_connection_and_stores_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a secured cluster the triggerer must log in (and speak TLS) as the task did; the serialized trigger
    (a row of Airflow's database) names the connection, never its password."""
    import json
    from datetime import datetime

    from airflow.sdk.bases.hook import BaseHook
    from airflow.sdk.definitions.connection import Connection

    secured = Connection(
        conn_id="cassandra_default", conn_type="cassandra", host="127.0.0.2,127.0.0.3", port=9142,
        login="ringward", password="s3cret-pw", extra=json.dumps({"ssl_options": {"ca_certs": "/ca.pem"}}),
    )  # fmt: skip

    async def aget_connection(conn_id: str) -> Connection:
        assert conn_id == "cassandra_default"
        return secured

    done = _Row(parent_id=PARENT, started_at=datetime(2026, 1, 1), finished_at=datetime(2026, 1, 1, 0, 1),
                exception_message=None)  # fmt: skip
    cluster = _ScriptedCluster([{"row": done, "generations": {"127.0.0.4": 1}}])
    built: list[dict[str, object]] = []
    monkeypatch.setattr(BaseHook, "aget_connection", staticmethod(aget_connection))
    monkeypatch.setattr("ringward_cassandra.cql.build_cluster", lambda **k: built.append(k) or cluster)
    trigger = _trigger(cassandra_conn_id="cassandra_default")
    [event] = _run(trigger)
    assert event["status"] == "finished"
    [settings] = built
    assert settings["contact_points"] == ["127.0.0.2", "127.0.0.3"] and settings["port"] == 9142
    assert (settings["username"], settings["password"]) == ("ringward", "s3cret-pw")
    assert settings["ssl_options"] == {"ca_certs": "/ca.pem"}
    _path, kwargs = trigger.serialize()
    assert kwargs["cassandra_conn_id"] == "cassandra_default" and "s3cret-pw" not in json.dumps(kwargs)
