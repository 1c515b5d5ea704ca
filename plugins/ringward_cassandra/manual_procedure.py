"""A replication change on a release ringward only plans for (Cassandra 3.11): the refusal, and the commands
an operator runs by hand instead, for one plan.

The commands are the ones the migration DAG runs on 4.0 and later, in its order: per step, a full repair of
the affected ranges among their current replicas (so the replica that stays holds every row), the ALTER,
a full repair of the gained ranges coordinated by a new replica, the checks; cleanup once, after the last
step, on the nodes that lost ranges. The repair commands carry several ranges each, as the DAG sends them
(`repair_arguments`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from ringward.cassandra_release import OLDEST_WRITABLE, CassandraRelease
from ringward.errors import MigrationError
from ringward.migration import RANGES_PER_COMMAND, MigrationStep, cleanup_nodes, repair_segments, verify_targets
from ringward.plan import MigrationPlan
from ringward.repair import Segment, group_segments

from ringward_cassandra.cql import quote_identifier
from ringward_cassandra.nodetool import repair_arguments

__all__ = ["manual_procedure", "refuse_read_only_release"]

SNAPSHOT_TAG = "before-cleanup"


def refuse_read_only_release(
    release: CassandraRelease, plan: MigrationPlan, steps: Sequence[MigrationStep], tables: Sequence[str] = ()
) -> None:
    """MigrationError on a release below `OLDEST_WRITABLE`, its fix the way on: upgrade, or the commands of
    `manual_procedure`. Called by the precheck, after the plan and before anything is written."""
    if not release.is_read_only:
        return
    raise MigrationError(
        f"{plan.keyspace} is on Cassandra {release}: ringward plans replication changes on {release.line} but "
        f"makes them only on {OLDEST_WRITABLE.line} and later ({release.line} has no preview repair to verify "
        "the streamed data with and no sjk to abort repairs through, and ringward has not been run against it).",
        "\n".join(
            [
                f"Upgrade the cluster to Cassandra {OLDEST_WRITABLE.line} or later and trigger the migration again; "
                "or run this plan by hand, in order:",
                *manual_procedure(plan, steps, tables),
            ]
        ),
    )


def manual_procedure(plan: MigrationPlan, steps: Sequence[MigrationStep], tables: Sequence[str] = ()) -> list[str]:
    """The commands that carry out `plan` (its `steps`, from `migration_steps`) by hand, one line each, with
    the lines saying what each group is for. `tables`: the keyspace's tables, named in the row checks."""
    ring, keyspace = plan.ring, plan.keyspace
    contact = ring.nodes[0].address
    lines: list[str] = []
    for step in steps:
        lines.append(f"Step {step.index} of {step.count}: {step.before.to_cql()} -> {step.after.to_cql()}")
        lines.append("  a. Repair the affected ranges among their current replicas (each keeps every row):")
        lines += _repair_lines(repair_segments(ring, step, keyspace, "pre"))
        lines.append(f"  b. Change the replication (cqlsh on {contact}); then the nodes must agree on the schema:")
        lines.append(f"     ALTER KEYSPACE {quote_identifier(keyspace)} WITH replication = {step.after.to_cql()};")
        lines.append(f"     nodetool -h {contact} describecluster")
        lines.append("  c. Stream the gained ranges to their new replicas (full repair, run on a new replica):")
        lines += _repair_lines(repair_segments(ring, step, keyspace, "post"))
        lines.append("  d. Check: every node lists the new replicas of each range, and each new replica holds its")
        lines.append("     gained ranges' rows (counts pinned to it at ONE equal the counts at ALL, range by range):")
        lines += [f"     nodetool -h {node.address} describering {keyspace}" for node in ring.nodes]
        lines += _count_lines(step, plan, tables, contact)
    lost = cleanup_nodes(ring, plan.old, steps[-1].after)
    lines.append("Cleanup, once every step is checked, one node at a time (only the nodes that lost ranges):")
    for node in lost:
        lines.append(f"     nodetool -h {node} snapshot -t {SNAPSHOT_TAG} {keyspace}")
        lines.append(f"     nodetool -h {node} cleanup {keyspace}")
    if not lost:
        lines.append("     (no node lost a range: nothing to clean up)")
    return lines


def _repair_lines(segments: Sequence[Segment]) -> list[str]:
    if not segments:
        return ["     (no range needs it: one replica each)"]
    return [
        f"     nodetool -h {command.coordinator} {shlex.join(repair_arguments(command.keyspace, command.ranges))}"
        for command in group_segments(segments, RANGES_PER_COMMAND)
    ]


def _count_lines(step: MigrationStep, plan: MigrationPlan, tables: Sequence[str], contact: str) -> list[str]:
    new_replicas = sorted({target.replica for target in verify_targets(plan.ring, step)})
    return [
        f"     ringward spark range-counts --hosts {contact} --keyspace {plan.keyspace} --table {table} "
        f"--pin-host {replica}"
        for replica in new_replicas
        for table in (tables or ["<table>"])
    ] + [
        f"     ringward spark range-counts --hosts {contact} --keyspace {plan.keyspace} --table {table}   (at ALL)"
        for table in (tables or ["<table>"])
    ]
