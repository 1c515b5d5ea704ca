"""ringward_ops.repair_previews on Cassandra: what preview repairs found."""

from __future__ import annotations

from ringward.repair import PreviewFinding

from ringward_cassandra.ops._cql import OpsKeyspace
from ringward_cassandra.ops.layout import preview_columns, preview_finding

__all__ = ["CassandraPreviews"]

_COLUMNS = ("keyspace_name", "found_at", "table_name", "ranges", "out_of_sync_ranges", "run_id", "coordinator")


class CassandraPreviews:
    """`PreviewStorage` on Cassandra: per keyspace, latest first, each finding for the history TTL (or its own)."""

    def __init__(self, ops: OpsKeyspace) -> None:
        self.ops = ops

    def record_preview(self, finding: PreviewFinding, ttl_seconds: int | None = None) -> None:
        """Keep what a preview found (for `history_ttl`, like the history)."""
        ttl = self.ops.history_ttl_seconds if ttl_seconds is None else ttl_seconds
        columns = preview_columns(finding)
        names, marks = ", ".join(columns), ", ".join(["%s"] * len(columns))
        self.ops.write(f"INSERT INTO {self.ops.keyspace}.repair_previews ({names}) VALUES ({marks}) "
                       f"USING TTL {int(ttl)}", tuple(columns.values()))  # fmt: skip

    def preview_findings(self, keyspace: str | None = None) -> list[PreviewFinding]:
        """Preview findings (of one keyspace, or all), latest first; none before the table exists."""
        ops = self.ops
        if "repair_previews" not in ops.tables():
            return []
        if keyspace is None:
            rows = ops.read(f"SELECT * FROM {ops.keyspace}.repair_previews", ())
        else:
            rows = ops.read(f"SELECT * FROM {ops.keyspace}.repair_previews WHERE keyspace_name = %s", (keyspace,))
        found = [preview_finding({name: getattr(row, name, None) for name in _COLUMNS}) for row in rows]
        return sorted(found, key=lambda f: f.found_at, reverse=True)
