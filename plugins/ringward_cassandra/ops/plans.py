"""ringward_ops.repair_plan on Cassandra: a nightly run's plan, PLAN_CHUNK_ROWS commands a partition."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ringward_cassandra.ops._cql import WRITE_CONCURRENCY, OpsKeyspace
from ringward_cassandra.ops.layout import check_chunk, plan_pages

__all__ = ["CassandraRunPlans"]


class CassandraRunPlans:
    """`RunPlanStorage` on Cassandra: chunk i of a run's plan in partition (run_id, i), PLAN_PAGE_COMMANDS a row."""

    def __init__(self, ops: OpsKeyspace) -> None:
        self.ops = ops

    def save_run_plan(self, run_id: str, chunks: Iterable[Sequence[str]], ttl_seconds: int | None = None) -> int:
        """Store a run's plan: chunk i's commands (opaque strings, in order) in partition (run_id, i), at most
        PLAN_CHUNK_ROWS each, with concurrent inserts. Returns the chunk count (what the XCom reference holds).

        A chunk is emptied before it is written, so a retried plan task never leaves rows of an earlier,
        longer plan behind."""
        from cassandra.concurrent import execute_concurrent_with_args

        ops = self.ops
        ttl = ops.history_ttl_seconds if ttl_seconds is None else int(ttl_seconds)
        insert = ops.statement(f"INSERT INTO {ops.keyspace}.repair_plan (run_id, chunk, position, command) "
                               f"VALUES (?, ?, ?, ?) USING TTL {ttl}")  # fmt: skip
        clear = ops.statement(f"DELETE FROM {ops.keyspace}.repair_plan WHERE run_id = ? AND chunk = ?")
        count = 0
        for index, chunk in enumerate(chunks):
            commands = list(chunk)
            check_chunk(run_id, index, commands)
            ops.session.execute(clear, (run_id, index))
            rows = [(run_id, index, page, text) for page, text in enumerate(plan_pages(commands))]
            if rows:
                execute_concurrent_with_args(ops.session, insert, rows, concurrency=WRITE_CONCURRENCY,
                                             raise_on_first_error=True)  # fmt: skip
            count += 1
        return count

    def run_plan_chunk(self, run_id: str, chunk: int) -> list[str]:
        """The commands of chunk `chunk` of run `run_id`'s plan, in position order ([] when none is stored)."""
        rows = self.ops.session.execute(
            self.ops.statement(f"SELECT command FROM {self.ops.keyspace}.repair_plan WHERE run_id = ? AND chunk = ?"),
            (run_id, int(chunk)),
        )
        return [command for row in rows for command in str(row.command).split("\n")]

    def drop_run_plan(self, run_id: str, chunks: int) -> None:
        """Delete chunks 0..`chunks`-1 of run `run_id`'s plan (the run is over: its plan is not read again)."""
        delete = self.ops.statement(f"DELETE FROM {self.ops.keyspace}.repair_plan WHERE run_id = ? AND chunk = ?")
        for index in range(int(chunks)):
            self.ops.session.execute(delete, (run_id, index))
