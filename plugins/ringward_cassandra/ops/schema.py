"""ringward_ops' tables (the DDL), and the store that creates the missing ones."""

from __future__ import annotations

from collections.abc import Iterable

from ringward.permissions import OPS_KEYSPACE, ops_keyspace_statement

from ringward_cassandra.ops._cql import OpsKeyspace

__all__ = ["ADDED_LATER", "LEGACY_HISTORY", "SCHEMA", "TABLES", "TABLE_ORDER", "CassandraOpsSchema", "table_ddl"]

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS {ks}.leases (
        resource text PRIMARY KEY, owner text, purpose text, acquired_at timestamp)""",
    """CREATE TABLE IF NOT EXISTS {ks}.migration_journal (
        migration_id text, step text, range_start bigint, range_end bigint,
        status text, coordinator text, attempts int, seconds double, detail text, updated_at timestamp,
        PRIMARY KEY ((migration_id), step, range_start, range_end))""",
    """CREATE TABLE IF NOT EXISTS {ks}.migrations (
        migration_id text PRIMARY KEY, keyspace_name text, old_replication text, new_replication text,
        state text, plan text, updated_at timestamp)""",
    # Which migrations a DAG run stored (`migration_run_keys`): the Migration page reads one partition and those
    # rows of migrations, not the whole table (each row holds a ring).
    """CREATE TABLE IF NOT EXISTS {ks}.migration_runs (
        dag_id text, run_id text, migration_id text, recorded_at timestamp,
        PRIMARY KEY ((dag_id, run_id), migration_id))""",
    # The Migration page's view of a migration's plan (`ringward.migration_page_codec`), built and stored by the
    # precheck that stored the record, so an API server reads it instead of planning (seconds of CPU at fleet
    # size): `version` names the record it is of (`view_version`), `chunk` orders its rows of at most
    # PAGE_CHUNK_BYTES. Written with the history TTL; a view not found is built by the page.
    """CREATE TABLE IF NOT EXISTS {ks}.migration_pages (
        migration_id text, version text, chunk int, data blob,
        PRIMARY KEY ((migration_id, version), chunk))""",
    # Each repair stage's progress (`ringward.migration_progress`): one status byte per segment (zlib), its done
    # and failed counts, the digest of the segments it is of. Written by the worker that writes the stage's journal,
    # read by the Migration page instead of the journal (it then reads the journal entries of its window only).
    """CREATE TABLE IF NOT EXISTS {ks}.migration_progress (
        migration_id text, step text, segments text, segment_count int, done int, failed int, statuses blob,
        updated_at timestamp,
        PRIMARY KEY ((migration_id), step))""",
    """CREATE TABLE IF NOT EXISTS {ks}.repair_runs (
        run_id text PRIMARY KEY, state text, summary text, config text, updated_at timestamp)""",
    # The nightly repair's pause switch, pressed in the UI: every press is a row (who, when, why); the latest
    # row of a switch is its state. The repair task reads it between segments.
    """CREATE TABLE IF NOT EXISTS {ks}.repair_switch (
        name text, changed_at timestamp, paused boolean, changed_by text, reason text,
        PRIMARY KEY ((name), changed_at)) WITH CLUSTERING ORDER BY (changed_at DESC)""",
    # What a migration's pause found of another repair controller (AutoRepair settings, paused Reaper
    # schedules), written before it changes anything, so the restore sets back exactly that, even after a crash.
    """CREATE TABLE IF NOT EXISTS {ks}.controller_pauses (
        migration_id text, controller text, saved text, paused_at timestamp, restored_at timestamp,
        PRIMARY KEY ((migration_id), controller))""",
    # Repair history, one partition per (keyspace, tables, bucket): `bucket` is the top 8 bits of the range's
    # start token (history_bucket), so a 256k-range keyspace makes 256 partitions of ~1,000 rows per unit, and
    # a plan chunk reads only the partitions it touches. Every write carries a TTL (history_ttl): the rows of
    # ranges no longer planned (nodes that left) expire instead of piling up.
    """CREATE TABLE IF NOT EXISTS {ks}.repair_segments (
        keyspace_name text, table_names text, bucket int, range_start bigint, range_end bigint,
        last_success timestamp, last_full_success timestamp, last_attempt timestamp, attempts int,
        last_error text, seconds double, run_id text, state text, started_at timestamp, finished_at timestamp,
        coordinator text, replicas text, updated_at timestamp,
        PRIMARY KEY ((keyspace_name, table_names, bucket), range_start, range_end))""",
    # The history of the other repair types (incremental, preview, paxos): the same rows, the type in the partition
    # key, so each type has its own cadence and a preview never moves the full repair's.
    """CREATE TABLE IF NOT EXISTS {ks}.repair_type_segments (
        repair_type text, keyspace_name text, table_names text, bucket int, range_start bigint, range_end bigint,
        last_success timestamp, last_full_success timestamp, last_attempt timestamp, attempts int,
        last_error text, seconds double, run_id text, state text, started_at timestamp, finished_at timestamp,
        coordinator text, replicas text, updated_at timestamp,
        PRIMARY KEY ((repair_type, keyspace_name, table_names, bucket), range_start, range_end))""",
    # A nightly run's plan: its repair commands (opaque JSON) in priority order, PLAN_CHUNK_ROWS per partition,
    # PLAN_PAGE_COMMANDS per row (one line each); XCom carries only a reference (run id, chunk count).
    """CREATE TABLE IF NOT EXISTS {ks}.repair_plan (
        run_id text, chunk int, position int, command text,
        PRIMARY KEY ((run_id, chunk), position))""",
    # What preview repairs found: per keyspace, latest first, one row per (command, table) out of sync. The Repair
    # page shows them; a preview never counts as a repair (its history is its own type's).
    """CREATE TABLE IF NOT EXISTS {ks}.repair_previews (
        keyspace_name text, found_at timestamp, table_name text, range_start bigint, ranges text,
        out_of_sync_ranges int, run_id text, coordinator text,
        PRIMARY KEY ((keyspace_name), found_at, table_name, range_start))
        WITH CLUSTERING ORDER BY (found_at DESC, table_name ASC, range_start ASC)""",
    # A running run's live progress (one row per top-level key of the progress mapping, JSON values).
    """CREATE TABLE IF NOT EXISTS {ks}.repair_progress (
        run_id text, name text, value text, updated_at timestamp,
        PRIMARY KEY ((run_id), name))""",
]

TABLE_ORDER = [statement.split("{ks}.", 1)[1].split(" ", 1)[0] for statement in SCHEMA]
TABLES = set(TABLE_ORDER)
# Tables added after the first release: a keyspace without them is still ringward's (an older version's); they
# are created by the next ensure_schema, and readers of them treat their absence as "nothing recorded".
ADDED_LATER = {
    "repair_switch", "controller_pauses", "repair_segments", "repair_plan", "repair_progress", "repair_previews",
    "repair_type_segments", "migration_runs", "migration_pages", "migration_progress",
}  # fmt: skip
# The history table of the first layout (one partition per keyspace, never pruned). No longer created or written;
# on a cluster upgraded from that layout it is read until its rows are rewritten in repair_segments.
LEGACY_HISTORY = "repair_history"


def table_ddl(table: str, keyspace: str) -> str:
    """The CREATE TABLE IF NOT EXISTS of one of the store's tables in `keyspace`."""
    return SCHEMA[TABLE_ORDER.index(table)].format(ks=keyspace)


class CassandraOpsSchema:
    """The keyspace and its tables: created when missing, cheap to check every time."""

    def __init__(self, ops: OpsKeyspace) -> None:
        self.ops = ops

    def ensure_schema(self, datacenters: Iterable[tuple[str, int]]) -> set[str]:
        """Create the keyspace (NTS, up to RF 3 per DC) and the missing tables; cheap to call every time.

        One read of system_schema when nothing is missing (no DDL, no schema agreement wait). The keyspace is
        created only when it is missing: on a cluster with authorization an administrator creates it
        (`ringward grants`) and ringward's role, which may not create keyspaces, only its tables. Returns the
        names of the tables it created.
        """
        ops = self.ops
        tables = ops.table_names()
        if not tables and not ops.keyspace_exists():
            statement = ops_keyspace_statement(dict(datacenters)).rstrip(";")
            ops.session.execute(statement.replace(f" {OPS_KEYSPACE} ", f" {ops.keyspace} ", 1))
        missing = [(name, statement) for name, statement in zip(TABLE_ORDER, SCHEMA, strict=True)
                   if name not in tables]  # fmt: skip
        for _, statement in missing:
            ops.session.execute(statement.format(ks=ops.keyspace))
        if missing:
            ops.session.cluster.control_connection.wait_for_schema_agreement(wait_time=30)
        ops.known_tables = tables | {name for name, _ in missing}
        return {name for name, _ in missing}  # the tables created (a new index is filled by the facade)

    def exists(self) -> bool:
        """Whether ringward_ops and its tables have been created (reading it must not create it: refusals
        change nothing). The keyspace alone is not enough: an administrator creates it before the GRANTs,
        ringward its tables on first use. Tables added by later versions are not required (an upgraded
        cluster's store exists before its next ensure_schema)."""
        self.ops.known_tables = None
        return self.ops.tables() >= TABLES - ADDED_LATER
