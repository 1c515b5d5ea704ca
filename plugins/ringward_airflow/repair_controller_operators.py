"""Other repair controllers during a migration (AutoRepair, Reaper), and the capacity precheck.

- `precheck_notes`: called by the migration's precheck: what AutoRepair and Reaper do on the cluster (for the
  approval), and the capacity check (refuses a node past its configured capacity).
- `PauseRepairControllersOperator`: after approval, before the first ALTER: saves every node's AutoRepair
  settings and the keyspace's active Reaper schedules in ringward_ops, then turns them off.
- `RestoreRepairControllersOperator`: at the end of the run, whatever happened (trigger rule all_done): sets
  back exactly what the pause saved; a restore that cannot run fails the task naming the node.

Decisions live in `ringward.repair_controllers` and `ringward.capacity`; this module reads and writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import Context
from airflow.sdk.bases.hook import BaseHook
from airflow.sdk.exceptions import AirflowSkipException
from ringward.capacity import CapacityReport, capacity_report, configured_capacities, parse_status_loads
from ringward.errors import ClusterError, ConfigurationError
from ringward.markdown import markdown_code, markdown_escape
from ringward.migration_record import MigrationRecord
from ringward.plan import MigrationPlan
from ringward.repair import NodeSizeEstimate
from ringward.repair._estimates import SizeIndex
from ringward.repair_controllers import (
    AutoRepairSettings,
    autorepair_pause_changes,
    autorepair_restore_changes,
    describe_autorepair,
    reaper_schedules_to_pause,
    reaper_schedules_to_resume,
    settings_from_json,
    settings_to_json,
)
from ringward_cassandra.cluster_repairs import node_size_estimates
from ringward_cassandra.nodetool import NodetoolClient
from ringward_cassandra.repair_controllers import ReaperClient, apply_autorepair_changes, read_autorepair

from ringward_airflow.migration_base import MigrationOperator, load_migration, stored_record
from ringward_airflow.migration_stages import hold_lease

__all__ = [
    "AUTOREPAIR",
    "REAPER",
    "REAPER_CONN_ID",
    "PauseRepairControllersOperator",
    "RestoreRepairControllersOperator",
    "capacity_check",
    "precheck_notes",
    "reaper_client",
]

AUTOREPAIR = "autorepair"
REAPER = "reaper"
REAPER_CONN_ID = "reaper_default"


def reaper_client(conn_id: str = REAPER_CONN_ID) -> tuple[ReaperClient, str | None] | None:
    """Reaper's client and the cluster name it knows this cluster by (extra `cluster_name`), None without
    the connection. Connection: host (with scheme, e.g. http://reaper), port, login/password when Reaper
    asks for them."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception:  # Airflow raises its not-found error (its class moved between versions)
        return None
    host = str(conn.host or "")
    if not host:
        raise ConfigurationError(
            f"The {conn_id} connection has no host.", "Set its host to Reaper's URL, e.g. http://reaper:8080."
        )
    base = host if "://" in host else f"{conn.schema or 'http'}://{host}"
    if conn.port:
        base = f"{base}:{conn.port}"
    cluster = conn.extra_dejson.get("cluster_name") or None
    return ReaperClient(base, conn.login or None, conn.password or None), cluster


def capacity_check(
    plan: MigrationPlan, session: Any, nodetool: NodetoolClient, config: Mapping[str, object] | None
) -> CapacityReport:
    """Bytes each node receives (size estimates of the keyspace) against its load and configured capacity;
    refuses (UnsafeChangeError) when a node would exceed its capacity."""
    capacities = configured_capacities(config, plan.ring)  # a bad configuration is refused first
    changes = plan.diff.affected()
    # Summed per table on each node (one row per table and node, as the nightly plan reads them): a node's
    # bytes spread over its primary ranges by width.
    rows: list[NodeSizeEstimate] = node_size_estimates(session, plan.keyspace) if changes else []
    if changes and not rows:
        # A fresh keyspace has no estimates until the periodic recalculation: ask for it once.
        for node in plan.ring.nodes:
            nodetool.run(node.address, ["refreshsizeestimates"], timeout=120.0)
        rows = node_size_estimates(session, plan.keyspace)
    index = SizeIndex(rows, plan.keyspace, (), plan.ring)
    loads = parse_status_loads(nodetool.checked(plan.ring.nodes[0].address, ["status"])) if changes else {}
    report = capacity_report(changes, lambda r: index.estimate(r)[0], loads, capacities, estimated=not index.empty)
    report.refuse_if_over()
    return report


def precheck_notes(
    context: Context,
    plan: MigrationPlan,
    session: Any,
    nodetool: NodetoolClient,
    connection_extra: Mapping[str, Any],
    reaper_conn_id: str = REAPER_CONN_ID,
) -> str:
    """Markdown for the approval: AutoRepair per node, Reaper schedules of the keyspace, capacity. Raises the
    capacity refusal. Capacities: the run's `node_capacity` param, else the cassandra connection's extra
    `capacity` ({node or datacenter: size})."""
    params = context.get("params") or {}
    config = params.get("node_capacity") or connection_extra.get("capacity") or None
    parts = [capacity_check(plan, session, nodetool, config).markdown()]
    parts.append(describe_autorepair(read_autorepair(nodetool, [n.address for n in plan.ring.nodes])))
    reaper = reaper_client(reaper_conn_id)
    if reaper is None:
        parts.append(f"**Reaper**: no `{reaper_conn_id}` connection; ringward did not look for Reaper schedules.")
    else:
        client, cluster = reaper
        active = reaper_schedules_to_pause(client.schedules(plan.keyspace, cluster), plan.keyspace, cluster)
        listed = ", ".join(markdown_escape(s.id) for s in active) or "none"
        parts.append(f"**Reaper**: active schedules of {markdown_code(plan.keyspace)}: {listed}; paused for the "
                     "migration.")  # fmt: skip
    return "\n\n".join(parts)


class PauseRepairControllersOperator(MigrationOperator):
    """Save, then turn off, AutoRepair on every node and the keyspace's active Reaper schedules.

    The saved state goes to ringward_ops before anything changes; a retry (or a resumed migration) keeps
    the first saved state, so the restore sets back what was there before the migration, not what an
    earlier try left.
    """

    def execute(self, context: Context) -> dict[str, Any]:
        record = load_migration(context, self.precheck_task_id)
        migration_id = record.migration_id
        nodes = [node.address for node in record.ring.nodes]
        nodetool = self._nodetool_client()
        try:
            store = self.cassandra.ops_store()
            hold_lease(store, record)  # the first stage after the approval, which may have come days later
            current = read_autorepair(nodetool, nodes)
            saved = store.controller_pause(migration_id, AUTOREPAIR)
            if saved is None or saved[1]:
                store.record_controller_pause(migration_id, AUTOREPAIR, settings_to_json(current))
                self.log.info("AutoRepair before the migration:\n%s", describe_autorepair(current))
            else:
                self.log.info("Keeping the AutoRepair settings an earlier try saved:\n%s",
                              describe_autorepair(settings_from_json(saved[0])))  # fmt: skip
            changes = autorepair_pause_changes(current)
            failures = apply_autorepair_changes(nodetool, changes)
            if failures:
                raise ClusterError(
                    "Could not turn AutoRepair off: " + "; ".join(failures) + ".",
                    "Check those nodes (up, JMX reachable) and clear this task; the restore task sets back what "
                    "was turned off already.",
                )
            still_on = [s for s in read_autorepair(nodetool, nodes) if s.active_types]
            if still_on:
                raise ClusterError(
                    "AutoRepair is still on after the pause: "
                    + "; ".join(f"{s.node}: {', '.join(s.active_types)}" for s in still_on)
                    + ".",
                    "Someone turned it on again meanwhile; find out who, then clear this task.",
                )
            for change in changes:
                self.log.info("AutoRepair paused: %s", change)
            paused_reaper = self._pause_reaper(store, migration_id, record.keyspace)
        finally:
            self._release()
        return {"autorepair_off": [str(c) for c in changes], "reaper_paused": paused_reaper}

    def _pause_reaper(self, store: Any, migration_id: str, keyspace: str) -> list[str]:
        reaper = reaper_client(self.reaper_conn_id)
        if reaper is None:
            self.log.info("No %s connection: no Reaper schedules to pause.", self.reaper_conn_id)
            return []
        client, cluster = reaper
        active = reaper_schedules_to_pause(client.schedules(keyspace, cluster), keyspace, cluster)
        saved = store.controller_pause(migration_id, REAPER)
        ids = sorted({s.id for s in active} | (set(saved[0]) if saved and not saved[1] else set()))
        store.record_controller_pause(migration_id, REAPER, ids)
        for schedule in active:
            client.set_state(schedule.id, "PAUSED")
            self.log.info("Reaper schedule %s of %s paused.", schedule.id, keyspace)
        return [s.id for s in active]


class RestoreRepairControllersOperator(MigrationOperator):
    """Set back what the pause saved: AutoRepair per node and type, Reaper schedules it paused.

    Runs at the end of every run (trigger rule all_done): after success, failure or a rollback. Nothing
    saved (no precheck plan, or the pause never ran): nothing to do. A node that cannot be restored fails the
    task, named, after every other node was restored."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", "all_done")
        super().__init__(**kwargs)

    def execute(self, context: Context) -> dict[str, Any]:
        stored = stored_record(context, self.precheck_task_id)
        if stored is None:
            raise AirflowSkipException("No precheck plan in this run: nothing was paused.")
        record = MigrationRecord.from_json(stored)
        migration_id = record.migration_id
        nodetool = self._nodetool_client()
        try:
            store = self.cassandra.ops_store()
            if store.controller_pause(migration_id, AUTOREPAIR) is None:
                # The pause never ran (approval rejected, or it failed before saving): nothing to restore. Skipped,
                # so the report after it is skipped too, as when the run stops before any step.
                raise AirflowSkipException(f"{migration_id} paused no repair controller: nothing to restore.")
            problems: list[str] = []
            restored = self._restore_autorepair(store, nodetool, migration_id, problems)
            resumed = self._resume_reaper(store, migration_id, record.keyspace, problems)
        finally:
            self._release()
        if problems:
            raise ClusterError(
                "The repair controllers paused by the migration were not all restored: " + "; ".join(problems),
                "Bring those nodes (or Reaper) back and clear this task; it sets back only what still differs.",
            )
        return {"autorepair_on": restored, "reaper_resumed": resumed}

    def _restore_autorepair(
        self, store: Any, nodetool: NodetoolClient, migration_id: str, problems: list[str]
    ) -> list[str]:
        saved = store.controller_pause(migration_id, AUTOREPAIR)
        if saved is None or saved[1]:
            self.log.info("AutoRepair: nothing paused by %s is left to restore.", migration_id)
            return []
        before = settings_from_json(saved[0])
        current: dict[str, AutoRepairSettings] = {}
        for settings in before:
            if not settings.available:
                continue
            try:
                current[settings.node] = read_autorepair(nodetool, [settings.node])[0]
            except ClusterError as error:
                self.log.error("AutoRepair of %s unreadable: %s", settings.node, error)
        reachable = [s for s in before if s.node in current]
        changes = autorepair_restore_changes(reachable, current)
        failures = apply_autorepair_changes(nodetool, changes)
        unreachable = sorted(s.node for s in before if s.available and s.node not in current)
        if unreachable:
            wanted = {s.node: ", ".join(s.active_types) or "nothing" for s in before}
            problems += [f"{node} did not answer (AutoRepair to set back on: {wanted[node]})" for node in unreachable]
        problems += failures
        for change in changes:
            self.log.info("AutoRepair restored: %s", change)
        if not unreachable and not failures:
            after = {s.node: s for s in read_autorepair(nodetool, [s.node for s in reachable])}
            left = autorepair_restore_changes(reachable, after)
            if left:
                problems.append("still different after the restore: " + ", ".join(map(str, left)))
            else:
                store.mark_controller_restored(migration_id, AUTOREPAIR)
        return [str(c) for c in changes]

    def _resume_reaper(self, store: Any, migration_id: str, keyspace: str, problems: list[str]) -> list[str]:
        saved = store.controller_pause(migration_id, REAPER)
        if saved is None or saved[1] or not saved[0]:
            return []
        reaper = reaper_client(self.reaper_conn_id)
        if reaper is None:
            problems.append(
                f"Reaper schedules {saved[0]} were paused, but the {self.reaper_conn_id} connection is gone"
            )
            return []
        client, cluster = reaper
        resumed = []
        try:
            schedules = client.schedules(keyspace, cluster)
            for schedule in reaper_schedules_to_resume(saved[0], schedules):
                client.set_state(schedule.id, "ACTIVE")
                resumed.append(schedule.id)
                self.log.info("Reaper schedule %s resumed.", schedule.id)
        except ClusterError as error:
            problems.append(f"Reaper: {error.problem}")
            return resumed
        store.mark_controller_restored(migration_id, REAPER)
        return resumed
