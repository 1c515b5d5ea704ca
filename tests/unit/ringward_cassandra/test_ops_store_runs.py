"""`ringward_ops.repair_runs` rows expire with the history TTL: the table is read whole (the Repair page, the night's
report), so it must hold one history window of runs, not every night since the cluster began. The real cluster
checks the TTL Cassandra keeps (tests/integration/test_ops_store_on_cluster.py)."""

from __future__ import annotations

from typing import Any

from ringward_cassandra.ops_store import OpsStore


class _RecordingSession:
    def __init__(self) -> None:
        self.statements: list[tuple[str, Any]] = []

    def execute(self, statement: Any, params: Any = None, *args: Any, **kwargs: Any) -> list[Any]:
        self.statements.append((getattr(statement, "query_string", str(statement)), params))
        return []


def test_a_run_row_is_written_with_the_stores_history_ttl() -> None:
    session = _RecordingSession()
    store = OpsStore(session, history_ttl_seconds=1234)
    store.record_repair_run("r1", "SUCCESS", {"segments": 2}, {"intensity": 1})
    (statement, params), *_ = [s for s in session.statements if "repair_runs" in s[0]]
    assert statement.startswith("INSERT INTO ringward_ops.repair_runs") and statement.endswith("USING TTL 1234")
    assert params[:2] == ("r1", "SUCCESS")

    store.history_ttl_seconds = 99  # the night's configured TTL reaches the runs' store too
    store.record_repair_run("r2", "PARTIAL", {}, {})
    assert session.statements[-1][0].endswith("USING TTL 99")
