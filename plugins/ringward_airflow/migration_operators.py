"""Operators of the `keyspace_migration` DAG. Thin: decisions live in include/ringward (plan, migration,
migration_record), the work in `migration_stages` (health, lease and resume, ALTER, repair, preview, cleanup).

The precheck plans once and stores a `MigrationRecord`; every later task reads it (`load_migration`; the base
`MigrationOperator` and its cached hook are in `migration_base`), calls a stage and keeps its progress in the
ops keyspace, so a retried or cleared task resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException
from ringward.assets import asset_cluster
from ringward.errors import (
    ConfigurationError,
    MigrationError,
    RepairError,
    RingwardError,
    UnsafeChangeError,
)
from ringward.markdown import markdown_code, markdown_escape
from ringward.migration import (
    checked_keyspace,
    migration_steps,
    pending,
    range_count,
)
from ringward.migration_record import MigrationRecord, MigrationState
from ringward.plan import MigrationPlan, build_plan
from ringward.repair import Segment, migration_points
from ringward.replication import Replication
from ringward.report import migration_report_markdown, refusal_markdown, stage_seconds
from ringward.session_watch import await_participants
from ringward.text import log_safe
from ringward_cassandra.cql import accepts_connections
from ringward_cassandra.manual_procedure import refuse_read_only_release
from ringward_cassandra.ops_store import OpsStore
from ringward_cassandra.schema import (
    LiveCql,
    default_keyspace_rf,
    keyspace_names,
    keyspace_replication,
    table_gc_grace,
)

from ringward_airflow.assets import add_keyspace_events, migrated_alias
from ringward_airflow.governance import refuse_unpermitted, snapshot_wanted
from ringward_airflow.hooks import RingwardCassandraHook
from ringward_airflow.metrics import emit
from ringward_airflow.migration_base import MigrationOperator, load_migration, load_record
from ringward_airflow.migration_stages import (
    DEFAULT_PRECHECK_CHECKS,
    LEASE_PURPOSE,
    LEASE_RENEWAL_SECONDS,
    PrecheckCheck,
    PrecheckInput,
    RepairSettings,
    StageProgressWriter,
    StageResult,
    apply_step,
    check_health,
    clean_up,
    cluster_release_of,
    hold_lease,
    keep_stage_progress,
    lease_resource,
    participant_problems,
    preview_in_sync,
    record_session_outcomes,
    repair_ranges,
    rollback_target,
    run_precheck_checks,
    save_ring_picture,
    session_labels,
    start_wave,
    store_page_view,
    take_over,
    unfinished_migration,
)
from ringward_airflow.repair_controller_operators import precheck_notes
from ringward_airflow.step_gate import step_of

__all__ = [
    "REFUSAL_KEY",
    "CleanupOperator",
    "KeyspaceAlterOperator",
    "MigrationPrecheckOperator",
    "MigrationRefusedOperator",
    "MigrationRepairOperator",
    "MigrationReportOperator",
    "PreviewVerifyOperator",
]

# XCom key under which a failed precheck leaves its refusal (problem, fix, Markdown) for the `refused` task.
REFUSAL_KEY = "refusal"
# Operators whose `summary` field is Markdown written by execute() (shown in the task's rendered fields).
_MARKDOWN_SUMMARY = {"summary": "md"}


class MigrationPrecheckOperator(MigrationOperator):
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
        precheck_checks: Sequence[PrecheckCheck] = DEFAULT_PRECHECK_CHECKS,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.precheck_checks = tuple(precheck_checks)  # run on the accepted plan, before the lease (see stages)
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
        # The names are the form's, unchecked yet: code spans keep them text (a backtick cannot end the span).
        target = markdown_code(self.keyspace) if self.keyspace else f"the rollback of {markdown_code(self.rollback_of)}"
        self.summary = refusal_markdown(f"replication change of {target}", refusal.problem, refusal.fix)
        self.log.error("\n%s", self.summary)
        ti = context.get("ti")
        if ti is not None:
            ti.xcom_push(key=REFUSAL_KEY, value={"problem": refusal.problem, "fix": refusal.fix,
                                                 "kind": type(refusal).__name__, "markdown": self.summary})  # fmt: skip

    def _precheck(self, context: Context) -> dict[str, Any]:
        # First: a run setting that gives up a safety step needs the deployment's permission (before any cluster
        # access, a resumed run's included). The QUORUM gap as this task was given it.
        refuse_unpermitted({**dict(context.get("params") or {}), "allow_quorum_gap": self.allow_quorum_gap})
        lease_owner = None
        if self.rollback_of:
            self.keyspace, self.replication, lease_owner = self._rollback_target(str(self.rollback_of))
        keyspace = checked_keyspace(self.keyspace)  # before any cluster access: bad input changes nothing
        target = _parse_target(self.replication)
        migration_id = f"{keyspace}@{context['run_id']}"
        lease_owner = lease_owner or migration_id
        hook = self.cassandra
        try:
            session = hook.session
            store = OpsStore(session)
            resumed = store.migration(migration_id) if store.exists() else None
            if resumed is not None:
                self.log.info("Resuming migration %r recorded earlier; its plan stands.", migration_id)
                return resumed
            if not self.rollback_of and store.exists():
                unfinished = unfinished_migration(store, keyspace, target)
                if unfinished is not None:
                    return self._resume(context, store, unfinished)
            checked_keyspace(keyspace, known=keyspace_names(session))  # its existence: checked here only
            ring = hook.ring()
            cql = LiveCql(session)
            release = cluster_release_of(cql)  # the ALTER semantics the plan models
            default_rf = default_keyspace_rf(session)  # a target without a factor may take it
            keep_quorum = not _truthy(self.allow_quorum_gap)
            gc_grace = table_gc_grace(session, keyspace)
            plan = build_plan(
                ring,
                keyspace_replication(session, keyspace),  # refuses what Replication cannot express
                target,
                keyspace=keyspace,
                table_gc_grace_seconds=gc_grace,
                client_consistency=self.client_read_consistency or None,
                default_keyspace_rf=default_rf,
                keep_quorum=keep_quorum,
                release=release,
            )
            picture = self._show(plan, migration_id)
            steps = migration_steps(plan)
            # 3.11: refused here, with the commands to run by hand; before any nodetool command (untried on 3.11).
            refuse_read_only_release(release, plan, steps, sorted(gc_grace))
            check_health(ring, self._nodetool_client(), cql)
            run_precheck_checks(self.precheck_checks, PrecheckInput(keyspace, ring, plan, self._nodetool_client(), cql))
            # Capacity (may refuse), AutoRepair and Reaper, for the approval (see repair_controller_operators).
            notes = precheck_notes(
                context, plan, session, self._nodetool_client(), hook.connection_extra(), self.reaper_conn_id
            )
            # Only an accepted change writes anything (ringward_ops itself included).
            store = hook.ops_store()
            store.acquire_lease(lease_resource(keyspace), lease_owner, LEASE_PURPOSE)
            record = MigrationRecord.from_plan(
                plan, steps, migration_id=migration_id, requested=target,  # as the form gave it: a re-trigger resumes
                lease_owner=lease_owner, run_id=context["run_id"], started_at=datetime.now(UTC).isoformat(),
                rollback_of=self.rollback_of or None, dag_id=getattr(context.get("dag"), "dag_id", None),
                default_keyspace_rf=default_rf, keep_quorum=keep_quorum, plan_picture=picture,
            )  # fmt: skip
            record = dataclasses.replace(record, approval_md=f"{record.approval_md}\n\n{notes}")
            stored = record.to_json()
            store.record_migration(migration_id, keyspace, json.dumps(stored["old"]), json.dumps(stored["new"]),
                                   str(record.state), stored)  # fmt: skip
            not_stored = store_page_view(store, stored)
            if not_stored:
                self.log.warning("The Migration page's view of the plan was not stored (%s): the page builds it on "
                                 "its first request.", not_stored)  # fmt: skip
            return stored
        finally:
            self._release()

    def _resume(self, context: Context, store: OpsStore, unfinished: MigrationRecord) -> dict[str, Any]:
        """Take over a half-done migration: same id, lease and plan; the stages skip what its journal holds."""
        record, state = unfinished.to_json(), str(unfinished.state)
        earlier = None if unfinished.run_id == context["run_id"] else self._earlier_run_state(context, record)
        if earlier in {"running", "queued"}:
            raise MigrationError(
                f"Migration {unfinished.migration_id!r} is unfinished, and its run {unfinished.run_id!r} is still "
                f"{earlier}.",
                "Let that run go on (or mark it failed in the Airflow UI), then trigger again to resume.",
            )
        dag_id = getattr(context.get("dag"), "dag_id", None)
        left = take_over(unfinished, store, run_id=context["run_id"], dag_id=dag_id)
        self.log.info("Resuming the unfinished migration %r:\n%s", unfinished.migration_id, _log_lines(left))
        resumed = dict(record, resumed_by=context["run_id"])
        resumed["approval_md"] = (
            f"## RESUMING the unfinished migration {markdown_code(unfinished.migration_id)} "
            f"(state {markdown_code(state)})\n\n"
            "What is left:\n\n"
            + "\n".join(f"- {markdown_escape(line)}" for line in left)
            + "\n\n---\n\nThe original plan:\n\n"
            + (unfinished.approval_md or unfinished.summary)
        )
        resumed["summary"] = (
            f"RESUMING unfinished migration {unfinished.migration_id} (state {state}): what is left:\n"
            + "\n".join(f"- {line}" for line in left)
            + "\n\nThe original plan:\n"
            + unfinished.summary
        )
        return resumed

    def _earlier_run_state(self, context: Context, record: dict[str, Any]) -> str | None:
        """The state of the run that started `record`, when Airflow can tell (None: unknown)."""
        dag_id, run_id = record.get("dag_id"), record.get("run_id")
        ask = getattr(context["ti"], "get_dagrun_state", None)
        if not (dag_id and run_id and callable(ask)):
            self.log.warning("Cannot tell whether the run that started %r still runs.", record["migration_id"])
            return None
        try:
            return str(ask(dag_id=dag_id, run_id=run_id))
        except Exception as error:  # a deleted run: nothing runs it any more
            self.log.info("The run that started %r is not known to Airflow (%s).", record["migration_id"], error)
            return None

    def _rollback_target(self, migration_id: str) -> tuple[str, Any, str]:
        try:
            return rollback_target(self.cassandra.ops_store(), migration_id)
        finally:
            self._release()

    def _show(self, plan: MigrationPlan, migration_id: str) -> str | None:
        """Log the placement table and the plan; write the ring picture (its path, when written)."""
        # Names from the cluster (keyspace, datacenter, rack, address) stay on their line: escaped per line.
        self.log.info("Placement diff for %s:\n%s", log_safe(plan.keyspace), _log_lines(plan.table_lines()))
        self.log.info("Plan:\n%s", _log_lines(plan.summary_lines()))
        try:
            picture = save_ring_picture(plan, self.plans_dir, migration_id)
        except ConfigurationError as unsafe:  # a picture is a convenience: its folder never blocks the change
            self.log.warning("The ring picture was not written.\n%s", unsafe)
            return None
        if picture is None:
            return None
        self.log.info("Ring picture of the change: %s", picture)
        return str(picture)


class KeyspaceAlterOperator(MigrationOperator):
    """`ALTER KEYSPACE` to step `step_index`'s replication; a no-op when already applied (retries)."""

    def __init__(self, *, step_index: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step_index = step_index

    def execute(self, context: Context) -> str:
        record = load_migration(context, self.precheck_task_id)
        step = record.step(self.step_index)
        try:
            hold_lease(self.cassandra.ops_store(), record)
            apply_step(step, record.keyspace, record.ring, LiveCql(self.cassandra.session), self._nodetool_client(),
                       self.log.info)  # fmt: skip
            self.cassandra.ops_store().set_migration_state(record.migration_id, str(MigrationState.altered(step.index)))
        finally:
            self._release()
        return step.after.to_cql()


class MigrationRepairOperator(MigrationOperator):
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

    report_section = "repairs"

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

    def execute(self, context: Context) -> dict[str, Any]:
        self.parallelism, self.session_timeout = int(self.parallelism), float(self.session_timeout)
        self.deferrable, self.node_wait_seconds = _truthy(self.deferrable), float(self.node_wait_seconds)
        record = load_migration(context, self.precheck_task_id)
        segments = record.repair_segments(self.step_index, self.phase)  # type: ignore[arg-type]
        hook = self.cassandra
        self._cql_port = hook.native_port()
        try:
            store = hook.ops_store()
            hold_lease(store, record)  # each deferred wave comes back through here
            if self.deferrable:
                statuses = {r: e.status for r, e in store.journal(record.migration_id, self.stage).items()}
                todo = pending(segments, statuses)
                done = [segment for segment in segments if segment not in todo]
                self.log.info("%s: %s to repair, %s already done.", self.stage, range_count(todo), range_count(done))
                # each wave's call stores the stage's progress as the journal holds it (the page reads it)
                progress = StageProgressWriter(store, record.migration_id, self.stage, segments, statuses)
                progress.store(final=True)
                if todo:
                    return self._start_wave(context, record, todo, hook, progress)
                # a deferred repair's last call finds everything done by the waves before it
                return StageResult(len(segments), 0, len(segments)).as_json()
            settings = RepairSettings(self.parallelism, int(self.max_attempts), float(self.retry_backoff),
                                      self.session_timeout)  # fmt: skip
            renewed = [time.monotonic()]

            def await_ready(nodes: Sequence[str]) -> None:  # a long blocking stage renews between sessions
                if time.monotonic() - renewed[0] >= LEASE_RENEWAL_SECONDS:
                    hold_lease(store, record)
                    renewed[0] = time.monotonic()
                self._await_participants(nodes)

            return repair_ranges(
                segments, migration_id=record.migration_id, stage=self.stage, journal=store,
                nodetool=self._nodetool_client(), settings=settings, await_ready=await_ready,
                stop_requested=self._killed.is_set, log=self.log.info, sleep=self._sleep_unless_killed,
            ).as_json()  # fmt: skip
        finally:
            self._release()

    # -- deferrable mode --------------------------------------------------------------------------------
    def _start_wave(
        self, context: Context, record: MigrationRecord, todo: list[Segment], hook: RingwardCassandraHook,
        progress: StageProgressWriter | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        from ringward_airflow.triggers import RepairSessionTrigger

        started = start_wave(
            todo, parallelism=self.parallelism, migration_id=record.migration_id, stage=self.stage,
            journal=hook.ops_store(), nodetool=self._nodetool_client(), await_ready=self._await_participants,
            progress=progress,
        )  # fmt: skip
        if not started:  # every command finished before it could be followed: the next wave
            return self.execute(context)
        self.log.info("%s: started %d commands.", self.stage, len(started))
        self.defer(
            trigger=RepairSessionTrigger(
                contact_points=hook.contact_points(),
                parent_ids=list(started),
                port=self._cql_port,
                poll_interval=self.poll_interval,
                timeout_seconds=self.session_timeout,
                labels=session_labels(started),
                cassandra_conn_id=self.cassandra_conn_id,
            ),
            method_name="execute_complete",
        )
        return {}  # not reached: defer() raises

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        record = load_migration(context, self.precheck_task_id)
        try:
            store = self.cassandra.ops_store()
            try:
                record_session_outcomes(event, migration_id=record.migration_id, stage=self.stage, journal=store,
                                        session_timeout=float(self.session_timeout))  # fmt: skip
            except RepairError:  # the task fails here: its progress shows the failed sessions' ranges first
                segments = record.repair_segments(self.step_index, self.phase)  # type: ignore[arg-type]
                keep_stage_progress(store, record.migration_id, self.stage, segments)
                raise
        finally:
            self._release()
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
        return participant_problems(nodes, self._nodetool_client(), accepts_connections, self._cql_port)

    def _sleep_unless_killed(self, seconds: float) -> None:
        if self._killed.wait(seconds):
            self._raise_if_killed()


class PreviewVerifyOperator(MigrationOperator):
    """`nodetool repair --preview --full` of the affected ranges (grouped as for repair): every replica in sync."""

    report_section = "verification"

    def __init__(self, *, step_index: int = 1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step_index = step_index

    def execute(self, context: Context) -> dict[str, Any]:
        record = load_migration(context, self.precheck_task_id)
        segments = record.repair_segments(self.step_index, "post")
        try:
            hold_lease(self.cassandra.ops_store(), record)
            in_sync = preview_in_sync(segments, self._nodetool_client(), self._raise_if_killed, self.log.warning)
        finally:
            self._release()
        self.log.info("Preview repair: all %s in sync among their replicas.", range_count(segments))
        return {"preview_ranges_in_sync": in_sync}


class CleanupOperator(MigrationOperator):
    """Snapshot, then `nodetool cleanup` only on nodes that lost ranges, one node at a time."""

    def __init__(self, *, snapshot_before_cleanup: Any = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.snapshot_before_cleanup = snapshot_before_cleanup

    template_fields: Sequence[str] = ("snapshot_before_cleanup",)

    def execute(self, context: Context) -> list[str]:
        record = load_migration(context, self.precheck_task_id)
        try:
            hold_lease(self.cassandra.ops_store(), record)
            # Without a snapshot only where the deployment allows it (the precheck refused the run otherwise).
            snapshot = snapshot_wanted({"snapshot_before_cleanup": self.snapshot_before_cleanup})
            nodes = clean_up(record, self._nodetool_client(), snapshot=snapshot,
                             stop_check=self._raise_if_killed, log=self.log.info)  # fmt: skip
            self.cassandra.ops_store().set_migration_state(record.migration_id, str(MigrationState.cleaned()))
        finally:
            self._release()
        return nodes


class MigrationReportOperator(MigrationOperator):
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
        ran = [t for t in order if (step := step_of(t)) is None or step <= step_count]
        sections = _report_sections(context["dag"], ran)
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
            "repairs": _pulled(ti, sections.get("repairs", [])),
            "verification": _pulled(ti, sections.get("verification", [])),
            "cleaned_nodes": ti.xcom_pull(task_ids="cleanup"),
        }
        report = {key: value for key, value in report.items() if value is not None}
        self.summary = migration_report_markdown(report)
        self.log.info("Migration report:\n%s", self.summary)
        try:
            store = self.cassandra.ops_store()
            store.set_migration_state(record["migration_id"], str(MigrationState.done()))
            finished_event = {"migration_id": record["migration_id"], "from": report["from"], "to": report["to"]}
            # cassandra://<declared name, else the CQL connection id>/<keyspace>
            authority = asset_cluster(self.cluster, self.cassandra_conn_id)
            add_keyspace_events(context, migrated_alias(self.cluster), authority, [record["keyspace"]], finished_event)
            emit(migration_points(self.metrics_cluster, report, finished))  # tagged metrics
            store.release_lease(lease_resource(record["keyspace"]), record.get("lease_owner") or record["migration_id"])
        finally:
            self._release()
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


def _report_sections(dag: Any, task_ids: list[str]) -> dict[str, list[str]]:
    """The tasks of each report section, by what each operator declares (`report_section`), in `task_ids` order."""
    sections: dict[str, list[str]] = {}
    for task_id in task_ids:
        section = getattr(dag.get_task(task_id), "report_section", None)
        if section:
            sections.setdefault(section, []).append(task_id)
    return sections


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


def _parse_target(value: Any) -> Replication:
    try:
        return Replication.parse(value if isinstance(value, (str, dict)) else json.dumps(value))
    except RingwardError:
        raise
    except Exception as error:  # anything a form can send that is not a replication map
        raise ConfigurationError(f"Replication {value!r} is malformed: {error}.",
                                 'Write e.g. {"class": "NetworkTopologyStrategy", "dc1": 3}.') from error  # fmt: skip


def _truthy(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in {"1", "true", "yes", "on"}


def _log_lines(lines: list[str]) -> str:
    """Lines for one log record: each escaped (`log_safe`), joined by the line breaks the text itself means."""
    return "\n".join(log_safe(line) for line in lines)
