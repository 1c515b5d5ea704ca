"""Fleet specs and the synthetic cluster they describe: ring, schema, sizes, replication, faults.

Everything derives from the spec and its seed, so two runs of one spec see the same cluster. Sizes:
each table's data (one replica's copy) is log-normal around `table_bytes_median`, a few tables are
`outlier_factor` times larger; data spreads over the token space uniformly (Murmur3), so a range holds
`table bytes x range width / 2^64` of each table on every one of its replicas.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ringward.repair import NodeBacklog, NodeSizeEstimate, SizeEstimate, TableFeatures
from ringward.replication import Replication
from ringward.ring import MAX_TOKEN, MIN_TOKEN, Node, Ring

__all__ = ["RING_TOKENS", "SYSTEM_TABLES", "Faults", "FleetSpec", "NodeDown", "NodeJoin", "SimCatalog", "TableSpec"]

RING_TOKENS = 2**64
GiB = 2**30
MiB = 2**20
KiB = 2**10
# The replicated keyspaces a real Cassandra 5.0 cluster running ringward holds beside its own, which the nightly
# repair's default selection (`keyspaces: include ["*"], exclude ["system_traces"]`, node-local keyspaces never)
# plans too: (keyspace, table, one replica's copy in bytes, gc_grace_seconds). Tables as Cassandra 5.0 creates
# them (AuthKeyspace: 90 days of gc_grace; SystemDistributedKeyspace: the default 10 days) and ringward_ops' own
# (plugins/ringward_cassandra/ops/schema.py, the default 10 days). Sizes are assumptions of a fleet's: a few
# hundred roles; the repair history of 2.5 million segments (~250 B a row) and a night's stored plan.
SYSTEM_TABLES: tuple[tuple[str, str, int, int], ...] = (
    ("system_auth", "roles", 256 * KiB, 7_776_000),
    ("system_auth", "role_members", 64 * KiB, 7_776_000),
    ("system_auth", "role_permissions", 1 * MiB, 7_776_000),
    ("system_auth", "resource_role_permissons_index", 512 * KiB, 7_776_000),  # sic: Cassandra's spelling
    ("system_auth", "network_permissions", 64 * KiB, 7_776_000),
    ("system_auth", "cidr_groups", 16 * KiB, 7_776_000),
    ("system_auth", "cidr_permissions", 16 * KiB, 7_776_000),
    ("system_auth", "identity_to_role", 16 * KiB, 7_776_000),
    ("system_distributed", "parent_repair_history", 64 * MiB, 864_000),
    ("system_distributed", "repair_history", 512 * MiB, 864_000),
    ("system_distributed", "view_build_status", 16 * KiB, 864_000),
    ("system_distributed", "partition_denylist", 16 * KiB, 864_000),
    ("ringward_ops", "leases", 16 * KiB, 864_000),
    ("ringward_ops", "migration_journal", 64 * MiB, 864_000),
    ("ringward_ops", "migrations", 64 * MiB, 864_000),
    ("ringward_ops", "migration_runs", 64 * KiB, 864_000),
    ("ringward_ops", "migration_pages", 64 * MiB, 864_000),  # one fleet migration's page view: ~55 MB
    ("ringward_ops", "migration_progress", 1 * MiB, 864_000),  # its stages' progress: <= 256 KB a stage
    ("ringward_ops", "repair_runs", 16 * MiB, 864_000),
    ("ringward_ops", "repair_switch", 16 * KiB, 864_000),
    ("ringward_ops", "controller_pauses", 16 * KiB, 864_000),
    ("ringward_ops", "repair_segments", 640 * MiB, 864_000),
    ("ringward_ops", "repair_type_segments", 16 * KiB, 864_000),
    ("ringward_ops", "repair_plan", 320 * MiB, 864_000),
    ("ringward_ops", "repair_previews", 1 * MiB, 864_000),
    ("ringward_ops", "repair_progress", 64 * KiB, 864_000),
)
_SEED_TOKENS = {  # the local seed cluster (plugins/ringward_cassandra/localcluster/topologies/seed.json)
    "127.0.0.2": ("rack1", (-8151920490432810868, -433108085672519511, 8824499221154258863, 9216178714344602529)),
    "127.0.0.3": ("rack1", (-8556096403387275620, -3855495865544340301, -2848014410424999526, 2896250345574616760)),
    "127.0.0.4": ("rack2", (-443119614084012, 3123411945676703294, 3785937351724272180, 6479672427606371611)),
}


@dataclass(frozen=True)
class TableSpec:
    keyspace: str
    name: str
    bytes: int  # one replica's copy of the whole table
    partitions: int
    gc_grace: int = 864000

    @property
    def qualified(self) -> str:
        return f"{self.keyspace}.{self.name}"


@dataclass(frozen=True)
class NodeDown:
    """`address` is down during [start, end) seconds of simulated time."""

    address: str
    start: float
    end: float


@dataclass(frozen=True)
class NodeJoin:
    """A node joining the ring at `at` seconds with `vnodes` random tokens (seeded)."""

    address: str
    datacenter: str
    rack: str
    at: float
    vnodes: int | None = None  # None: the spec's vnodes


@dataclass(frozen=True)
class Faults:
    down: tuple[NodeDown, ...] = ()
    joins: tuple[NodeJoin, ...] = ()
    session_failure_rate: float = 0.0  # share of sessions that fail (seeded), on top of down nodes
    # "keyspace.table" names whose replicas disagree: a preview of their ranges finds every range out of sync.
    out_of_sync: tuple[str, ...] = ()


@dataclass(frozen=True)
class FleetSpec:
    """A synthetic cluster. `explicit_nodes` (address -> datacenter, rack, tokens) overrides the generated
    ring (the small spec uses the local seed cluster's tokens)."""

    nodes: int = 1000
    vnodes: int = 256
    dcs: int = 3
    racks_per_dc: int = 3
    keyspaces: int = 10
    tables_per_keyspace: int = 20
    rf_per_dc: int = 3
    seed: int = 23
    table_bytes_median: int = 300 * GiB
    table_bytes_sigma: float = 1.0
    outliers: int = 2  # tables `outlier_factor` x larger than their draw
    outlier_factor: float = 20.0
    mean_partition_bytes: int = 2048
    gc_grace: int = 864000
    keyspace_names: tuple[str, ...] = ()  # default ks00, ks01, ...
    table_names: tuple[str, ...] = ()  # default t00, t01, ...
    explicit_nodes: tuple[tuple[str, str, str, tuple[int, ...]], ...] = ()
    faults: Faults = field(default_factory=Faults)
    # The cluster also holds system_auth, system_distributed and ringward_ops (`SYSTEM_TABLES`), replicated as the
    # user keyspaces are (NTS `rf_per_dc` in every DC), as a real deployment runs them. Off by default: the figures
    # recorded before it (docs/benchmarks.md) were taken on the user keyspaces alone.
    system_keyspaces: bool = False

    # -- presets ------------------------------------------------------------------------------------------
    @classmethod
    def small(cls, seed: int = 23, faults: Faults | None = None) -> FleetSpec:
        """The local seed cluster (3 nodes, dc1 over two racks, num_tokens 4) with the autorepair benchmark's
        keyspaces: ar_a/ar_b/ar_c (NTS dc1: 2) x t1/t2, 10 MiB each (60 MiB, `benchmarks/autorepair.py`)."""
        nodes = tuple((a, "dc1", rack, tokens) for a, (rack, tokens) in _SEED_TOKENS.items())
        return cls(
            nodes=3, vnodes=4, dcs=1, racks_per_dc=2, keyspaces=3, tables_per_keyspace=2, rf_per_dc=2, seed=seed,
            table_bytes_median=10 * 2**20, table_bytes_sigma=0.0, outliers=0, mean_partition_bytes=1024,
            keyspace_names=("ar_a", "ar_b", "ar_c"), table_names=("t1", "t2"), explicit_nodes=nodes,
            faults=faults or Faults(),
        )  # fmt: skip

    @classmethod
    def fleet(
        cls,
        nodes: int = 1000,
        vnodes: int = 256,
        dcs: int = 3,
        keyspaces: int = 10,
        tables: int = 20,
        seed: int = 23,
        faults: Faults | None = None,
        **more: Any,
    ) -> FleetSpec:
        return cls(
            nodes=nodes, vnodes=vnodes, dcs=dcs, keyspaces=keyspaces, tables_per_keyspace=tables, seed=seed,
            faults=faults or Faults(), **more,
        )  # fmt: skip

    # -- JSON ---------------------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> FleetSpec:
        data = json.loads(text)
        faults = data.pop("faults", {}) or {}
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        fields.pop("explicit_nodes", None)
        return cls(
            **fields,
            explicit_nodes=tuple((a, dc, r, tuple(t)) for a, dc, r, t in data.get("explicit_nodes", ())),
            faults=Faults(
                down=tuple(NodeDown(**d) for d in faults.get("down", ())),
                joins=tuple(NodeJoin(**j) for j in faults.get("joins", ())),
                session_failure_rate=faults.get("session_failure_rate", 0.0),
                out_of_sync=tuple(faults.get("out_of_sync", ())),
            ),
        )

    def dump(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> FleetSpec:
        return cls.from_json(Path(path).read_text())

    def describe(self) -> str:
        return (
            f"{self.nodes} nodes x {self.vnodes} vnodes x {self.dcs} DC, {self.keyspaces} keyspaces x "
            f"{self.tables_per_keyspace} tables, NTS {self.rf_per_dc}/DC, seed {self.seed}"
        )

    # -- derived ------------------------------------------------------------------------------------------
    def datacenter_names(self) -> list[str]:
        return [f"dc{i + 1}" for i in range(self.dcs)]

    def keyspace_list(self) -> list[str]:
        return list(self.keyspace_names) or [f"ks{i:02d}" for i in range(self.keyspaces)]

    def table_list(self) -> list[str]:
        return list(self.table_names) or [f"t{i:02d}" for i in range(self.tables_per_keyspace)]

    def table_specs(self) -> tuple[TableSpec, ...]:
        rng = random.Random(f"{self.seed}:tables")
        tables: list[TableSpec] = []
        for keyspace in self.keyspace_list():
            for name in self.table_list():
                size = self.table_bytes_median * math.exp(rng.gauss(0.0, self.table_bytes_sigma))
                tables.append(TableSpec(keyspace, name, int(size), 0, self.gc_grace))
        for index in random.Random(f"{self.seed}:outliers").sample(range(len(tables)), min(self.outliers, len(tables))):
            tables[index] = TableSpec(tables[index].keyspace, tables[index].name,
                                      int(tables[index].bytes * self.outlier_factor), 0, self.gc_grace)  # fmt: skip
        drawn = tuple(
            TableSpec(t.keyspace, t.name, t.bytes, max(1, t.bytes // self.mean_partition_bytes), t.gc_grace)
            for t in tables
        )
        if not self.system_keyspaces:
            return drawn
        # After the draws: the user keyspaces' tables are the same with or without them.
        return drawn + tuple(
            TableSpec(keyspace, name, size, max(1, size // self.mean_partition_bytes), gc_grace)
            for keyspace, name, size, gc_grace in SYSTEM_TABLES
        )

    def initial_nodes(self) -> list[Node]:
        if self.explicit_nodes:
            return [Node(a, dc, rack, tuple(tokens)) for a, dc, rack, tokens in self.explicit_nodes]
        rng = random.Random(f"{self.seed}:tokens")
        taken: set[int] = set()
        nodes: list[Node] = []
        names = self.datacenter_names()
        for index in range(self.nodes):
            dc = index % self.dcs
            rack = (index // self.dcs) % self.racks_per_dc
            address = f"10.{dc + 1}.{index // 250}.{index % 250 + 1}"
            nodes.append(Node(address, names[dc], f"rack{rack + 1}", _random_tokens(rng, self.vnodes, taken)))
        return nodes

    def joined_node(self, join: NodeJoin, index: int) -> Node:
        rng = random.Random(f"{self.seed}:join:{index}:{join.address}")
        taken = {t for n in self.initial_nodes() for t in n.tokens}
        return Node(join.address, join.datacenter, join.rack, _random_tokens(rng, join.vnodes or self.vnodes, taken))


def _random_tokens(rng: random.Random, count: int, taken: set[int]) -> tuple[int, ...]:
    """Random vnode tokens (Cassandra's allocate_tokens_for_local_replication_factor would even them out)."""
    tokens: list[int] = []
    while len(tokens) < count:
        token = rng.randint(MIN_TOKEN + 1, MAX_TOKEN)
        if token not in taken:
            taken.add(token)
            tokens.append(token)
    return tuple(tokens)


class SimCatalog:
    """The simulated cluster's schema and sizes, as ringward's `ClusterCatalog` reads a real one."""

    def __init__(self, spec: FleetSpec, ring: Ring) -> None:
        self.spec = spec
        self.ring = ring

    @cached_property
    def _tables(self) -> tuple[TableSpec, ...]:
        return self.spec.table_specs()

    def table_specs(self) -> tuple[TableSpec, ...]:
        return self._tables

    def tables(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for table in self._tables:
            out.setdefault(table.keyspace, {})[table.name] = table.gc_grace
        return out

    def replication(self, keyspace: str) -> Replication:
        if keyspace not in self.tables():
            raise KeyError(keyspace)
        return Replication.network_topology(dict.fromkeys(self.spec.datacenter_names(), self.spec.rf_per_dc))

    def table_features(self) -> dict[str, TableFeatures]:
        """No simulated table has a materialized view or CDC: incremental repair takes every one."""
        return {}

    def table_bytes(self) -> dict[str, int]:
        return {t.qualified: t.bytes for t in self._tables}

    def size_estimates(self, keyspace: str) -> list[NodeSizeEstimate]:
        """One row per table and node: the node's system.size_estimates rows (its primary ranges) summed per
        table, as `CqlCatalog` reads them (`GROUP BY table_name` on each node)."""
        rows: list[NodeSizeEstimate] = []
        owned = self._primary_widths
        for table in (t for t in self._tables if t.keyspace == keyspace):
            mean = max(1, table.bytes // table.partitions)
            per_token = table.partitions / RING_TOKENS
            rows.extend(
                NodeSizeEstimate(keyspace, table.name, address, count, count * mean)
                for address, count in ((a, round(w * per_token)) for a, w in owned.items())
            )
        return rows

    def range_size_estimates(self, keyspace: str) -> list[SizeEstimate]:
        """One row per table and ring range, as system.size_estimates lists the nodes' primary ranges."""
        rows: list[SizeEstimate] = []
        for table in (t for t in self._tables if t.keyspace == keyspace):
            mean = max(1, table.bytes // table.partitions)
            per_token = table.partitions / RING_TOKENS
            for token_range in self.ring.ranges():
                count = round(token_range.width() * per_token)
                rows.append(
                    SizeEstimate(keyspace, table.name, str(token_range.start), str(token_range.end), mean, count)
                )
        return rows

    @cached_property
    def _primary_widths(self) -> dict[str, int]:
        """Node -> the tokens of its primary ranges."""
        owned: dict[str, int] = {}
        for token_range in self.ring.ranges():
            address = self.ring.token_owner[token_range.end].address
            owned[address] = owned.get(address, 0) + token_range.width()
        return owned

    def backlog(self, address: str, keyspaces: Sequence[str] = ()) -> NodeBacklog:
        """Back-pressure inputs of one node: the simulator's nodes have no backlog."""
        self.ring.node(address)
        return NodeBacklog()
