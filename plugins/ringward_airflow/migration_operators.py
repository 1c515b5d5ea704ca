"""Operators of the `keyspace_migration` DAG. Thin: decisions live in include/ringward (plan, migration).

Each stage reads the precheck's record (XCom) and keeps its own progress in the ops keyspace, so a retried
or cleared task resumes where it stopped instead of starting over.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException
from ringward.cluster_health import refuse_mixed_versions
from ringward.errors import (
    ClusterError,
    ConfigurationError,
    MigrationError,
    RepairError,
    RingwardError,
    UnsafeChangeError,
    VerificationError,
)
from ringward.migration import (
    RANGES_PER_COMMAND,
    MigrationStep,
    RangeState,
    RecordedMigration,
    cleanup_nodes,
    migration_steps,
    migration_to_resume,
    pending,
    range_count,
    repair_segments,
    repair_waves,
)
from ringward.plan import MigrationPlan, build_plan
from ringward.repair import Progress, RepairCommand, Segment, backoff_delay, group_segments
from ringward.replication import DEFAULT_KEYSPACE_RF, Replication
from ringward.report import approval_markdown, migration_report_markdown, refusal_markdown, stage_seconds
from ringward.ring import Ring
from ringward.ring_sources import ring_from_json, ring_to_json
from ringward.safety import SYSTEM_KEYSPACES
from ringward.session_watch import await_participants
from ringward.svg import render_placement_svg
from ringward_cassandra.cql import accepts_connections, quote_identifier
from ringward_cassandra.nodetool import NodetoolClient
from ringward_cassandra.ops_store import OPS_KEYSPACE, JournalEntry, OpsStore
from ringward_cassandra.schema import (
    default_keyspace_rf,
    describe_schema_versions,
    keyspace_names,
    keyspace_replication,
    release_versions,
    schema_versions,
    table_gc_grace,
)

from ringward_airflow.hooks import NodetoolHook, RingwardCassandraHook
from ringward_airflow.repair_controller_operators import precheck_notes

__all__ = [
    "REFUSAL_KEY",
    "CleanupOperator",
    "KeyspaceAlterOperator",
    "MigrationPrecheckOperator",
    "MigrationRefusedOperator",
    "MigrationReportOperator",
    "PreviewVerifyOperator",
    "RangeRepairOperator",
    "load_record",
]

# XCom key under which a failed precheck leaves its refusal (problem, fix, Markdown) for the `refused` task.
REFUSAL_KEY = "refusal"
# Operators whose `summary` field is Markdown written by execute() (shown in the task's rendered fields).
_MARKDOWN_SUMMARY = {"summary": "md"}

_NAME = re.compile(r"^[A-Za-z0-9_]{1,48}$")
_DESCRIBERING = re.compile(r"start_token:(-?\d+), end_token:(-?\d+), endpoints:\[([^\]]*)\]")


def lease_resource(keyspace: str) -> str:
    return f"keyspace:{keyspace}"


def load_record(context: Context, precheck_task_id: str = "precheck") -> dict[str, Any]:
    record = context["ti"].xcom_pull(task_ids=precheck_task_id)
    if not record:
        raise MigrationError("The precheck left no plan for this run.", "Clear and rerun the precheck task.")
    return dict(record)


def record_plan(record: dict[str, Any]) -> tuple[Ring, list[MigrationStep]]:
    ring = ring_from_json(record["ring"])
    plan = build_plan(
        ring,
        record["old"],
        record["new"],
        keyspace=record["keyspace"],
        default_keyspace_rf=int(record.get("default_keyspace_rf") or DEFAULT_KEYSPACE_RF),
        keep_quorum=bool(record.get("keep_quorum", True)),
    )
    return ring, migration_steps(plan)


class _MigrationOperator(BaseOperator):
    """Connections and the precheck record, shared by every stage. Hooks are built in `execute`."""

    template_fields: Sequence[str] = ()

    def __init__(
        self,
        *,
        cassandra_conn_id: str = "cassandra_default",
        nodetool_conn_id: str = "ringward_nodetool",
        precheck_task_id: str = "precheck",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.cassandra_conn_id = cassandra_conn_id
        self.nodetool_conn_id = nodetool_conn_id
        self.precheck_task_id = precheck_task_id
        self._killed = threading.Event()
        self._nodetool: NodetoolClient | None = None

    def _cassandra(self) -> RingwardCassandraHook:
        return RingwardCassandraHook(self.cassandra_conn_id)

    def _nodetool_client(self) -> NodetoolClient:
        if self._nodetool is None:
            self._nodetool = NodetoolHook(self.nodetool_conn_id).client
        return self._nodetool

    def _close_nodetool(self) -> None:
        """Stop the client's resident JVM, if it started one (a later command starts another)."""
        if self._nodetool is not None:
            self._nodetool.close()

    def on_kill(self) -> None:
        # Airflow 3.3 lets execute() go on after SIGTERM: flag it and stop our nodetool processes.
        self._killed.set()
        if self._nodetool is not None:
            self._nodetool.terminate_all()

    def _raise_if_killed(self) -> None:
        if self._killed.is_set():
            raise MigrationError("The task was killed; it stopped what it had started.", "Clear the task to resume.")


def _schema_versions_text(session: Any) -> str:
    """Which node is on which schema version, for a refusal; the refusal must survive failing to read it."""
    try:
        return describe_schema_versions(schema_versions(session))
    except Exception as error:  # the driver raises several kinds; the refusal says why the versions are missing
        return f"versions unreadable: {error}"


class MigrationPrecheckOperator(_MigrationOperator):
    """Cluster health, the placement diff and safety analysis on the live ring, the keyspace lease.

    Returns the record later stages read: migration id, ring snapshot, old and new replication, steps, and
    `approval_md`, the plan as Markdown for the approver. Its rendered field `summary` shows that plan or,
    on a refusal, the problem and the fix (the refusal also goes to XCom under REFUSAL_KEY).
    """

    template_fields: Sequence[str] = (
        "keyspace", "replication", "client_read_consistency", "rollback_of", "plans_dir", "allow_quorum_gap",
        "summary",
    )  # fmt: skip
    template_fields_renderers = _MARKDOWN_SUMMARY
    overwrite_rtif_after_execution = True  # the UI's rendered fields show the summary written in execute

    def __init__(
        self,
        *,
        keyspace: str = "",
        replication: Any = None,
        client_read_consistency: str | None = None,
        plans_dir: str | None = None,
        rollback_of: str | None = None,
        allow_quorum_gap: Any = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.allow_quorum_gap = allow_quorum_gap  # stage keeping a replica per range only (see ringward.staging)
        self.keyspace = keyspace
        self.replication = replication
        self.rollback_of = rollback_of
        self.client_read_consistency = client_read_consistency
        self.plans_dir = plans_dir
        self.summary = ""

    def execute(self, context: Context) -> dict[str, Any]:
        try:
            record = self._precheck(context)
        except RingwardError as refusal:
            self._record_refusal(context, refusal)
            if isinstance(refusal, (ConfigurationError, UnsafeChangeError, MigrationError)):
                # A refusal is an answer, not a transient failure: fail at once instead of retrying.
                raise AirflowFailException(str(refusal)) from refusal
            raise  # e.g. an unhealthy cluster: retried, and the last try's refusal stands
        self.summary = str(record.get("approval_md") or record["summary"])
        return record

    def _record_refusal(self, context: Context, refusal: RingwardError) -> None:
        """The refusal as Markdown in the log, the rendered `summary` and XCom (for the `refused` task)."""
        target = f"`{self.keyspace}`" if self.keyspace else f"the rollback of `{self.rollback_of}`"
        self.summary = refusal_markdown(f"replication change of {target}", refusal.problem, refusal.fix)
        self.log.error("\n%s", self.summary)
        ti = context.get("ti")
        if ti is not None:
            ti.xcom_push(key=REFUSAL_KEY, value={"problem": refusal.problem, "fix": refusal.fix,
                                                 "kind": type(refusal).__name__, "markdown": self.summary})  # fmt: skip

    def _precheck(self, context: Context) -> dict[str, Any]:
        lease_owner = None
        if self.rollback_of:
            self.keyspace, self.replication, lease_owner = self._rollback_target(str(self.rollback_of))
        keyspace = _checked_keyspace(self.keyspace)
        if keyspace in SYSTEM_KEYSPACES:
            raise UnsafeChangeError(
                f"{keyspace} is a system keyspace: Cassandra manages its replication (or it is ringward's own).",
                "Migrate application keyspaces only.",
            )
        target = _parse_target(self.replication)
        migration_id = f"{keyspace}@{context['run_id']}"
        lease_owner = lease_owner or migration_id
        hook = self._cassandra()
        try:
            session = hook.session
            store = OpsStore(session)
            resumed = store.migration(migration_id) if store.exists() else None
            if resumed is not None:
                self.log.info("Resuming migration %s recorded earlier; its plan stands.", migration_id)
                return resumed
            if not self.rollback_of and store.exists():
                half_done = self._half_done(store, keyspace, target)
                if half_done is not None:
                    return self._resume(context, store, half_done)
            if keyspace not in keyspace_names(session):
                raise ConfigurationError(
                    f"Keyspace {keyspace!r} does not exist.", "Check the name (it is case-sensitive)."
                )
            ring = hook.ring()
            self._check_health(ring, hook)
            default_rf = default_keyspace_rf(session)  # a target without a factor may take it
            keep_quorum = not _truthy(self.allow_quorum_gap)
            plan = build_plan(
                ring,
                keyspace_replication(session, keyspace),  # refuses what Replication cannot express
                target,
                keyspace=keyspace,
                table_gc_grace_seconds=table_gc_grace(session, keyspace),
                client_consistency=self.client_read_consistency or None,
                known_keyspaces=keyspace_names(session),
                default_keyspace_rf=default_rf,
                keep_quorum=keep_quorum,
            )
            picture = self._show(plan, migration_id)
            steps = migration_steps(plan)
            # Capacity (may refuse), AutoRepair and Reaper, for the approval (see repair_controller_operators).
            notes = precheck_notes(context, plan, session, self._nodetool_client(), hook.connection_extra())
            # Only an accepted change writes anything (ringward_ops itself included).
            store = hook.ops_store()
            store.acquire_lease(lease_resource(keyspace), lease_owner, "keyspace_migration")
            record = {
                "migration_id": migration_id,
                "lease_owner": lease_owner,
                "rollback_of": self.rollback_of or None,
                "keyspace": keyspace,
                "ring": ring_to_json(ring),
                "old": plan.old.as_json(),
                "new": plan.new.as_json(),
                "requested": target.as_json(),  # as the form gave it: a re-trigger with it resumes
                "steps": [step.after.as_json() for step in steps],
                "affected_ranges": len(plan.affected),
                "total_ranges": plan.total_ranges,
                "summary": plan.summary(),
                "approval_md": f"{approval_markdown(plan, migration_id=migration_id, plan_picture=picture)}\n\n{notes}",
                "started_at": datetime.now(UTC).isoformat(),
                "dag_id": getattr(context.get("dag"), "dag_id", None),
                "run_id": context["run_id"],
                "deadline_seconds": plan.deadline_seconds,
                "default_keyspace_rf": default_rf,
                "keep_quorum": keep_quorum,
            }
            store.record_migration(migration_id, keyspace, json.dumps(record["old"]), json.dumps(record["new"]),
                                   "planned", record)  # fmt: skip
            return record
        finally:
            hook.close()
            self._close_nodetool()

    def _half_done(self, store: OpsStore, keyspace: str, target: Replication) -> dict[str, Any] | None:
        """The record of `keyspace`'s unfinished migration to `target`, None when there is none; a different
        target while one is unfinished is refused (`migration_to_resume`)."""
        recorded = {}
        for migration_id, state, updated_at, record in store.migrations_of(keyspace):
            recorded[migration_id] = (
                RecordedMigration(
                    migration_id, keyspace, state, Replication.parse(record.get("requested") or record["new"]),
                    lease_owner=str(record.get("lease_owner") or migration_id), updated_at=updated_at,
                ),
                record,
            )  # fmt: skip
        chosen = migration_to_resume((m for m, _ in recorded.values()), keyspace, target)
        return None if chosen is None else dict(recorded[chosen.migration_id][1], state=chosen.state)

    def _resume(self, context: Context, store: OpsStore, record: dict[str, Any]) -> dict[str, Any]:
        """Take over a half-done migration: same id, lease and plan; the stages skip what its journal holds."""
        earlier = None if record.get("run_id") == context["run_id"] else self._earlier_run_state(context, record)
        if earlier in {"running", "queued"}:
            raise MigrationError(
                f"Migration {record['migration_id']} is unfinished, and its run {record.get('run_id')} is still "
                f"{earlier}.",
                "Let that run go on (or mark it failed in the Airflow UI), then trigger again to resume.",
            )
        # The lease may have expired (48 h) while the migration sat half done: take it again, or learn who has it.
        store.acquire_lease(lease_resource(record["keyspace"]), record.get("lease_owner") or record["migration_id"],
                            "keyspace_migration")  # fmt: skip
        ring, steps = record_plan(record)
        left = _work_left(record, ring, steps, store)
        self.log.info("Resuming the unfinished migration %s:\n%s", record["migration_id"], "\n".join(left))
        # This run owns the migration now: a later resume asks Airflow about this run, not the first one.
        owned = dict(
            record, dag_id=getattr(context.get("dag"), "dag_id", record.get("dag_id")), run_id=context["run_id"]
        )
        owned.pop("state", None)
        store.record_migration(record["migration_id"], record["keyspace"], json.dumps(record["old"]),
                               json.dumps(record["new"]), record["state"], owned)  # fmt: skip
        resumed = dict(record, resumed_by=context["run_id"])
        resumed["approval_md"] = (
            f"## RESUMING the unfinished migration `{record['migration_id']}` (state {record['state']})\n\n"
            "What is left:\n\n"
            + "\n".join(f"- {line}" for line in left)
            + "\n\n---\n\nThe original plan:\n\n"
            + str(record.get("approval_md") or record.get("summary", ""))
        )
        resumed["summary"] = (
            f"RESUMING unfinished migration {record['migration_id']} (state {record['state']}): what is left:\n"
            + "\n".join(f"- {line}" for line in left)
            + "\n\nThe original plan:\n"
            + str(record.get("summary", ""))
        )
        return resumed

    def _earlier_run_state(self, context: Context, record: dict[str, Any]) -> str | None:
        """The state of the run that started `record`, when Airflow can tell (None: unknown)."""
        dag_id, run_id = record.get("dag_id"), record.get("run_id")
        ask = getattr(context["ti"], "get_dagrun_state", None)
        if not (dag_id and run_id and callable(ask)):
            self.log.warning("Cannot tell whether the run that started %s still runs.", record["migration_id"])
            return None
        try:
            return str(ask(dag_id=dag_id, run_id=run_id))
        except Exception as error:  # a deleted run: nothing runs it any more
            self.log.info("The run that started %s is not known to Airflow (%s).", record["migration_id"], error)
            return None

    def _rollback_target(self, migration_id: str) -> tuple[str, Any, str]:
        """Keyspace, the replication it had before `migration_id`, and that migration's lease owner."""
        hook = self._cassandra()
        try:
            store = hook.ops_store()
            original, state = store.migration(migration_id), store.migration_state(migration_id)
        finally:
            hook.close()
            self._close_nodetool()
        if original is None:
            raise ConfigurationError(
                f"No migration {migration_id!r} is recorded.",
                f"Give a migration id as the precheck logged it (SELECT migration_id FROM {OPS_KEYSPACE}.migrations).",
            )
        if state == "cleaned":
            raise MigrationError(
                f"Migration {migration_id} already ran cleanup: the former replicas no longer hold their data.",
                "Roll back is possible only until cleanup; run a new keyspace_migration to the old setting instead.",
            )
        return str(original["keyspace"]), original["old"], str(original.get("lease_owner") or migration_id)

    def _check_health(self, ring: Ring, hook: RingwardCassandraHook) -> None:
        refuse_mixed_versions(release_versions(hook.session))
        nodetool = self._nodetool_client()
        problems = []
        for node in ring.nodes:
            states = nodetool.status(node.address)
            down = {address: state for address, state in states.items() if state != "UN"}
            if down:
                problems.append(f"{node.address} sees {down}")
            if nodetool.is_streaming(node.address):
                problems.append(f"{node.address} is streaming (a bootstrap, decommission or move is running)")
        if not hook.session.cluster.control_connection.wait_for_schema_agreement(wait_time=60):
            problems.append(f"the nodes do not agree on the schema ({_schema_versions_text(hook.session)})")
        if problems:
            raise ClusterError(
                "The cluster is not healthy enough to change replication: " + "; ".join(problems) + ".",
                "Bring every node to UN, let streaming and schema changes settle (a node that stays on a "
                "schema version of its own: `nodetool resetlocalschema` on it), then retry the precheck.",
            )

    def _show(self, plan: MigrationPlan, migration_id: str) -> str | None:
        """Log the placement table and the plan; write the ring picture (its path, when written)."""
        self.log.info("Placement diff for %s:\n%s", plan.keyspace, plan.table())
        self.log.info("Plan:\n%s", plan.summary())
        if not self.plans_dir:
            return None
        folder = Path(self.plans_dir)
        folder.mkdir(parents=True, exist_ok=True)
        picture = folder / f"{migration_id.replace('/', '_').replace(':', '_')}.svg"
        picture.write_text(render_placement_svg(plan))
        self.log.info("Ring picture of the change: %s", picture)
        return str(picture)


class KeyspaceAlterOperator(_MigrationOperator):
    """`ALTER KEYSPACE` to step `step_index`'s replication; a no-op when already applied (retries)."""

    def __init__(self, *, step_index: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step_index = step_index

    def execute(self, context: Context) -> str:
        record = load_record(context, self.precheck_task_id)
        ring, steps = record_plan(record)
        step = steps[self.step_index - 1]
        keyspace = record["keyspace"]
        hook = self._cassandra()
        try:
            current = keyspace_replication(hook.session, keyspace)
            if _stored(current) == _stored(step.after):
                self.log.info("%s already has %s: nothing to alter.", keyspace, step.after.to_cql())
            elif _stored(current) != _stored(step.before):
                raise MigrationError(
                    f"{keyspace} has {current.to_cql()}, neither the step's start {step.before.to_cql()} nor its "
                    f"target {step.after.to_cql()}: someone else changed it.",
                    "Find out who changed the keyspace; rerun the migration from a fresh precheck.",
                )
            else:
                statement = f"ALTER KEYSPACE {quote_identifier(keyspace)} WITH replication = {step.after.to_cql()}"
                self.log.info("Step %d/%d: %s", step.index, step.count, statement)
                hook.session.execute(statement)
            if not hook.session.cluster.control_connection.wait_for_schema_agreement(wait_time=60):
                raise ClusterError(
                    "The ALTER is applied, but the nodes did not agree on the schema within 60 s: "
                    f"{_schema_versions_text(hook.session)}.",
                    "Retry this task (it does not alter twice); if a node stays on a version of its own, run "
                    "`nodetool resetlocalschema` on it first.",
                )
            self._confirm_ownership(ring, step, keyspace)
            hook.ops_store().set_migration_state(record["migration_id"], f"altered:{step.index}")
        finally:
            hook.close()
            self._close_nodetool()
        return step.after.to_cql()

    def _confirm_ownership(self, ring: Ring, step: MigrationStep, keyspace: str) -> None:
        """Every node must report the new replicas for every range (`nodetool describering`)."""
        _, expected = step.placements(ring)
        nodetool = self._nodetool_client()
        for node in ring.nodes:
            output = nodetool.checked(node.address, ["describering", keyspace])
            for start, end, endpoints in _DESCRIBERING.findall(output):
                reported = {e.strip() for e in endpoints.split(",") if e.strip()}
                wanted = set(expected.for_token(int(end)))
                if reported != wanted:
                    raise ClusterError(
                        f"{node.address} reports replicas {sorted(reported)} for ({start}, {end}], expected "
                        f"{sorted(wanted)}.",
                        "Wait for the schema change to reach every node, then retry the task.",
                    )
        self.log.info("Every node reports the new ownership of %s.", keyspace)


class RangeRepairOperator(_MigrationOperator):
    """Full repair of exactly the affected ranges of one step, before (`pre`) or after (`post`) its ALTER.

    Ranges with the same participants go in one repair command (one Cassandra session); a node takes part
    in one session at a time (waves of replica-disjoint commands); a failed command is retried with
    backoff; every range is journalled so a retry resumes. With `deferrable`, a wave's commands are started
    and a trigger waits for them, so a long repair holds no worker slot; the trigger fails the try as soon
    as a session's coordinator dies (restarted, left, unreachable) instead of waiting out the timeout.

    Before starting a session, the task waits (at most `node_wait_seconds`, logged) until every participant
    is UN as every other participant sees it and answers JMX and CQL: a session started with a node down
    fails at once ("Endpoint not alive"), which used to burn the retries while a node restarted.
    """

    template_fields: Sequence[str] = ("parallelism", "session_timeout", "deferrable", "node_wait_seconds")

    def __init__(
        self,
        *,
        step_index: int = 1,
        phase: str = "post",
        parallelism: int = 2,
        max_attempts: int = 3,
        session_timeout: float = 3600.0,
        retry_backoff: float = 5.0,
        deferrable: bool = False,
        poll_interval: float = 2.0,
        node_wait_seconds: float = 600.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.step_index = step_index
        self.node_wait_seconds = node_wait_seconds
        self._cql_port = 9042  # the connection's, read in execute
        self.phase = phase
        self.parallelism = parallelism
        self.max_attempts = max_attempts
        self.session_timeout = session_timeout
        self.retry_backoff = retry_backoff
        self.deferrable = deferrable
        self.poll_interval = poll_interval

    @property
    def stage(self) -> str:
        return f"{self.phase}_repair:{self.step_index}"

    def _plan(self, context: Context) -> tuple[dict[str, Any], list[Segment]]:
        record = load_record(context, self.precheck_task_id)
        ring, steps = record_plan(record)
        segments = repair_segments(ring, steps[self.step_index - 1], record["keyspace"], self.phase)  # type: ignore[arg-type]
        return record, segments

    def execute(self, context: Context) -> dict[str, Any]:
        self.parallelism, self.session_timeout = int(self.parallelism), float(self.session_timeout)
        self.deferrable, self.node_wait_seconds = _truthy(self.deferrable), float(self.node_wait_seconds)
        record, segments = self._plan(context)
        hook = self._cassandra()
        self._cql_port = hook.native_port()
        try:
            store = hook.ops_store()
            journal = {r: e.status for r, e in store.journal(record["migration_id"], self.stage).items()}
            todo = pending(segments, journal)
            waiting = {segment.range for segment in todo}
            done = [segment for segment in segments if segment.range not in waiting]
            self.log.info("%s: %s to repair, %s already done.", self.stage, range_count(todo),
                          range_count(done))  # fmt: skip
            if not todo:
                # "repaired" counts this call's sessions; "done" what the journal holds (a deferred repair's
                # last call finds everything done by the waves before it).
                return {"ranges": len(segments), "repaired": 0, "done": len(segments)}
            if self.deferrable:
                return self._start_wave(context, record, todo, hook)
            self._repair_blocking(record, todo, store)
        finally:
            hook.close()
            self._close_nodetool()
        return {"ranges": len(segments), "repaired": len(todo), "done": len(segments)}

    # -- blocking mode ----------------------------------------------------------------------------------
    def _repair_blocking(self, record: dict[str, Any], todo: list[Segment], store: OpsStore) -> None:
        progress = Progress(total=len(todo), unit="repair segments", label=self.stage)
        failures: list[str] = []
        failed_ranges = 0
        for wave in repair_waves(todo, self.parallelism):
            self._raise_if_killed()
            with ThreadPoolExecutor(max_workers=len(wave)) as pool:
                results = list(pool.map(lambda c: self._repair_one(record, c, store), wave))
            for command, error in zip(wave, results, strict=True):
                progress.advance(len(command.segments))
                if error:
                    failed_ranges += len(command.segments)
                    failures.append(f"{', '.join(map(str, command.ranges))} on {command.coordinator}: {error}")
            self.log.info(progress.line())
        self._raise_if_killed()
        if failures:
            raise RepairError(
                f"{failed_ranges} of {len(todo)} repair segments failed to repair: " + "; ".join(failures[:5]),
                "Bring the nodes named back to UN, then retry the task: finished ranges are skipped.",
            )

    def _repair_one(self, record: dict[str, Any], command: RepairCommand, store: OpsStore) -> str | None:
        """One command (ranges sharing their replicas), retried with backoff; every range is journalled."""
        nodetool = self._nodetool_client()
        last_error = ""
        for attempt in range(1, self.max_attempts + 1):
            if self._killed.is_set():
                return "task killed"
            self._await_participants(command.replicas)
            outcome = nodetool.repair(command.coordinator, command.keyspace, command.ranges,
                                      timeout=self.session_timeout)  # fmt: skip
            if self._killed.is_set():  # on_kill stopped nodetool; the session may still run on the node
                nodetool.abort_repairs(command.coordinator)
                return "task killed"
            status = RangeState.DONE if outcome.succeeded else RangeState.FAILED
            last_error = "" if outcome.succeeded else _last_line(outcome.output)
            for token_range in command.ranges:
                store.record_journal(
                    record["migration_id"],
                    JournalEntry(self.stage, token_range, status.value, command.coordinator, attempt,
                                 outcome.seconds, last_error),
                )  # fmt: skip
            if outcome.succeeded:
                return None
            self.log.warning("repair of %s failed (attempt %d): %s", command.describe(), attempt, last_error)
            if attempt < self.max_attempts:
                time.sleep(backoff_delay(attempt + 1, self.retry_backoff))
        return last_error or "failed"

    # -- deferrable mode --------------------------------------------------------------------------------
    def _start_wave(
        self, context: Context, record: dict[str, Any], todo: list[Segment], hook: RingwardCassandraHook
    ) -> dict[str, Any]:
        from ringward_airflow.triggers import RepairSessionTrigger

        wave = repair_waves(todo, self.parallelism)[0]
        nodetool = self._nodetool_client()
        self._await_participants(sorted({node for command in wave for node in command.replicas}))
        started: dict[str, RepairCommand] = {}
        store = hook.ops_store()
        for command in wave:
            parent_id = nodetool.start_repair(command.coordinator, command.keyspace, command.ranges)
            if parent_id is None:  # finished before we could follow it
                for token_range in command.ranges:
                    store.record_journal(record["migration_id"], JournalEntry(
                        self.stage, token_range, _state(True), command.coordinator, 1, 0.0, ""))  # fmt: skip
            else:
                started[parent_id] = command
        if not started:
            return self.execute(context)
        left = len(todo) - sum(len(c.segments) for c in wave)
        self.log.info("%s: started %d commands; %d repair segments left after this wave.", self.stage, len(wave),
                      left)  # fmt: skip
        self.defer(
            trigger=RepairSessionTrigger(
                contact_points=hook.contact_points(),
                parent_ids=list(started),
                port=self._cql_port,
                poll_interval=self.poll_interval,
                timeout_seconds=self.session_timeout,
                labels={
                    pid: {
                        "ranges": [[r.start, r.end] for r in c.ranges],
                        "coordinator": c.coordinator,
                        "replicas": list(c.replicas),
                    }
                    for pid, c in started.items()
                },
            ),
            method_name="execute_complete",
        )
        return {}  # not reached: defer() raises

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        from ringward.ring import TokenRange

        record = load_record(context, self.precheck_task_id)
        hook = self._cassandra()
        try:
            store = hook.ops_store()
            failed = []
            for parent_id, label in event.get("labels", {}).items():
                session = event.get("sessions", {}).get(parent_id, {})
                # A session that ended well counts whatever ended the wait (another one's death, the timeout).
                ok = bool(session.get("ok", False))
                error = "" if ok else session.get("error") or _unfinished(event.get("status"), self.session_timeout)
                ranges = [TokenRange(start, end) for start, end in label["ranges"]]
                for token_range in ranges:
                    store.record_journal(
                        record["migration_id"],
                        JournalEntry(self.stage, token_range, _state(ok), label["coordinator"], 1, 0.0, error),
                    )  # fmt: skip
                if not ok:
                    failed.append(f"{', '.join(map(str, ranges))} on {label['coordinator']}: {error}")
            if failed:
                raise RepairError(
                    f"{len(failed)} repair commands failed: " + "; ".join(failed[:5]),
                    "The task's retry waits for the nodes named to be back to UN and repairs only the ranges "
                    "not yet done; if retries run out, bring the nodes back and clear the task.",
                )
        finally:
            hook.close()
            self._close_nodetool()
        return self.execute(context)

    def _await_participants(self, nodes: Sequence[str]) -> None:
        await_participants(
            list(nodes),
            self._participant_problems,
            limit=self.node_wait_seconds,
            clock=time.monotonic,
            sleep=self._sleep_unless_killed,
            log=self.log.info,
            purpose=f"the {self.stage.replace(':', ' of step ')}",
        )

    def _participant_problems(self, nodes: Sequence[str]) -> dict[str, str]:
        """node -> why it cannot take part in a session now; ready nodes are left out."""
        self._raise_if_killed()
        nodetool = self._nodetool_client()
        problems: dict[str, str] = {}
        views: dict[str, dict[str, str]] = {}
        for node in nodes:
            try:
                views[node] = nodetool.status(node)
            except RingwardError as error:
                problems[node] = f"JMX does not answer ({_first_line(str(error))})"
        for node in nodes:
            if node in problems:
                continue
            seen = [(viewer, states.get(node, "absent")) for viewer, states in views.items()]
            wrong = [f"{state} as seen from {viewer}" for viewer, state in seen if state != "UN"]
            if wrong:
                problems[node] = ", ".join(wrong)
            elif not accepts_connections(node, self._cql_port):
                problems[node] = f"refuses CQL connections on port {self._cql_port}"
        return problems

    def _sleep_unless_killed(self, seconds: float) -> None:
        if self._killed.wait(seconds):
            self._raise_if_killed()


class PreviewVerifyOperator(_MigrationOperator):
    """`nodetool repair --preview --full` of the affected ranges (grouped as for repair): every replica in sync."""

    def __init__(self, *, step_index: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step_index = step_index

    def execute(self, context: Context) -> dict[str, Any]:
        record = load_record(context, self.precheck_task_id)
        ring, steps = record_plan(record)
        segments = repair_segments(ring, steps[self.step_index - 1], record["keyspace"], "post")
        nodetool = self._nodetool_client()
        out_of_sync = []
        try:
            for command in group_segments(segments, RANGES_PER_COMMAND):
                self._raise_if_killed()
                outcome = nodetool.repair(command.coordinator, command.keyspace, command.ranges, preview=True)
                if not outcome.succeeded or not outcome.in_sync:
                    ranges = ", ".join(map(str, command.ranges))
                    out_of_sync.append(f"{ranges} among {', '.join(command.replicas)}: {_last_line(outcome.output)}")
        finally:
            self._close_nodetool()
        if out_of_sync:
            raise VerificationError(
                f"Preview repair finds data out of sync in {len(out_of_sync)} commands: " + "; ".join(out_of_sync[:5]),
                "Do not run cleanup. Clear the repair task to repair these ranges again, then verify again.",
            )
        self.log.info("Preview repair: all %s in sync among their replicas.", range_count(segments))
        return {"preview_ranges_in_sync": len(segments)}


class CleanupOperator(_MigrationOperator):
    """Snapshot, then `nodetool cleanup` only on nodes that lost ranges, one node at a time."""

    def __init__(self, *, snapshot_before_cleanup: Any = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.snapshot_before_cleanup = snapshot_before_cleanup

    template_fields: Sequence[str] = ("snapshot_before_cleanup",)

    def execute(self, context: Context) -> list[str]:
        record = load_record(context, self.precheck_task_id)
        ring = ring_from_json(record["ring"])
        old, new = Replication.parse(record["old"]), Replication.parse(record["steps"][-1])
        nodes = cleanup_nodes(ring, old, new)
        nodetool = self._nodetool_client()
        tag = f"ringward-{record['migration_id']}".replace("@", "-").replace(":", "-").replace("+", "-")
        for address in nodes:
            self._raise_if_killed()
            if _truthy(self.snapshot_before_cleanup):
                self.log.info("snapshot %s of %s on %s", tag, record["keyspace"], address)
                nodetool.snapshot(address, record["keyspace"], tag)
            self.log.info("cleanup of %s on %s (it lost ranges)", record["keyspace"], address)
            nodetool.cleanup(address, record["keyspace"])
        skipped = sorted(set(ring.addresses()) - set(nodes))
        self.log.info("cleanup done on %s; untouched (lost nothing): %s", nodes, skipped)
        hook = self._cassandra()
        try:
            hook.ops_store().set_migration_state(record["migration_id"], "cleaned")
        finally:
            hook.close()
            self._close_nodetool()
        return nodes


class MigrationReportOperator(_MigrationOperator):
    """The migration's report; marks it done and releases the keyspace lease.

    Per-stage times come from Airflow's own task instances (the Task SDK's breadcrumbs: the last try of each
    task that ran); the total from the precheck record's `started_at`, which a cleared task does not reset.
    The report is Markdown in the log and in the rendered field `summary`; the return value (XCom) is JSON.
    """

    template_fields: Sequence[str] = ("summary",)
    template_fields_renderers = _MARKDOWN_SUMMARY
    overwrite_rtif_after_execution = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.summary = ""

    def execute(self, context: Context) -> dict[str, Any]:
        record = load_record(context, self.precheck_task_id)
        ti = context["ti"]
        order = _task_order(context["dag"])
        step_count = len(record["steps"])
        wanted = [t for t in order if not t.startswith("step_") or int(t.split(".")[0][5:]) <= step_count]
        finished = datetime.now(UTC)
        report: dict[str, Any] = {
            "migration_id": record["migration_id"],
            "keyspace": record["keyspace"],
            "from": record["old"],
            "to": record["new"],
            "steps": record["steps"],
            "ranges_moved": record["affected_ranges"],
            "total_ranges": record["total_ranges"],
            "started_at": record.get("started_at"),
            "finished_at": finished.isoformat(),
            "total_seconds": _seconds_since(record.get("started_at"), finished),
            "stage_seconds": self._stage_seconds(ti, context, order),
            "repairs": _pulled(ti, [t for t in wanted if t.endswith("repair")]),
            "verification": _pulled(ti, [t for t in wanted if "verify" in t]),
            "cleaned_nodes": ti.xcom_pull(task_ids="cleanup"),
        }
        report = {key: value for key, value in report.items() if value is not None}
        self.summary = migration_report_markdown(report)
        self.log.info("Migration report:\n%s", self.summary)
        hook = self._cassandra()
        try:
            store = hook.ops_store()
            store.set_migration_state(record["migration_id"], "done")
            store.release_lease(lease_resource(record["keyspace"]), record.get("lease_owner") or record["migration_id"])
        finally:
            hook.close()
            self._close_nodetool()
        return report

    def _stage_seconds(self, ti: Any, context: Context, order: list[str]) -> dict[str, float]:
        """Seconds of each task that ran, from Airflow's task instances (finished ones; this one is running)."""
        try:
            rows = list(ti.get_task_breadcrumbs(dag_id=ti.dag_id, run_id=context["run_id"]))
        except Exception as error:  # the report must not fail for want of timings; it says they are missing
            self.log.warning("Task-instance times unavailable (%s: %s); the report leaves them out.",
                             type(error).__name__, error)  # fmt: skip
            return {}
        return stage_seconds(rows, order)


class MigrationRefusedOperator(BaseOperator):
    """Runs only when the precheck failed (trigger rule `all_failed`); every other task was skipped.

    It ends the run failed with the precheck's refusal as its own error and rendered `summary`, so the run
    shows why nothing happened instead of a column of upstream_failed tasks.
    """

    template_fields: Sequence[str] = ("summary",)
    template_fields_renderers = _MARKDOWN_SUMMARY
    overwrite_rtif_after_execution = True

    def __init__(self, *, precheck_task_id: str = "precheck", **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", "all_failed")
        super().__init__(**kwargs)
        self.precheck_task_id = precheck_task_id
        self.summary = ""

    def execute(self, context: Context) -> None:
        refusal = context["ti"].xcom_pull(task_ids=self.precheck_task_id, key=REFUSAL_KEY)
        if refusal:
            self.summary = str(refusal["markdown"])
            message = "The precheck refused the change; nothing was changed.\n" + _refusal_text(refusal)
        else:
            self.summary = (
                "## The precheck failed\n\nIt stopped on an unexpected error, not a refusal: read the precheck "
                "task's log. Fix the cause, then clear the precheck task to check again."
            )
            message = "The precheck failed on an unexpected error (see its log); clear it to check again."
        self.log.error("\n%s", self.summary)
        raise AirflowFailException(message)


def _refusal_text(refusal: dict[str, Any]) -> str:
    from ringward.errors import format_refusal

    return format_refusal(str(refusal.get("problem", "")), str(refusal.get("fix", "")))


def _task_order(dag: Any) -> list[str]:
    """The DAG's task ids, upstream first (the order the report lists stages in)."""
    try:
        return [task.task_id for task in dag.topological_sort()]
    except AttributeError:  # a DAG-like object without it (the unit tests): its own order
        return list(dag.task_ids)


def _pulled(ti: Any, task_ids: list[str]) -> dict[str, Any]:
    """The return values of `task_ids` that ran and returned something (a skipped task leaves none)."""
    if not task_ids:
        return {}
    values = ti.xcom_pull(task_ids=task_ids)
    return {t: v for t, v in zip(task_ids, values or [], strict=False) if v is not None}


def _seconds_since(started_at: str | None, now: datetime) -> float | None:
    if not started_at:
        return None
    return round((now - datetime.fromisoformat(started_at)).total_seconds(), 1)


def _work_left(record: dict[str, Any], ring: Ring, steps: list[MigrationStep], store: OpsStore) -> list[str]:
    """One line per stage of each step: what the journal shows done and what is left."""
    state = str(record.get("state", ""))
    altered = int(state.split(":", 1)[1]) if state.startswith("altered:") else (len(steps) if state == "cleaned" else 0)
    lines = []
    for step in steps:
        parts = []
        for phase in ("pre", "post"):
            segments = repair_segments(ring, step, record["keyspace"], phase)  # type: ignore[arg-type]
            entries = store.journal(record["migration_id"], f"{phase}_repair:{step.index}")
            journal = {token_range: entry.status for token_range, entry in entries.items()}
            left = len(pending(segments, journal))
            name = "pre-repair" if phase == "pre" else "repair"
            parts.append(f"{name} of {range_count(segments)}: {len(segments) - left} of {len(segments)} segments done")
        alter = "ALTER applied" if step.index <= altered else f"ALTER to {step.after.to_cql()} not applied yet"
        lines.append(f"step {step.index}/{step.count}: {alter}; " + "; ".join(parts) + "; verification to run")
    lines.append("cleanup: done" if state == "cleaned" else "cleanup: to run (after verification)")
    return lines


def _checked_keyspace(name: Any) -> str:
    text = str(name or "").strip()
    if not _NAME.match(text):
        raise ConfigurationError(
            f"Keyspace name {text!r} is not a valid Cassandra keyspace name.",
            "Give the keyspace's name as stored: 1 to 48 letters, digits or underscores.",
        )
    return text


def _parse_target(value: Any) -> Replication:
    try:
        return Replication.parse(value if isinstance(value, (str, dict)) else json.dumps(value))
    except RingwardError:
        raise
    except Exception as error:  # anything a form can send that is not a replication map
        raise ConfigurationError(f"Replication {value!r} is malformed: {error}.",
                                 'Write e.g. {"class": "NetworkTopologyStrategy", "dc1": 3}.') from error  # fmt: skip


def _stored(replication: Replication) -> tuple[str, dict[str, int]]:
    """What Cassandra keeps of a setting: it drops datacenters given a factor of 0."""
    return replication.strategy, {dc: n for dc, n in replication.factors.items() if n}


def _state(ok: bool) -> str:
    return (RangeState.DONE if ok else RangeState.FAILED).value


def _unfinished(status: Any, session_timeout: float) -> str:
    if status == "timeout":
        return f"no result within the session timeout ({session_timeout:.0f} s)"
    return f"unfinished when the wait ended ({status})"


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:300]


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][-500:] if lines else "nodetool printed nothing"


def _truthy(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in {"1", "true", "yes", "on"}
