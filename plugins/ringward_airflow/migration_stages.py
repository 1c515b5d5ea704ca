"""The migration's stages as plain functions over narrow interfaces to the cluster (no Airflow here).

The operators in `migration_operators` read the precheck's `MigrationRecord`, build the real clients and
call these; the unit tests call them with in-memory fakes. Each interface names only what a stage uses:
`Journal` (the ops keyspace's migration journal), `Cql` (replication, ALTER, schema agreement), `Nodetool`
(status, streaming, describering, repair, snapshot, cleanup).

Stages, in the order the DAG runs them: `cluster_release_of` (then the plan; a release ringward only plans
for is refused there, `ringward_cassandra.manual_procedure`), `check_health`, the `PrecheckCheck`s and, for
an unfinished migration, `unfinished_migration` + `take_over` (precheck; `lease_resource` names its lease),
`apply_step` (ALTER + ownership confirmation), `repair_ranges` (blocking) or `start_wave` +
`record_session_outcomes` (deferred), `preview_in_sync`, `clean_up`.

Range repair runs through the nightly executor (`ringward.repair.run_batch`): the same wave rule (a node in
one session at a time), retries with backoff and kill handling; the journal writes are its `save` effect,
so a retried or cleared task repairs only what the journal does not hold as done.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from ringward.cassandra_release import CassandraRelease, cluster_release
from ringward.cluster_health import refuse_mixed_versions
from ringward.errors import (
    ClusterError,
    ConfigurationError,
    MigrationError,
    RepairError,
    RingwardError,
    VerificationError,
)
from ringward.migration import (
    RANGES_PER_COMMAND,
    MigrationStep,
    RangeState,
    RecordedMigration,
    cleanup_nodes,
    migration_to_resume,
    pending,
    range_count,
    repair_waves,
)
from ringward.migration_page_codec import stored_view, view_chunks
from ringward.migration_progress import ProgressTally, StageProgress
from ringward.migration_record import MigrationPhase, MigrationRecord, MigrationState
from ringward.migration_storage import JournalEntry
from ringward.plan import MigrationPlan
from ringward.private_files import private_folder, write_private
from ringward.repair import (
    BatchEffects,
    RecordUpdate,
    RepairCommand,
    RepairConfig,
    Segment,
    SegmentState,
    SessionResult,
    group_segments,
    run_batch,
)
from ringward.replication import Replication
from ringward.ring import Ring, TokenRange
from ringward.svg import render_placement_svg
from ringward_cassandra.nodetool import RepairOutcome

__all__ = [
    "DEFAULT_PRECHECK_CHECKS",
    "Cql",
    "Journal",
    "Nodetool",
    "PrecheckCheck",
    "PrecheckInput",
    "RepairNodetool",
    "RepairSettings",
    "StageProgressWriter",
    "StageResult",
    "apply_step",
    "check_health",
    "clean_up",
    "cluster_release_of",
    "confirm_ownership",
    "hold_lease",
    "journalled_pending",
    "keep_stage_progress",
    "lease_resource",
    "participant_problems",
    "preview_in_sync",
    "record_session_outcomes",
    "repair_ranges",
    "rollback_target",
    "run_precheck_checks",
    "save_ring_picture",
    "session_labels",
    "start_wave",
    "store_page_view",
    "take_over",
    "unfinished_migration",
    "work_left",
]


class Journal(Protocol):
    """The migration journal in `ringward_ops`: one entry per (stage, range)."""

    def journal(self, migration_id: str, step: str) -> dict[TokenRange, JournalEntry]: ...

    def record_journal(self, migration_id: str, entry: JournalEntry) -> None: ...


class ProgressJournal(Journal, Protocol):
    """A journal that keeps each stage's progress beside it (`ringward.migration_progress`)."""

    def record_stage_progress(self, migration_id: str, progress: StageProgress) -> None: ...


PROGRESS_INTERVAL = 2.0  # seconds: a running stage's progress is stored at most this often, and when it ends


class StageProgressWriter:
    """Keeps a stage's progress row beside its journal, for the Migration page (which then reads the journal
    entries of its window only): built from the stage's journal as the worker read it when it started, updated with
    every entry the worker writes (`journalled`), stored when it starts, at most every `PROGRESS_INTERVAL` while
    it runs, and when it stops (`store(final=True)`). The page's counts and order are thus at most that old, as its
    rows' own entries are not: it reads those from the journal. A journal without progress (a store from before
    migration_progress; a test's) keeps none: the page reads the whole journal then.

    A failed write raises, as a failed journal write does (the same keyspace): the task's retry stores the
    progress again from the journal when it starts."""

    def __init__(
        self, journal: Journal, migration_id: str, stage: str, segments: Sequence[Segment],
        statuses: Mapping[TokenRange, str], clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.migration_id = migration_id
        self.clock = clock
        self._record = getattr(journal, "record_stage_progress", None)
        self._tally = ProgressTally(stage, [s.range for s in segments], statuses) if self._record else None
        self._stored_at: float | None = None
        self._lock = threading.Lock()  # the executor's sessions may journal from their threads

    def journalled(self, entry: JournalEntry) -> None:
        if self._tally is not None:
            with self._lock:
                self._tally.update(entry.range, entry.status)

    def store(self, *, final: bool = False) -> None:
        """Store the progress: now when `final` or never stored yet, else when `PROGRESS_INTERVAL` has passed."""
        if self._record is None or self._tally is None:
            return
        with self._lock:
            now = self.clock()
            if not final and self._stored_at is not None and now - self._stored_at < PROGRESS_INTERVAL:
                return
            self._stored_at = now
            progress = self._tally.progress(datetime.now(UTC))
        self._record(self.migration_id, progress)


def keep_stage_progress(journal: Journal, migration_id: str, stage: str, segments: Sequence[Segment]) -> None:
    """Store `stage`'s progress as its journal holds it now (the deferred repair's calls, each after its journal
    writes: it reads the stage's journal, on the worker)."""
    if getattr(journal, "record_stage_progress", None) is None:
        return
    statuses = {token_range: entry.status for token_range, entry in journal.journal(migration_id, stage).items()}
    StageProgressWriter(journal, migration_id, stage, segments, statuses).store(final=True)


class RepairNodetool(Protocol):
    """The nodetool commands the repair stage runs."""

    def status(self, address: str) -> dict[str, str]: ...

    def repair(
        self, address: str, keyspace: str, ranges: TokenRange | Sequence[TokenRange], *, timeout: float = 3600.0
    ) -> RepairOutcome: ...

    def abort_repairs(self, address: str) -> None: ...


class Nodetool(RepairNodetool, Protocol):
    """Every nodetool command a migration stage runs."""

    def is_streaming(self, address: str) -> bool: ...

    def describe_ring(self, address: str, keyspace: str) -> list[tuple[TokenRange, frozenset[str]]]: ...

    def snapshot(self, address: str, keyspace: str, tag: str) -> None: ...

    def cleanup(self, address: str, keyspace: str) -> None: ...


class StartingNodetool(Protocol):
    def start_repair(self, address: str, keyspace: str, ranges: Sequence[TokenRange]) -> str | None: ...


class PreviewNodetool(Protocol):
    def repair(
        self, address: str, keyspace: str, ranges: TokenRange | Sequence[TokenRange], *, preview: bool = False
    ) -> RepairOutcome: ...


class Cql(Protocol):
    """What the precheck and ALTER stages ask of a CQL session (`ringward_cassandra.schema.LiveCql`)."""

    def replication(self, keyspace: str) -> Replication: ...

    def alter_replication(self, keyspace: str, replication: Replication) -> str: ...

    def schema_agreed(self, wait_seconds: float) -> bool: ...

    def schema_versions_text(self) -> str: ...

    def release_versions(self) -> dict[str, list[str]]: ...


class MigrationStore(Journal, Protocol):
    """The ops keyspace as the resume of an unfinished migration uses it."""

    def migrations_of(self, keyspace: str) -> list[tuple[str, str, datetime | None, dict[str, Any]]]: ...

    def acquire_lease(self, resource: str, owner: str, purpose: str) -> None: ...

    def record_migration(
        self, migration_id: str, keyspace: str, old: str, new: str, state: str, plan: dict[str, object]
    ) -> None: ...


class RecordedMigrations(Protocol):
    """The ops keyspace as a rollback's precheck reads the migration it undoes."""

    def migration(self, migration_id: str) -> dict[str, Any] | None: ...

    def migration_state(self, migration_id: str) -> str | None: ...


SCHEMA_AGREEMENT_SECONDS = 60.0
LEASE_PURPOSE = "keyspace_migration"


def lease_resource(keyspace: str) -> str:
    """The lease a migration of `keyspace` holds from its precheck to its report."""
    return f"keyspace:{keyspace}"


class LeaseStore(Protocol):
    def acquire_lease(self, resource: str, owner: str, purpose: str) -> None: ...


# A stage that runs long (a blocking repair) renews the lease between its sessions this often.
LEASE_RENEWAL_SECONDS = 3600.0


def hold_lease(store: LeaseStore, record: MigrationRecord) -> None:
    """Renew the migration's keyspace lease for its TTL (`OpsStore.lease_ttl_seconds`) from now.

    Every stage calls this first, so the lease lasts as long as the migration, not 72 h from its precheck: a
    late approval, a long repair or a cleared task still finds the keyspace leased, and the nightly repair
    (which plans around leased keyspaces) stays off it until the report releases it. A lease that lapsed (the
    run sat failed for days) is taken again; one another migration took meanwhile refuses the stage
    (MigrationError) before it changes anything."""
    store.acquire_lease(lease_resource(record.keyspace), record.lease_owner, LEASE_PURPOSE)


# -- what the precheck reads and writes besides the plan -----------------------------------------------------
def rollback_target(store: RecordedMigrations, migration_id: str) -> tuple[str, Any, str]:
    """Keyspace, the replication it had before `migration_id`, and that migration's lease owner; refused when
    the migration is unknown or already cleaned up (the former replicas no longer hold the data)."""
    original, state = store.migration(migration_id), store.migration_state(migration_id)
    if original is None:
        raise ConfigurationError(
            f"No migration {migration_id!r} is recorded.",
            "Give a migration id as the precheck logged it (SELECT migration_id FROM ringward_ops.migrations).",
        )
    if state is not None and MigrationState.parse(state).phase is MigrationPhase.CLEANED:
        raise MigrationError(
            f"Migration {migration_id!r} already ran cleanup: the former replicas no longer hold their data.",
            "Roll back is possible only until cleanup; run a new keyspace_migration to the old setting instead.",
        )
    return str(original["keyspace"]), original["old"], str(original.get("lease_owner") or migration_id)


class PageViewStore(Protocol):
    def record_migration_pages(self, migration_id: str, version: str, chunks: Sequence[bytes]) -> None: ...


def store_page_view(store: PageViewStore, record: Mapping[str, Any]) -> str | None:
    """Build the Migration page's view of the stored `record`'s plan here, on a worker (seconds of CPU and about
    50 MB at 1000 nodes x 256 tokens), and store it beside the record, so the API server reads it instead of
    planning on a page request (`ringward_airflow.ui.views`). None when stored; else what failed: the migration
    goes on, and the page builds the view itself on its first request, as it does for a record stored without
    one (an older version's, a resumed run's)."""
    try:
        version, data = stored_view(record)
        store.record_migration_pages(str(record["migration_id"]), version, view_chunks(data))
    except Exception as error:  # the page's view only saves the API server work: never a reason to stop here
        return f"{type(error).__name__}: {error}"
    return None


def save_ring_picture(plan: MigrationPlan, plans_dir: str | None, migration_id: str) -> Path | None:
    """The placement diff as an SVG ring picture in `plans_dir` (`~` expanded); None without a folder.

    The folder is created 0700, or must be a real folder of this user that nobody else can write
    (ConfigurationError otherwise), and the picture (0600) replaces whatever is at its path, a planted
    symbolic link included, without following it (`ringward.private_files`)."""
    if not plans_dir:
        return None
    folder = private_folder(os.path.expanduser(plans_dir))
    name = f"{migration_id.replace('/', '_').replace(':', '_')}.svg"
    return write_private(folder, name, render_placement_svg(plan))


# -- resuming an unfinished migration ----------------------------------------------------------------------
def unfinished_migration(store: MigrationStore, keyspace: str, target: Replication) -> MigrationRecord | None:
    """`keyspace`'s unfinished migration to `target` (its row's state), None when there is none; a different
    target while one is unfinished is refused (`migration_to_resume`)."""
    recorded: dict[str, tuple[RecordedMigration, dict[str, Any], str]] = {}
    for migration_id, state, updated_at, body in store.migrations_of(keyspace):
        requested = Replication.parse(body.get("requested") or body["new"])
        owner = str(body.get("lease_owner") or migration_id)
        parsed = MigrationState.parse(state)  # a state ringward never writes is refused, naming the fix
        recorded[migration_id] = (
            RecordedMigration(migration_id, keyspace, parsed, requested, lease_owner=owner, updated_at=updated_at),
            body,
            state,
        )
    chosen = migration_to_resume((m for m, _, _ in recorded.values()), keyspace, target)
    if chosen is None:
        return None
    _, body, state = recorded[chosen.migration_id]
    return MigrationRecord.from_json(body, state=state)


def take_over(record: MigrationRecord, store: MigrationStore, *, run_id: str, dag_id: str | None) -> list[str]:
    """Make run `run_id` the owner of the unfinished `record`: take its lease again (it may have expired while
    the migration sat half done, or someone else may hold it) and store the record with this run, so a later
    resume asks Airflow about this run. Returns what is left, one line per stage (`work_left`)."""
    store.acquire_lease(lease_resource(record.keyspace), record.lease_owner, LEASE_PURPOSE)
    left = work_left(record, store)
    owned = replace(record, run_id=run_id, dag_id=dag_id or record.dag_id).to_json()
    store.record_migration(record.migration_id, record.keyspace, json.dumps(owned["old"]), json.dumps(owned["new"]),
                           str(record.state), owned)  # fmt: skip
    return left


def work_left(record: MigrationRecord, journal: Journal) -> list[str]:
    """One line per stage of each step: what the journal shows done and what is left."""
    lines = []
    for step in record.steps:
        parts = []
        for phase in ("pre", "post"):
            segments = record.repair_segments(step.index, phase)
            statuses = {
                r: e.status for r, e in journal.journal(record.migration_id, f"{phase}_repair:{step.index}").items()
            }
            left = len(pending(segments, statuses))
            name = "pre-repair" if phase == "pre" else "repair"
            parts.append(f"{name} of {range_count(segments)}: {len(segments) - left} of {len(segments)} segments done")
        applied = record.state.step_applied(step.index, step.count)
        alter = "ALTER applied" if applied else f"ALTER to {step.after.to_cql()} not applied yet"
        lines.append(f"step {step.index}/{step.count}: {alter}; " + "; ".join(parts) + "; verification to run")
    lines.append("cleanup: done" if record.state.is_cleaned else "cleanup: to run (after verification)")
    return lines


# -- precheck ---------------------------------------------------------------------------------------------
def cluster_release_of(cql: Cql) -> CassandraRelease:
    """The Cassandra release every node runs; a cluster mid-upgrade is refused (ClusterError, retried).

    Read before anything else of the precheck that needs more than CQL: on a release ringward only plans for
    (3.11), the precheck refuses after the plan, before a nodetool command (`manual_procedure`)."""
    versions = cql.release_versions()
    refuse_mixed_versions(versions)
    return cluster_release(versions)


def check_health(ring: Ring, nodetool: Nodetool, cql: Cql) -> None:
    """Refuse (ClusterError, retried) a cluster that is mid-upgrade, has a node not UN as another sees it,
    is streaming, or disagrees on the schema."""
    refuse_mixed_versions(cql.release_versions())
    problems = []
    for node in ring.nodes:
        states = nodetool.status(node.address)
        down = {address: state for address, state in states.items() if state != "UN"}
        if down:
            problems.append(f"{node.address} sees {down}")
        if nodetool.is_streaming(node.address):
            problems.append(f"{node.address} is streaming (a bootstrap, decommission or move is running)")
    if not cql.schema_agreed(SCHEMA_AGREEMENT_SECONDS):
        problems.append(f"the nodes do not agree on the schema ({cql.schema_versions_text()})")
    if problems:
        raise ClusterError(
            "The cluster is not healthy enough to change replication: " + "; ".join(problems) + ".",
            "Bring every node to UN, let streaming and schema changes settle (a node that stays on a "
            "schema version of its own: `nodetool resetlocalschema` on it), then retry the precheck.",
        )


@dataclass(frozen=True)
class PrecheckInput:
    """What a precheck check sees: the accepted plan on the live ring, and the cluster to ask."""

    keyspace: str
    ring: Ring
    plan: MigrationPlan
    nodetool: Nodetool
    cql: Cql


# A check raises a RingwardError refusal (problem and fix) or returns. The checks run after the health check
# and the plan, before the lease and the record: a refusal writes nothing. Add checks here (e.g. capacity of
# the gaining nodes, pausing AutoRepair/Reaper) or pass `precheck_checks=` to MigrationPrecheckOperator.
PrecheckCheck = Callable[[PrecheckInput], None]
DEFAULT_PRECHECK_CHECKS: tuple[PrecheckCheck, ...] = ()


def run_precheck_checks(checks: Sequence[PrecheckCheck], given: PrecheckInput) -> None:
    for check in checks:
        check(given)


# -- ALTER ------------------------------------------------------------------------------------------------
def apply_step(step: MigrationStep, keyspace: str, ring: Ring, cql: Cql, nodetool: Nodetool,
               log: Callable[[str], None]) -> None:  # fmt: skip
    """ALTER `keyspace` to `step.after` (a no-op when already applied: a retry), wait for schema agreement,
    then confirm every node reports the new replicas. A keyspace at neither end of the step is refused."""
    current = cql.replication(keyspace)
    if _stored(current) == _stored(step.after):
        log(f"{keyspace} already has {step.after.to_cql()}: nothing to alter.")
    elif _stored(current) != _stored(step.before):
        raise MigrationError(
            f"{keyspace} has {current.to_cql()}, neither the step's start {step.before.to_cql()} nor its "
            f"target {step.after.to_cql()}: someone else changed it.",
            "Find out who changed the keyspace; rerun the migration from a fresh precheck.",
        )
    else:
        statement = cql.alter_replication(keyspace, step.after)
        log(f"Step {step.index}/{step.count}: {statement}")
    if not cql.schema_agreed(SCHEMA_AGREEMENT_SECONDS):
        raise ClusterError(
            "The ALTER is applied, but the nodes did not agree on the schema within 60 s: "
            f"{cql.schema_versions_text()}.",
            "Retry this task (it does not alter twice); if a node stays on a version of its own, run "
            "`nodetool resetlocalschema` on it first.",
        )
    confirm_ownership(ring, step, keyspace, nodetool)
    log(f"Every node reports the new ownership of {keyspace}.")


def confirm_ownership(ring: Ring, step: MigrationStep, keyspace: str, nodetool: Nodetool) -> None:
    """Every node must report the new replicas for every range (`nodetool describering`)."""
    _, expected = step.placements(ring)
    for node in ring.nodes:
        for token_range, reported in nodetool.describe_ring(node.address, keyspace):
            wanted = set(expected.for_token(token_range.end))
            if reported != wanted:
                raise ClusterError(
                    f"{node.address} reports replicas {sorted(reported)} for ({token_range.start}, "
                    f"{token_range.end}], expected {sorted(wanted)}.",
                    "Wait for the schema change to reach every node, then retry the task.",
                )


def _stored(replication: Replication) -> tuple[str, dict[str, int]]:
    """What Cassandra keeps of a setting: it drops datacenters given a factor of 0."""
    return replication.strategy, {dc: n for dc, n in replication.factors.items() if n}


# -- verification and cleanup -----------------------------------------------------------------------------
_PREVIEW_ATTEMPTS = 3  # previews of a command before "out of sync" is believed
_PREVIEW_PAUSE_SECONDS = 5.0


def preview_in_sync(segments: Sequence[Segment], nodetool: PreviewNodetool, stop_check: Callable[[], None],
                    log: Callable[[str], None] = lambda line: None,
                    sleep: Callable[[float], None] = time.sleep) -> int:  # fmt: skip
    """`nodetool repair --preview --full` of `segments` (grouped as for repair): every replica in sync, or
    VerificationError naming the commands out of sync. Returns how many segments were previewed.

    With clients writing, replicas build their Merkle trees moments apart and a write in flight between them
    reads as out of sync (seen: 79 B to 7 KiB during a live writer). A command found out of sync is therefore
    previewed again after a pause, `_PREVIEW_ATTEMPTS` times in all: a difference that was in flight is gone
    by then, data a replica lacks is not, and only a command out of sync in every preview fails the check. The
    preview never repairs: what it finds is the repair's failure to report, not to hide."""
    out_of_sync = []
    for command in group_segments(segments, RANGES_PER_COMMAND):
        stop_check()
        outcome = nodetool.repair(command.coordinator, command.keyspace, command.ranges, preview=True)
        for _ in range(_PREVIEW_ATTEMPTS - 1):
            if not outcome.succeeded or outcome.in_sync:
                break
            ranges = ", ".join(map(str, command.ranges))
            log(f"preview: {ranges} among {', '.join(command.replicas)} out of sync ({_last_line(outcome.output)}): "
                f"previewing again in {_PREVIEW_PAUSE_SECONDS:.0f} s (a write in flight is gone by then)")  # fmt: skip
            sleep(_PREVIEW_PAUSE_SECONDS)
            stop_check()
            outcome = nodetool.repair(command.coordinator, command.keyspace, command.ranges, preview=True)
        if not outcome.succeeded or not outcome.in_sync:
            ranges = ", ".join(map(str, command.ranges))
            out_of_sync.append(f"{ranges} among {', '.join(command.replicas)}: {_last_line(outcome.output)}")
    if out_of_sync:
        raise VerificationError(
            f"Preview repair finds data out of sync in {len(out_of_sync)} commands, in each of "
            f"{_PREVIEW_ATTEMPTS} previews: " + "; ".join(out_of_sync[:5]),
            "Do not run cleanup. Clear the repair task to repair these ranges again, then verify again.",
        )
    return len(segments)


def clean_up(record: MigrationRecord, nodetool: Nodetool, *, snapshot: bool, stop_check: Callable[[], None],
             log: Callable[[str], None]) -> list[str]:  # fmt: skip
    """Snapshot (optional), then `nodetool cleanup` only on the nodes that lost ranges, one at a time."""
    nodes = cleanup_nodes(record.ring, record.old, record.steps[-1].after)
    tag = f"ringward-{record.migration_id}".replace("@", "-").replace(":", "-").replace("+", "-")
    for address in nodes:
        stop_check()
        if snapshot:
            log(f"snapshot {tag} of {record.keyspace} on {address}")
            nodetool.snapshot(address, record.keyspace, tag)
        log(f"cleanup of {record.keyspace} on {address} (it lost ranges)")
        nodetool.cleanup(address, record.keyspace)
    skipped = sorted(set(record.ring.addresses()) - set(nodes))
    log(f"cleanup done on {nodes}; untouched (lost nothing): {skipped}")
    return nodes


# -- repair -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RepairSettings:
    """How the blocking repair runs: sessions at once, attempts per command, backoff base, session timeout."""

    parallelism: int = 2
    max_attempts: int = 3
    retry_backoff: float = 5.0
    session_timeout: float = 3600.0

    def config(self) -> RepairConfig:
        """The nightly executor's settings for a migration repair: full, every command at full intensity."""
        return RepairConfig(
            repair_type="full",
            ranges_per_command=RANGES_PER_COMMAND,
            parallel_repair_count=max(1, self.parallelism),
            parallel_repair_percentage=0.0,
            intensity=1.0,
            max_retries=max(0, self.max_attempts - 1),
            retry_backoff=timedelta(seconds=self.retry_backoff),
            segment_timeout=timedelta(seconds=self.session_timeout),
        )


@dataclass(frozen=True)
class StageResult:
    """What a repair stage returns to XCom: ranges in the stage, repaired by this call, done per the journal."""

    ranges: int
    repaired: int
    done: int

    def as_json(self) -> dict[str, int]:
        return {"ranges": self.ranges, "repaired": self.repaired, "done": self.done}


def journalled_pending(journal: Journal, migration_id: str, stage: str, segments: Sequence[Segment]) -> list[Segment]:
    """`segments` not yet journalled as done in `stage` (a retried or cleared task resumes here)."""
    statuses = {token_range: entry.status for token_range, entry in journal.journal(migration_id, stage).items()}
    return pending(segments, statuses)


def participant_problems(
    nodes: Sequence[str], nodetool: RepairNodetool, accepts_cql: Callable[[str, int], bool], cql_port: int
) -> dict[str, str]:
    """node -> why it cannot take part in a repair session now; ready nodes are left out.

    Ready: it answers JMX, every participant sees it UN, and it accepts CQL connections.
    """
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
        elif not accepts_cql(node, cql_port):
            problems[node] = f"refuses CQL connections on port {cql_port}"
    return problems


def repair_ranges(
    segments: Sequence[Segment],
    *,
    migration_id: str,
    stage: str,
    journal: Journal,
    nodetool: RepairNodetool,
    settings: RepairSettings,
    await_ready: Callable[[Sequence[str]], None],
    stop_requested: Callable[[], bool],
    log: Callable[[str], None],
    sleep: Callable[[float], None],
) -> StageResult:
    """Full repair of the `segments` the journal does not hold as done, through the nightly executor.

    Before each session `await_ready(participants)` waits for them (it raises ClusterError when one stays
    down: the batch stops starting sessions and that error fails the try, as the participant wait says).
    Every finished attempt is journalled. Raises RepairError naming the failed ranges, MigrationError when
    the task was killed.
    """
    statuses = {token_range: entry.status for token_range, entry in journal.journal(migration_id, stage).items()}
    todo = pending(segments, statuses)
    done_before = [segment for segment in segments if segment not in todo]
    log(f"{stage}: {range_count(todo)} to repair, {range_count(done_before)} already done.")
    progress = StageProgressWriter(journal, migration_id, stage, segments, statuses)
    progress.store(final=True)  # the journal as found (an older worker's, a retried task's)
    if not todo:
        # "repaired" counts this call's sessions; "done" what the journal holds.
        return StageResult(len(segments), 0, len(segments))
    not_ready: list[ClusterError] = []

    def session(command: RepairCommand) -> SessionResult:
        try:
            await_ready(command.replicas)
        except ClusterError as error:
            not_ready.append(error)
            return SessionResult(False, 0.0, error.problem)
        try:
            outcome = nodetool.repair(
                command.coordinator, command.keyspace, command.ranges, timeout=settings.session_timeout
            )
        except ClusterError as error:  # timed out: the nodetool process is gone, the session may not be
            return SessionResult(False, settings.session_timeout, error.problem + _aborted(command.coordinator))
        if stop_requested():  # the kill stopped nodetool; the session may still run on the node
            return SessionResult(False, outcome.seconds, "task killed" + _aborted(command.coordinator))
        return SessionResult(
            outcome.succeeded, outcome.seconds, None if outcome.succeeded else _last_line(outcome.output)
        )

    def _aborted(coordinator: str) -> str:
        """Abort the coordinator's repair sessions; "" when done, else why they may still run."""
        try:
            nodetool.abort_repairs(coordinator)
        except ClusterError as error:
            return f" ({error.problem})"
        return ""

    def save(updates: Sequence[RecordUpdate]) -> None:
        for update in updates:
            if update.record.state not in (SegmentState.DONE, SegmentState.FAILED):
                continue  # the journal keeps finished attempts only
            status = RangeState.DONE if update.record.state is SegmentState.DONE else RangeState.FAILED
            entry = JournalEntry(stage, update.segment.range, status.value, update.segment.coordinator,
                                 update.record.attempts, update.record.duration or 0.0,
                                 update.record.last_error or "")  # fmt: skip
            journal.record_journal(migration_id, entry)
            progress.journalled(entry)
        progress.store()

    participants = {node for segment in todo for node in segment.replicas}
    effects = BatchEffects(
        repair=session,
        save=save,
        live_nodes=lambda: participants,  # readiness is awaited per session (await_ready), not postponed
        stop_requested=lambda: stop_requested() or bool(not_ready),
        log=log,
        sleep=sleep,
    )
    try:
        result = run_batch(
            todo, {}, config=settings.config(), run_id=f"{migration_id}/{stage}",
            parallelism=max(1, settings.parallelism), effects=effects, run_started=datetime.now(UTC),
        )  # fmt: skip
    finally:
        progress.store(final=True)  # what the stage journalled, whatever ended it
    if stop_requested():
        raise MigrationError("The task was killed; it stopped what it had started.", "Clear the task to resume.")
    if not_ready:
        raise not_ready[0]
    failed = [outcome for outcome in result.outcomes if outcome.state is not SegmentState.DONE]
    if failed:
        details = [f"{o.segment.range} on {o.segment.coordinator}: {o.reason or 'not repaired'}" for o in failed]
        raise RepairError(
            f"{len(failed)} of {len(todo)} repair segments failed to repair: " + "; ".join(details[:5]),
            "Bring the nodes named back to UN, then retry the task: finished ranges are skipped.",
        )
    return StageResult(len(segments), len(todo), len(segments))


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:300]


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][-500:] if lines else "nodetool printed nothing"


# -- deferred repair (the trigger waits for the sessions) --------------------------------------------------
def start_wave(
    todo: Sequence[Segment],
    *,
    parallelism: int,
    migration_id: str,
    stage: str,
    journal: Journal,
    nodetool: StartingNodetool,
    await_ready: Callable[[Sequence[str]], None],
    progress: StageProgressWriter | None = None,
) -> dict[str, RepairCommand]:
    """Start the first wave of `todo` (replica-disjoint commands) once its participants are ready; return the
    sessions to wait for by parent id. A command that finished before it could be followed is journalled done (and
    counted in the stage's `progress`, stored then)."""
    wave = repair_waves(todo, parallelism)[0]
    await_ready(sorted({node for command in wave for node in command.replicas}))
    started: dict[str, RepairCommand] = {}
    for command in wave:
        parent_id = nodetool.start_repair(command.coordinator, command.keyspace, command.ranges)
        if parent_id is None:
            for token_range in command.ranges:
                entry = JournalEntry(stage, token_range, RangeState.DONE.value, command.coordinator, 1, 0.0, "")
                journal.record_journal(migration_id, entry)
                if progress is not None:
                    progress.journalled(entry)
        else:
            started[parent_id] = command
    if progress is not None and len(started) < len(wave):
        progress.store(final=True)
    return started


def session_labels(started: Mapping[str, RepairCommand]) -> dict[str, dict[str, Any]]:
    """What the trigger carries per session and hands back in its event (`RepairSessionTrigger.labels`)."""
    return {
        parent_id: {
            "ranges": [[r.start, r.end] for r in command.ranges],
            "coordinator": command.coordinator,
            "replicas": list(command.replicas),
        }
        for parent_id, command in started.items()
    }


def record_session_outcomes(
    event: Mapping[str, Any], *, migration_id: str, stage: str, journal: Journal, session_timeout: float
) -> None:
    """Journal every session of the trigger's `event`; raise RepairError naming those that did not succeed.

    A session that ended well counts whatever ended the wait (another one's death, the timeout)."""
    failed = []
    for parent_id, label in event.get("labels", {}).items():
        session = event.get("sessions", {}).get(parent_id, {})
        ok = bool(session.get("ok", False))
        error = "" if ok else session.get("error") or _unfinished(event.get("status"), session_timeout)
        status = (RangeState.DONE if ok else RangeState.FAILED).value
        ranges = [TokenRange(start, end) for start, end in label["ranges"]]
        for token_range in ranges:
            journal.record_journal(
                migration_id, JournalEntry(stage, token_range, status, label["coordinator"], 1, 0.0, error)
            )
        if not ok:
            failed.append(f"{', '.join(map(str, ranges))} on {label['coordinator']}: {error}")
    if failed:
        raise RepairError(
            f"{len(failed)} repair commands failed: " + "; ".join(failed[:5]),
            "The task's retry waits for the nodes named to be back to UN and repairs only the ranges "
            "not yet done; if retries run out, bring the nodes back and clear the task.",
        )


def _unfinished(status: Any, session_timeout: float) -> str:
    if status == "timeout":
        return f"no result within the session timeout ({session_timeout:.0f} s)"
    return f"unfinished when the wait ended ({status})"
