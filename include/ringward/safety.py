"""Safety analysis of a replication change: what to refuse, what to warn about, and the deadline.

A refusal names the problem and the fix. The analysis works on placements (which node holds which
range before and after), so it catches what a look at the settings alone misses: a SimpleStrategy ->
NetworkTopologyStrategy change with the same factor can still move replicas of most ranges.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Literal

from ringward._placement_index import ring_index
from ringward.cassandra_release import CASSANDRA_5_0, CassandraRelease
from ringward.consistency import CONSISTENCY_LEVELS, safe_levels, unsafe_levels
from ringward.diff import PlacementDiff, diff_replication, diff_rings
from ringward.errors import RingwardError
from ringward.replication import DEFAULT_KEYSPACE_RF, REPLICATION_FACTOR, SIMPLE, Replication
from ringward.replication import NETWORK_TOPOLOGY as NTS
from ringward.ring import Ring, TokenRange
from ringward.stored_replication import altered_replication

__all__ = [
    "SHORT_GC_GRACE_SECONDS",
    "SYSTEM_KEYSPACES",
    "Finding",
    "ReplicationInput",
    "Severity",
    "analyse",
    "analyse_rings",
    "coerce_replication",
    "deadline_seconds",
    "read_window",
]

Severity = Literal["refuse", "warn", "info"]
ReplicationInput = Replication | str | Mapping[str, object]

SYSTEM_KEYSPACES = frozenset(
    {
        "system",
        "system_schema",
        "system_auth",
        "system_distributed",
        "system_traces",
        "system_views",
        "system_virtual_schema",
        "ringward_ops",
    }
)

# Below a day a migration (ALTER, full repair of the affected ranges, verify) rarely fits safely.
SHORT_GC_GRACE_SECONDS = 86_400


@dataclass(frozen=True)
class Finding:
    """One result of the analysis. `refuse` findings block the change."""

    severity: Severity
    code: str
    message: str
    fix: str
    ranges: tuple[TokenRange, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "fix": self.fix,
            "ranges": [[r.start, r.end] for r in self.ranges],
        }

    def __str__(self) -> str:
        text = f"[{self.severity}] {self.code}: {self.message}"
        return f"{text} Fix: {self.fix}" if self.fix else text


def coerce_replication(value: ReplicationInput) -> Replication:
    """A Replication from a Replication, JSON text or a mapping (raises ReplicationError)."""
    return value if isinstance(value, Replication) else Replication.parse(value)


def analyse(
    ring: Ring,
    old: ReplicationInput,
    new: ReplicationInput,
    *,
    keyspace: str,
    table_gc_grace_seconds: Mapping[str, int] | None = None,
    client_consistency: str | None = None,
    known_keyspaces: Iterable[str] | None = None,
    default_keyspace_rf: int = DEFAULT_KEYSPACE_RF,
    release: CassandraRelease = CASSANDRA_5_0,
) -> list[Finding]:
    """Everything ringward knows about changing `keyspace` from `old` to `new` replication on `ring`.

    Both settings are read as Cassandra reads them: `old` as stored (or as CREATE KEYSPACE would store
    it), `new` as ALTER KEYSPACE prepares it against `old` (`ringward.stored_replication`).
    """
    findings = _keyspace_findings(keyspace, known_keyspaces)
    try:
        dcs = ring.datacenters()
        old_replication = altered_replication(None, coerce_replication(old), dcs, default_keyspace_rf, release=release)
        new_replication = altered_replication(
            old_replication, coerce_replication(new), dcs, default_keyspace_rf, release=release
        )
    except RingwardError as error:
        return [*findings, _from_error("malformed_replication", error)]
    findings += _settings_findings(ring, old_replication, new_replication, coerce_replication(new))
    if old_replication == new_replication:
        findings.append(
            Finding(
                "refuse",
                "no_op",
                f"The new replication of {keyspace} equals the current one "
                f"({new_replication.to_cql()}): there is nothing to change.",
                "Give the replication you want to move to.",
            )
        )
        return findings
    try:
        diff = diff_replication(ring, old_replication, new_replication)
    except RingwardError as error:
        return [*findings, _from_error("placement_failed", error)]
    if not diff.affected_count():
        findings.append(
            Finding(
                "info",
                "placement_unchanged",
                "No range changes replicas: the ALTER only rewrites the settings, no repair is needed.",
                "",
            )
        )
    findings += placement_findings(diff, ring, client_consistency)
    findings += deadline_findings(table_gc_grace_seconds)
    return findings


def analyse_rings(
    before: Ring,
    after: Ring,
    replication: ReplicationInput,
    *,
    keyspace: str,
    table_gc_grace_seconds: Mapping[str, int] | None = None,
    client_consistency: str | None = None,
) -> list[Finding]:
    """The analysis for a topology change (nodes or tokens) under one replication setting."""
    findings = _keyspace_findings(keyspace, None)
    try:
        replication_ = coerce_replication(replication).expand(after.datacenters())
        diff = diff_rings(before, after, replication_)
    except RingwardError as error:
        return [*findings, _from_error("malformed_replication", error)]
    findings += _factor_findings(after, replication_)
    findings += placement_findings(diff, after, client_consistency)
    findings += deadline_findings(table_gc_grace_seconds)
    return findings


def read_window(diff: PlacementDiff, ring: Ring) -> dict[str, list[TokenRange]]:
    """Per consistency level, the ranges whose reads may miss data until repair finishes.

    A range's levels depend only on the datacenters of its new replicas and of those gained, so each
    such shape is judged once (big rings have 256,000 ranges and a handful of shapes); the result is
    kept with the ring's placements (the analysis and the plan summary both ask).
    """
    memo = ring_index(ring).memo
    key = ("read_window", id(diff))
    cached = memo.get(key)
    if isinstance(cached, tuple) and cached[0] is diff:
        return {level: list(ranges) for level, ranges in cached[1].items()}
    datacenter_of = _datacenter_of(ring)
    dc_of = datacenter_of.get
    unsafe: dict[str, list[TokenRange]] = {level: [] for level in CONSISTENCY_LEVELS}
    ranges, olds, news = diff.before.ranges, diff.before.replicas, diff.after.replicas
    verdicts: dict[tuple[tuple[str | None, ...], tuple[bool, ...]], tuple[str, ...]] = {}
    # A range that gains no replica reads complete data at every level. Its shape: the datacenter of each
    # new replica and whether it was a replica before (built with builtins: 256,000 ranges on big rings).
    for position in compress(range(len(ranges)), diff.counts.gained):
        old, new = olds[position], news[position]
        shape = (tuple(map(dc_of, new)), tuple(map(old.__contains__, new)))
        levels = verdicts.get(shape)
        if levels is None:
            gained = [a for a in new if a not in old]
            levels = verdicts[shape] = unsafe_levels(new, gained, datacenter_of)
        for level in levels:
            unsafe[level].append(ranges[position])
    memo[key] = (diff, unsafe)
    return {level: list(found) for level, found in unsafe.items()}


def deadline_seconds(table_gc_grace_seconds: Mapping[str, int] | None) -> int | None:
    """The smallest gc_grace_seconds of the keyspace's tables, None when no table is known."""
    if not table_gc_grace_seconds:
        return None
    return min(table_gc_grace_seconds.values())


def placement_findings(diff: PlacementDiff, ring: Ring, client_consistency: str | None) -> list[Finding]:
    """Findings that follow from the placement diff: lost ranges and the read window."""
    findings: list[Finding] = []
    keeping_none = diff.keeping_none()
    orphaned = tuple(c.range for c in keeping_none if c.new)
    if orphaned:
        findings.append(
            Finding(
                "refuse",
                "no_replica_kept",
                f"{len(orphaned)} ranges keep none of their current replicas: "
                "right after the change no replica holds their data and repair cannot bring it back.",
                "Go through the staged plan (`steps`): every step keeps at least one replica per range.",
                orphaned,
            )
        )
    emptied = tuple(c.range for c in keeping_none if not c.new)
    if emptied:
        findings.append(
            Finding(
                "refuse",
                "no_replicas",
                f"{len(emptied)} ranges would have no replica at all after the change.",
                "Keep a replication factor of at least 1 in some datacenter.",
                emptied,
            )
        )
    findings += _read_window_findings(diff, ring, client_consistency)
    return findings


def deadline_findings(table_gc_grace_seconds: Mapping[str, int] | None) -> list[Finding]:
    deadline = deadline_seconds(table_gc_grace_seconds)
    if deadline is None:
        return [
            Finding(
                "info",
                "deadline_unknown",
                "The tables' gc_grace_seconds are unknown, so the migration deadline is unknown.",
                "Give the tables' gc_grace_seconds (`ringward plan --keyspace` reads them from the cluster).",
            )
        ]
    assert table_gc_grace_seconds is not None
    tightest = sorted(t for t, s in table_gc_grace_seconds.items() if s == deadline)
    message = (
        f"Finish ALTER, repair and verification within {_duration(deadline)} ({deadline} s, "
        f"gc_grace_seconds of {', '.join(tightest)}): after that, tombstones on the former replicas "
        "may be purged before repair carries them to the new ones and deleted data comes back."
    )
    findings = [Finding("info", "deadline", message, "")]
    if deadline < SHORT_GC_GRACE_SECONDS:
        findings.append(
            Finding(
                "warn",
                "gc_grace_short",
                f"gc_grace_seconds is only {deadline} s on {', '.join(tightest)}: the migration window "
                "is too short to repair safely.",
                "Raise gc_grace_seconds (e.g. to 864000) on these tables for the migration, "
                "restore it once verification passed.",
            )
        )
    return findings


def _read_window_findings(diff: PlacementDiff, ring: Ring, client_consistency: str | None) -> list[Finding]:
    window = read_window(diff, ring)
    counts = {level: len(ranges) for level, ranges in window.items()}
    if not any(counts.values()):
        return []
    listed = ", ".join(f"{level} {n}" for level, n in counts.items() if n)
    safe = [level for level in safe_levels(counts) if not level.startswith(("TWO", "THREE"))]
    findings = [
        Finding(
            "info",
            "read_window",
            f"Until repair finishes, reads can miss data (ranges per consistency level): {listed}.",
            f"Read at {'/'.join(safe) or 'ALL'} during the window." if safe else "",
        )
    ]
    if client_consistency is None:
        return findings
    level = client_consistency.upper()
    if level not in counts:
        findings.append(
            Finding(
                "warn",
                "unknown_consistency",
                f"Unknown consistency level {client_consistency!r}.",
                f"Use one of {', '.join(CONSISTENCY_LEVELS)}.",
            )
        )
    elif counts[level]:
        instead = "/".join(safe) if safe else "none is safe: pause the affected reads"
        findings.append(
            Finding(
                "warn",
                "client_consistency_unsafe",
                f"Reads at {level} may return nothing for {counts[level]} ranges until repair finishes.",
                f"Read at {instead} during the window, or accept incomplete reads until repair is done.",
                tuple(window[level]),
            )
        )
    return findings


def _keyspace_findings(keyspace: str, known_keyspaces: Iterable[str] | None) -> list[Finding]:
    findings: list[Finding] = []
    if keyspace in SYSTEM_KEYSPACES:
        findings.append(
            Finding(
                "refuse",
                "system_keyspace",
                f"{keyspace} is a system keyspace; ringward does not change its replication.",
                "Change system keyspaces by hand following the Cassandra documentation.",
            )
        )
    if known_keyspaces is not None:
        known = list(known_keyspaces)
        if keyspace not in known:
            hint = _case_hint(keyspace, known)
            findings.append(
                Finding(
                    "refuse",
                    "unknown_keyspace",
                    f"Keyspace {keyspace!r} does not exist.",
                    f"Did you mean {hint!r}? Names are case-sensitive."
                    if hint
                    else "Use one of: " + ", ".join(sorted(known)),
                )
            )
    return findings


def _settings_findings(ring: Ring, old: Replication, new: Replication, requested: Replication) -> list[Finding]:
    """`old` and `new` as Cassandra stores them, `requested` as the user wrote the new setting."""
    findings = _unknown_datacenter_findings(ring, requested)
    findings += _dropped_datacenter_findings(ring, old, new, requested)
    findings += _factor_findings(ring, new)
    if new.strategy == SIMPLE and len(ring.datacenters()) > 1:
        findings.append(
            Finding(
                "warn",
                "simple_strategy_multi_dc",
                "SimpleStrategy ignores datacenters: replicas land wherever the ring walk goes.",
                "Use NetworkTopologyStrategy with a factor per datacenter.",
            )
        )
    return findings


def _unknown_datacenter_findings(ring: Ring, new: Replication) -> list[Finding]:
    """Every datacenter the request names must be in the ring, even at factor 0: a made-up name would
    otherwise go on into the plan, the approval and the ALTER (issue 25)."""
    if new.strategy != NTS:
        return []
    known = list(ring.datacenters())
    findings = []
    for dc in new.factors:
        if dc in known or dc == REPLICATION_FACTOR:
            continue
        hint = _case_hint(dc, known)
        fix = (
            f"Datacenter names are case-sensitive: write {hint!r}."
            if hint
            else "Use the ring's datacenters: " + ", ".join(known) + ". A datacenter that is not in the ring "
            "holds no replicas: leave it out (with the replication_factor shorthand, which keeps the "
            "current datacenters, give every datacenter's factor instead)."
        )
        findings.append(Finding("refuse", "unknown_datacenter", f"Datacenter {dc!r} is not in the ring.", fix))
    return findings


def _dropped_datacenter_findings(
    ring: Ring, old: Replication, new: Replication, requested: Replication
) -> list[Finding]:
    """A datacenter that holds replicas now and is simply absent from the new NTS map (not named as 0)."""
    if new.strategy != NTS:
        return []
    in_ring = ring.datacenters()
    if old.strategy == NTS:
        holding = [dc for dc, factor in old.factors.items() if factor > 0 and dc in in_ring]
    else:
        holding = list(in_ring)
    dropped = [dc for dc in holding if dc not in new.factors and dc not in requested.factors]
    if not dropped:
        return []
    zeros = ", ".join(f"'{dc}': 0" for dc in dropped)
    return [
        Finding(
            "refuse",
            "datacenter_dropped",
            f"{', '.join(dropped)} holds replicas now and is missing from the new replication: "
            "leaving a datacenter out drops all its replicas.",
            f"If you mean to drop it, say so explicitly with {zeros}; otherwise give its factor.",
        )
    ]


def _factor_findings(ring: Ring, replication: Replication) -> list[Finding]:
    datacenters = ring.datacenters()
    findings: list[Finding] = []
    if replication.strategy == SIMPLE:
        factor = sum(replication.factors.values())
        nodes = len(ring.nodes)
        if factor > nodes:
            findings.append(_too_many("the cluster", factor, nodes))
        return findings
    for dc, factor in replication.factors.items():
        if dc not in datacenters or factor <= 0:
            continue
        nodes = len(datacenters[dc])
        racks = len({n.rack for n in datacenters[dc]})
        if factor > nodes:
            findings.append(_too_many(dc, factor, nodes))
        elif factor > racks:
            findings.append(
                Finding(
                    "warn",
                    "rf_exceeds_racks",
                    f"{dc} has only {racks} rack(s) for {factor} replicas: some replicas share a rack, "
                    "so losing one rack can lose more than one replica.",
                    f"Add racks to {dc} or keep its factor at most {racks}.",
                )
            )
    return findings


def _too_many(scope: str, factor: int, nodes: int) -> Finding:
    return Finding(
        "refuse",
        "rf_exceeds_nodes",
        f"Replication factor {factor} in {scope} exceeds its {nodes} nodes: QUORUM and ALL requests would fail.",
        f"Use a factor of at most {nodes} in {scope}, or add nodes first.",
    )


def _from_error(code: str, error: RingwardError) -> Finding:
    return Finding("refuse", code, error.problem, error.fix)


def _case_hint(name: str, candidates: Sequence[str]) -> str | None:
    matches = [c for c in candidates if c.lower() == name.lower()]
    return matches[0] if matches else None


def _datacenter_of(ring: Ring) -> dict[str, str]:
    return {node.address: node.datacenter for node in ring.nodes}


def _duration(seconds: int) -> str:
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours else []
    parts += [f"{rest // 60}m"] if rest >= 60 else []
    return " ".join(parts) or f"{seconds}s"
