"""A repair command's parent session in system_distributed.parent_repair_history.

nodetool prints the parent id in its "Starting repair command #N (id)" line, which comes from a JMX
notification. Cassandra's RepairRunner only accepts notifications tagged with its command number, which it
learns when `repairAsync` returns: a START notification that arrives first is dropped (seen on the 2-core CI
box under load), and the outcome then has no parent id although the repair ran. The history still has the
session; it is found by keyspace and requested ranges.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from ringward.ring import TokenRange


def _ranges_text(ranges: Sequence[TokenRange]) -> set[str]:
    return {f"{r.start},{r.end}" for r in ranges}


def _as_set(texts: Any) -> set[str]:
    return {text.strip("(]").replace(" ", "") for text in texts or ()}


def parent_session(session: Any, keyspace: str, ranges: Sequence[TokenRange], parent_id: str | None) -> Any:
    """The history row of the repair of `ranges` of `keyspace`: by its parent id when nodetool printed it,
    else the newest row whose requested ranges are exactly these."""
    columns = "parent_id, keyspace_name, requested_ranges, successful_ranges, started_at, finished_at"
    if parent_id:
        return session.execute(
            f"SELECT {columns} FROM system_distributed.parent_repair_history WHERE parent_id = %s",
            (uuid.UUID(parent_id),),
        ).one()
    wanted = _ranges_text(ranges)
    rows = [
        row
        for row in session.execute(f"SELECT {columns} FROM system_distributed.parent_repair_history")
        if row.keyspace_name == keyspace and _as_set(row.requested_ranges) == wanted
    ]
    assert rows, f"no repair of {keyspace} {sorted(wanted)} in parent_repair_history"
    return max(rows, key=lambda row: row.started_at)


def repaired_ranges(row: Any) -> set[str]:
    return _as_set(row.successful_ranges)
