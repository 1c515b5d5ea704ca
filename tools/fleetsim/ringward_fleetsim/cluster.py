"""Virtual time, the duration model, faults, the virtual SessionPool and the simulated nodetool.

Duration of one repair command (docs/design/nightly-at-fleet-size.md), started at t:

    command_overhead + sessions x session_overhead
      + sessions x tables x table_overhead               (a repair job per table per session)
      + ranges x tables x range_overhead                 (a Merkle tree per range per table; x 1 table when the
                                                          fit says per range: `range_per_table` False)
      + k x bytes_per_replica / validation_rate          (Merkle trees: every replica reads its copy)
      + k x mismatch_share x bytes_per_replica / stream_rate

A command started in-process (AutoRepair's tasks) pays `in_process_overhead` instead of `command_overhead`.
The assumed terms (the defaults) have no per-table or per-range cost; `calibrated()` reads them fitted.

`sessions` = the command's distinct replica sets (1 for a RepairCommand: its segments share them);
`bytes_per_replica` = the data of the command's tables in its ranges, which every replica holds in full;
`k` = 1 + the most sessions any participant is already in at t (processor sharing: a node in k sessions
gives each 1/k of its rates). Approximation: k is fixed when the session starts (a session is not sped up
or slowed down when others start or finish later). Overheads are latency, not node throughput: not shared.

Faults: a session with a participant down at its start fails after `command_overhead`; one whose
participant goes down while it runs fails at that moment; otherwise it fails with probability
`session_failure_rate` (seeded), at its modelled end (the whole duration is spent).
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ringward.repair import NodeBacklog, RepairCommand, SessionResult
from ringward.ring import Ring, TokenRange

from ringward_fleetsim.spec import RING_TOKENS, FleetSpec, SimCatalog

__all__ = ["EPOCH", "DurationModel", "SessionRecord", "SimCluster", "SimNodetool", "VirtualClock", "VirtualSessionPool"]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
MiB = 2**20


class VirtualClock:
    """Simulated time: `now()` is EPOCH + `t` seconds; `sleep` advances it at once."""

    def __init__(self, start: datetime = EPOCH) -> None:
        self.start = start
        self.t = 0.0

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.t)

    def sleep(self, seconds: float) -> None:
        self.t += max(0.0, seconds)

    def advance_to(self, t: float) -> None:
        self.t = max(self.t, t)


@dataclass(frozen=True)
class DurationModel:
    command_overhead: float = 1.5  # s per repair command: nodetool/JMX round trip + prepare
    session_overhead: float = 0.5  # s per repair session (distinct replica set) in the command
    validation_rate: float = 64 * MiB  # bytes/s one node reads and hashes for Merkle trees
    stream_rate: float = 24 * MiB  # bytes/s one node streams
    mismatch_share: float = 0.01  # share of the compared data that differs and is streamed
    table_overhead: float = 0.0  # s per table per session (a repair job)
    range_overhead: float = 0.0  # s per range (x per table when `range_per_table`)
    range_per_table: bool = True
    in_process_overhead: float = 0.0  # s per command started in the node's process (AutoRepair), for command_overhead

    @classmethod
    def calibrated(cls, path: Path | None = None) -> DurationModel:
        """The terms fitted on real repair sessions (benchmarks/calibrate_terms.py, `calibration_refit.json`):
        command, session, per-table, per-range, validation and streaming (seconds per byte of missed writes =
        1 / stream_rate; the share of data that differs, `mismatch_share`, keeps its assumed value) from nodetool
        commands, and AutoRepair's in-process overhead with those terms held."""
        from ringward_fleetsim.calibration import load_model

        return cls(**load_model(path))

    @classmethod
    def calibrated_three_terms(cls) -> DurationModel:
        """The first fit (benchmarks/calibrate_cost.py, `calibration.json`, 2026-11-28): both overheads and the
        validation rate on one table in sync; every other term as assumed. Kept so its figures can be re-run."""
        from ringward_fleetsim.calibration import load_terms

        terms, _record = load_terms()
        if terms.seconds_per_byte <= 0 or terms.command_overhead < 0 or terms.session_overhead < 0:
            raise ValueError(f"calibration.json holds terms no duration can have: {terms}")
        return cls(command_overhead=terms.command_overhead, session_overhead=terms.session_overhead,
                   validation_rate=1 / terms.seconds_per_byte)  # fmt: skip

    def scaled(self, factor: float) -> DurationModel:
        """Every cost `factor` times as large (overheads x factor, rates / factor): the sensitivity rows."""
        fixed = self.scaled_fixed(factor)
        return replace(fixed, validation_rate=self.validation_rate / factor, stream_rate=self.stream_rate / factor)

    def scaled_fixed(self, factor: float) -> DurationModel:
        """The fixed terms alone `factor` times as large (command, session, per-table, per-range and in-process
        overheads; the per-byte rates as they are): the sensitivity rows on the fixed costs."""
        return replace(
            self,
            command_overhead=self.command_overhead * factor,
            session_overhead=self.session_overhead * factor,
            table_overhead=self.table_overhead * factor,
            range_overhead=self.range_overhead * factor,
            in_process_overhead=self.in_process_overhead * factor,
        )

    @property
    def seconds_per_byte(self) -> float:
        """Validation plus the streamed share, per byte of one replica's copy, alone on its nodes (k = 1)."""
        return 1 / self.validation_rate + self.mismatch_share / self.stream_rate

    def fixed(self, sessions: int = 1, tables: int = 1, ranges: int = 1) -> float:
        """The session, per-table and per-range terms of a command (not its command overhead)."""
        trees = ranges * tables if self.range_per_table else ranges
        return sessions * (self.session_overhead + tables * self.table_overhead) + trees * self.range_overhead

    def seconds(
        self,
        bytes_per_replica: float,
        sessions: int = 1,
        k: float = 1.0,
        *,
        validation_factor: float = 1.0,
        command_overhead: float | None = None,
        tables: int = 1,
        ranges: int = 1,
    ) -> float:
        """`validation_factor`: validations one after another (DC-aware validation: the most replicas in one DC);
        `command_overhead`: instead of the model's (`in_process_overhead` for a repair started in-process, without
        nodetool/JMX); `tables`, `ranges`: the command's tables and token ranges (over its sessions)."""
        data = (
            k * bytes_per_replica * (validation_factor / self.validation_rate + self.mismatch_share / self.stream_rate)
        )
        fixed = self.command_overhead if command_overhead is None else command_overhead
        return fixed + self.fixed(sessions, tables, ranges) + data


@dataclass(frozen=True)
class SessionRecord:
    start: float
    end: float
    nodes: tuple[str, ...]
    keyspace: str
    tables: tuple[str, ...]
    ranges: tuple[TokenRange, ...]
    ok: bool
    error: str | None = None


@dataclass
class _Stats:
    sessions: int = 0
    failed: int = 0
    node_seconds: list[float] = field(default_factory=list)  # session-seconds per node id


class SimCluster:
    """The simulated cluster: ring (with joins), catalog, fault state, node concurrency, session log.

    Nodes are numbered (`ids`) for speed; the anchors use the numeric API (`begin`/`end`), the virtual
    pool the command API. `record=False` keeps only counters (a fleet night is millions of sessions).
    """

    def __init__(
        self,
        spec: FleetSpec,
        model: DurationModel | None = None,
        clock: VirtualClock | None = None,
        record: bool = True,
    ) -> None:
        self.spec = spec
        self.model = model or DurationModel()
        self.clock = clock or VirtualClock()
        self.record = record
        self.initial_ring = Ring.of(spec.initial_nodes())
        self.catalog = SimCatalog(spec, self.initial_ring)
        self._joins = sorted(
            ((j.at, spec.joined_node(j, i)) for i, j in enumerate(spec.faults.joins)), key=lambda pair: pair[0]
        )
        self._rings: dict[int, Ring] = {0: self.initial_ring}
        addresses = [n.address for n in self.initial_ring.nodes] + [n.address for _, n in self._joins]
        self.ids = {address: i for i, address in enumerate(addresses)}
        self.addresses = addresses
        self.active = [0] * len(addresses)
        self._down: list[list[tuple[float, float]]] = [[] for _ in addresses]
        for down in spec.faults.down:
            self._down[self.ids[down.address]].append((down.start, down.end))
        self.any_down = bool(spec.faults.down)
        self._faulty = frozenset(self.ids[d.address] for d in spec.faults.down)  # nodes with a down window
        self.failure_rate = spec.faults.session_failure_rate
        self._rng = random.Random(f"{spec.seed}:session-failures")
        per_token: dict[str, dict[str, float]] = {}
        for table in self.catalog.table_specs():
            per_token.setdefault(table.keyspace, {})[table.name] = table.bytes / RING_TOKENS
        self._per_token = per_token
        self._unit_per_token: dict[tuple[str, tuple[str, ...]], float] = {}
        self.stats = _Stats(node_seconds=[0.0] * len(addresses))
        self.log: list[SessionRecord] = []

    # -- topology and faults ------------------------------------------------------------------------------
    def ring(self, t: float | None = None) -> Ring:
        """The ring at `t` (default: now): joined nodes appear from their join time."""
        t = self.clock.t if t is None else t
        joined = sum(1 for at, _ in self._joins if at <= t)
        if joined not in self._rings:
            self._rings[joined] = Ring.of([*self.initial_ring.nodes, *(n for _, n in self._joins[:joined])])
        return self._rings[joined]

    def is_up(self, node: int, t: float) -> bool:
        return not any(start <= t < end for start, end in self._down[node])

    def up_again(self, node: int, t: float) -> float:
        """When `node` (down at t) is up again."""
        while True:
            ends = [end for start, end in self._down[node] if start <= t < end]
            if not ends:
                return t
            t = max(ends)

    def next_change(self, t: float) -> float:
        """The first time after `t` at which a node goes down, comes back or joins (inf: never)."""
        times = [at for at, _ in self._joins if at > t]
        times += [edge for windows in self._down for window in windows for edge in window if edge > t]
        return min(times, default=float("inf"))

    def status(self, t: float | None = None) -> dict[str, str]:
        t = self.clock.t if t is None else t
        ring = self.ring(t)
        # Only nodes with a down window can be down; the rest are up (asked once per scheduler step).
        down = {a for a, i in self.ids.items() if self._down[i] and not self.is_up(i, t)} if self.any_down else set()
        return {n.address: "DN" if n.address in down else "UN" for n in ring.nodes}

    def bytes_per_token(self, keyspace: str, tables: Sequence[str] = ()) -> float:
        key = (keyspace, tuple(tables))
        value = self._unit_per_token.get(key)
        if value is None:
            sizes = self._per_token[keyspace]
            value = self._unit_per_token[key] = sum(sizes[t] for t in tables) if tables else sum(sizes.values())
        return value

    def table_count(self, keyspace: str) -> int:
        """The tables of `keyspace` (a command naming none repairs them all)."""
        return len(self._per_token[keyspace])

    # -- sessions -----------------------------------------------------------------------------------------
    def begin(
        self,
        nodes: Sequence[int],
        bytes_per_replica: float,
        t: float,
        sessions: int = 1,
        *,
        validation_factor: float = 1.0,
        command_overhead: float | None = None,
        tables: int = 1,
        ranges: int = 1,
    ) -> tuple[float, bool]:
        """Start a session on `nodes` at `t`: (end time, succeeded). Call `end(nodes, ...)` at the end time.
        `validation_factor`, `command_overhead`, `tables`, `ranges`: as `DurationModel.seconds`."""
        model = self.model
        active = self.active
        k = 1 + max([active[n] for n in nodes])
        duration = model.seconds(
            bytes_per_replica, sessions, k, validation_factor=validation_factor, command_overhead=command_overhead,
            tables=tables, ranges=ranges,
        )  # fmt: skip
        ok = True
        if self.any_down and not self._faulty.isdisjoint(nodes):
            for n in nodes:
                if not self.is_up(n, t):
                    duration, ok = model.command_overhead if command_overhead is None else command_overhead, False
                    break
            if ok:
                end = t + duration
                for n in nodes:
                    for start, _ in self._down[n]:
                        if t < start < end:
                            end, ok = start, False
                duration = end - t
        if ok and self.failure_rate and self._rng.random() < self.failure_rate:
            ok = False
        for n in nodes:
            active[n] += 1
        return t + duration, ok

    def end(self, nodes: Sequence[int], start: float, end: float, ok: bool) -> None:
        stats = self.stats
        stats.sessions += 1
        if not ok:
            stats.failed += 1
        seconds = stats.node_seconds
        for n in nodes:
            self.active[n] -= 1
            seconds[n] += end - start

    def note(self, nodes: Sequence[int], start: float, end: float, keyspace: str, tables: Sequence[str],
             ranges: Sequence[TokenRange], ok: bool) -> None:  # fmt: skip
        """Log one session (when recording)."""
        if self.record:
            addresses = tuple(self.addresses[n] for n in nodes)
            error = None if ok else self.error_of(nodes, start)
            self.log.append(SessionRecord(start, end, addresses, keyspace, tuple(tables), tuple(ranges), ok, error))

    def error_of(self, nodes: Sequence[int], start: float) -> str:
        down = [self.addresses[n] for n in nodes if not self.is_up(n, start)]
        if down:
            return f"Endpoint not alive: {', '.join(down)}"
        return "repair session failed (simulated)"


@dataclass
class _Running:
    end: float
    seq: int
    command: RepairCommand
    nodes: tuple[int, ...]
    start: float
    ok: bool

    def __lt__(self, other: _Running) -> bool:
        return (self.end, self.seq) < (other.end, other.seq)


class VirtualSessionPool:
    """The executor's SessionPool in virtual time: `submit` starts a command now, `wait(timeout)` advances
    the clock to the earliest of now + timeout and the next completion and returns what finished."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self._heap: list[_Running] = []
        self._seq = 0
        self.closed = False

    def submit(self, command: RepairCommand) -> None:
        if self.closed:
            raise RuntimeError("the session pool is closed")
        cluster = self.cluster
        t = cluster.clock.t
        nodes = tuple(cluster.ids[a] for a in command.replicas)
        width = sum(r.width() for r in command.ranges)
        bytes_per_replica = width * cluster.bytes_per_token(command.keyspace, command.tables)
        tables = len(command.tables) or cluster.table_count(command.keyspace)
        end, ok = cluster.begin(nodes, bytes_per_replica, t, tables=tables, ranges=len(command.ranges))
        self._seq += 1
        heapq.heappush(self._heap, _Running(end, self._seq, command, nodes, t, ok))

    @property
    def running(self) -> int:
        return len(self._heap)

    def wait(self, timeout: float) -> list[tuple[RepairCommand, SessionResult]]:
        clock = self.cluster.clock
        target = clock.t + max(0.0, timeout) if math.isfinite(timeout) else math.inf
        if self._heap:
            target = min(target, self._heap[0].end)
        if math.isfinite(target):
            clock.advance_to(target)
        done: list[tuple[RepairCommand, SessionResult]] = []
        while self._heap and self._heap[0].end <= clock.t:
            job = heapq.heappop(self._heap)
            done.append((job.command, self._finish(job)))
        return done

    def _finish(self, job: _Running) -> SessionResult:
        cluster = self.cluster
        cluster.end(job.nodes, job.start, job.end, job.ok)
        error = None if job.ok else cluster.error_of(job.nodes, job.start)
        if cluster.record:
            cluster.log.append(
                SessionRecord(job.start, job.end, job.command.replicas, job.command.keyspace, job.command.tables,
                              job.command.ranges, job.ok, error)
            )  # fmt: skip
        return SessionResult(job.ok, job.end - job.start, error)

    def close(self) -> None:
        """Closing abandons what still runs (their nodes are released)."""
        for job in self._heap:
            self.cluster.end(job.nodes, job.start, self.cluster.clock.t, False)
        self._heap.clear()
        self.closed = True


class SimNodetool:
    """What the nightly repair asks nodetool, answered by the simulated cluster at the clock's now."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.clock = cluster.clock  # the virtual time its answers and sessions are in
        self.pools: list[VirtualSessionPool] = []
        self._live: tuple[float, float, set[str]] | None = None  # valid from, until (exclusive), who is up

    def status(self, address: str | None = None) -> dict[str, str]:
        return self.cluster.status()

    def live_nodes(self) -> set[str]:
        # Kept until the next fault or join: the executor asks before every scan (the DAG every 15 s).
        t = self.cluster.clock.t
        if self._live is None or not self._live[0] <= t < self._live[1]:
            up = {a for a, state in self.status().items() if state == "UN"}
            self._live = (t, self.cluster.next_change(t), up)
        return self._live[2]

    def prepare(self) -> None:
        return None

    def close(self) -> None:
        return None

    def terminate_all(self) -> None:
        return None

    def abort_repairs(self, address: str) -> None:
        return None

    def backlog(self, address: str, keyspaces: Sequence[str] = ()) -> NodeBacklog:
        """What the back-pressure check reads; the simulated nodes have no backlog."""
        return NodeBacklog()

    def out_of_sync(self, command: RepairCommand) -> dict[str, int]:
        """What a preview of `command` finds ("keyspace.table" -> ranges out of sync, as nodetool's summary
        parsed): every range of the tables the spec's faults name `out_of_sync`."""
        wanted = set(self.cluster.spec.faults.out_of_sync)
        if not wanted:
            return {}
        tables = command.tables or tuple(self.cluster.spec.table_list())
        names = (f"{command.keyspace}.{table}" for table in tables)
        return {name: len(command.ranges) for name in names if name in wanted}

    def session_pool(self) -> VirtualSessionPool:
        pool = VirtualSessionPool(self.cluster)
        self.pools.append(pool)
        return pool


def node_ids(cluster: SimCluster, addresses: Iterable[str]) -> tuple[int, ...]:
    return tuple(cluster.ids[a] for a in addresses)
