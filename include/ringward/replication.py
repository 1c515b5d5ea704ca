"""A keyspace's replication settings, as Cassandra stores them and as users write them.

Only the two token-ring strategies are supported: SimpleStrategy and NetworkTopologyStrategy.
Factors are whole replicas; transient replication (`'3/1'`) is refused because ringward's
repair and cleanup plans assume every replica holds full data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ringward.errors import ReplicationError

if TYPE_CHECKING:
    from ringward.ring import Ring

__all__ = ["DEFAULT_KEYSPACE_RF", "NETWORK_TOPOLOGY", "REPLICATION_FACTOR", "SIMPLE", "Replication"]

SIMPLE = "SimpleStrategy"
NETWORK_TOPOLOGY = "NetworkTopologyStrategy"
REPLICATION_FACTOR = "replication_factor"
DEFAULT_KEYSPACE_RF = 1  # cassandra.yaml's default_keyspace_rf

_PACKAGE = "org.apache.cassandra.locator."
_SUPPORTED = (SIMPLE, NETWORK_TOPOLOGY)
_EXAMPLE = '{"class": "NetworkTopologyStrategy", "dc1": 3}'
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
_MAX_INT = 2**31 - 1  # a Java int


@dataclass(frozen=True, eq=False)
class Replication:
    """`strategy` is "SimpleStrategy" or "NetworkTopologyStrategy".

    SimpleStrategy: `factors == {"replication_factor": n}`, or `{}` as requested without a factor.
    NetworkTopologyStrategy: one entry per datacenter (names are case-sensitive), plus optionally the
    Cassandra 4+ `replication_factor` shorthand (lowercase only, as Cassandra reads it) that Cassandra
    expands to every datacenter not listed, or no entry at all (a bare NTS). What Cassandra stores for a
    requested setting is `ringward.stored_replication.altered_replication` (`expand` for a CREATE).
    """

    strategy: str
    factors: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.strategy not in _SUPPORTED:
            raise _unsupported_strategy(self.strategy)
        factors: dict[str, int] = {}
        for key, value in self.factors.items():
            name = _dc_name(key)
            if name != REPLICATION_FACTOR and name.lower() == REPLICATION_FACTOR:
                raise ReplicationError(
                    f"Option {name!r} is not the replication_factor shorthand: Cassandra reads only the "
                    f"lowercase key, and refuses {name!r} as an unknown option of {self.strategy}.",
                    "Write 'replication_factor' in lowercase.",
                )
            if name in factors:
                raise ReplicationError(f"Option {name!r} is given twice.", "Give each option once.")
            factors[name] = _factor(name, value)
        if self.strategy == SIMPLE and not set(factors) <= {REPLICATION_FACTOR}:
            raise ReplicationError(
                f"SimpleStrategy takes one option, replication_factor; got {sorted(factors)} "
                "(Cassandra refuses unrecognized strategy options).",
                'Write {"class": "SimpleStrategy", "replication_factor": 3}, or use '
                "NetworkTopologyStrategy for per-datacenter factors.",
            )
        object.__setattr__(self, "factors", factors)

    @classmethod
    def parse(cls, value: str | Mapping[str, object]) -> Replication:
        """From JSON text or a mapping: `system_schema.keyspaces.replication` or a CQL-style map."""
        options = _load_options(value) if isinstance(value, str) else value
        if not isinstance(options, Mapping):
            raise ReplicationError("The replication settings are not a map.", f"Give a JSON object like {_EXAMPLE}.")
        if "class" not in options:
            raise ReplicationError("The replication settings have no 'class'.", f"Name the strategy, as in {_EXAMPLE}.")
        strategy = _strategy_name(options["class"])
        raw_factors = {key: raw for key, raw in options.items() if key != "class"}
        return cls(strategy, raw_factors)  # factors are validated and converted in __post_init__

    @classmethod
    def simple(cls, replication_factor: int) -> Replication:
        return cls(SIMPLE, {REPLICATION_FACTOR: replication_factor})

    @classmethod
    def network_topology(cls, factors: Mapping[str, int]) -> Replication:
        return cls(NETWORK_TOPOLOGY, factors)

    @property
    def is_simple(self) -> bool:
        return self.strategy == SIMPLE

    @property
    def default_factor(self) -> int | None:
        """NetworkTopologyStrategy's `replication_factor` shorthand, if given (not yet expanded)."""
        if self.is_simple:
            return None
        return self.factors.get(REPLICATION_FACTOR)

    def datacenters(self) -> tuple[str, ...]:
        """Datacenters named explicitly (NetworkTopologyStrategy); SimpleStrategy names none."""
        if self.is_simple:
            return ()
        return tuple(dc for dc in self.factors if dc != REPLICATION_FACTOR)

    def factor_for(self, dc: str) -> int:
        """Replicas wanted in `dc`. SimpleStrategy ignores datacenters: its ring-wide factor.

        A setting requested without factors means what Cassandra would store for it on CREATE
        (`default_keyspace_rf` 1): see `expand`.
        """
        if self.is_simple:
            return self.factors.get(REPLICATION_FACTOR, DEFAULT_KEYSPACE_RF)
        if dc in self.factors and dc != REPLICATION_FACTOR:
            return self.factors[dc]
        if not self.factors:
            return DEFAULT_KEYSPACE_RF
        return self.default_factor or 0

    def expand(self, ring_dcs: Iterable[str], previous: Replication | None = None) -> Replication:
        """The options Cassandra 5.0 stores for this setting, as requested on a keyspace whose current
        setting is `previous` (None: CREATE KEYSPACE), with `default_keyspace_rf` 1.

        See `ringward.stored_replication.altered_replication` for the rules (CASSANDRA-14303 auto-expansion, bare
        NetworkTopologyStrategy, SimpleStrategy without a factor). Zero factors are dropped; a setting left
        without any replica places none here (whether an ALTER to it is refused is the plan's question).
        """
        from ringward.stored_replication import altered_replication

        return altered_replication(previous, self, ring_dcs, refuse_no_replicas=False)

    def total_factor(self, ring: Ring) -> int:
        """Replicas each range actually gets on `ring` (factors capped at the nodes available)."""
        stored = self.expand(ring.datacenters())
        if stored.is_simple:
            return min(stored.factor_for(""), len(ring.nodes))
        return sum(min(stored.factor_for(dc), len(nodes)) for dc, nodes in ring.datacenters().items())

    def as_json(self) -> dict[str, str | int]:
        return {"class": self.strategy, **self.factors}

    def to_cql(self) -> str:
        """The CQL map literal for `ALTER KEYSPACE ... WITH replication = <this>`."""
        entries = [("class", self.strategy), *((key, str(n)) for key, n in self.factors.items())]
        return "{" + ", ".join(f"{_cql_string(k)}: {_cql_string(v)}" for k, v in entries) + "}"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Replication):
            return NotImplemented
        return self.strategy == other.strategy and dict(self.factors) == dict(other.factors)

    def __hash__(self) -> int:
        return hash((self.strategy, frozenset(self.factors.items())))

    def __str__(self) -> str:
        return self.to_cql()

    def describe(self) -> str:
        """As people read it: `SimpleStrategy RF 3`, `NetworkTopologyStrategy {dc1: 3, dc2: 3}` (the Cassandra
        4+ shorthand as `other DCs: 3`). Plain text from the typed value: whoever shows it escapes it."""
        if self.is_simple:
            factor = self.factors.get(REPLICATION_FACTOR)
            return f"SimpleStrategy RF {factor}" if factor is not None else "SimpleStrategy (default RF)"
        entries = [f"{dc}: {n}" for dc, n in self.factors.items() if dc != REPLICATION_FACTOR]
        if REPLICATION_FACTOR in self.factors:
            entries.append(f"other DCs: {self.factors[REPLICATION_FACTOR]}")
        return f"{self.strategy} {{{', '.join(entries)}}}"


def _cql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _load_options(text: str) -> object:
    """JSON text from a user (CLI, a DAG param): every way it can fail is a refusal, never a traceback."""
    try:
        return json.loads(text, object_pairs_hook=_unique_options)
    except json.JSONDecodeError as error:
        raise ReplicationError(
            f"The replication settings are not valid JSON ({error.msg} at position {error.pos}).",
            f"Give a JSON object with double-quoted keys, like {_EXAMPLE}.",
        ) from None
    except RecursionError:
        raise ReplicationError(
            "The replication settings are nested too deeply to read (arrays or objects inside each other).",
            f"Give one flat JSON object, like {_EXAMPLE}.",
        ) from None
    except ValueError as error:  # e.g. a number longer than Python reads (4300 digits)
        raise ReplicationError(
            f"The replication settings are not valid JSON ({error}).", f"Give a JSON object like {_EXAMPLE}."
        ) from None


def _unique_options(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object's keys, refusing one given twice (json.loads would keep the last one silently)."""
    options: dict[str, object] = {}
    for key, value in pairs:
        if key in options:
            raise ReplicationError(
                f"Option {key!r} is given twice in the replication JSON; only one of its values could apply.",
                "Give each datacenter once ('class' too).",
            )
        options[key] = value
    return options


def _strategy_name(raw: object) -> str:
    if not isinstance(raw, str) or not raw:
        raise ReplicationError(f"The replication 'class' {raw!r} is not a strategy name.", f"See {_EXAMPLE}.")
    name = raw.removeprefix(_PACKAGE)
    if name not in _SUPPORTED:
        raise _unsupported_strategy(raw)
    return name


def _unsupported_strategy(name: str) -> ReplicationError:
    return ReplicationError(
        f"Replication strategy {name!r} is not supported: ringward computes placement for "
        "SimpleStrategy and NetworkTopologyStrategy only (LocalStrategy, EverywhereStrategy and "
        "custom strategies place replicas differently).",
        "Use 'SimpleStrategy' or 'NetworkTopologyStrategy' (names are case-sensitive), or change "
        "this keyspace by hand.",
    )


def _dc_name(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise ReplicationError(
            f"Replication option name {key!r} is not a non-empty string.",
            "Name each datacenter exactly as `nodetool status` prints it.",
        )
    return key


def _factor(key: str, raw: object) -> int:
    """A whole replica count as Cassandra reads it (`Integer.valueOf`: an optional sign and ASCII digits,
    no spaces); JSON numbers are taken as the same count."""
    if isinstance(raw, str) and "/" in raw:
        raise ReplicationError(
            f"Transient replication ({key}: {raw!r}) is not supported.",
            "Give whole replica counts only, e.g. '3', and change transient keyspaces by hand.",
        )
    factor: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        factor = raw
    elif isinstance(raw, str) and _WHOLE_NUMBER.fullmatch(raw):
        factor = int(raw)
    if factor is None or factor < 0 or factor > _MAX_INT:
        raise ReplicationError(
            f"Replication factor {raw!r} for {key!r} is not a non-negative whole number (Cassandra refuses it too).",
            f"Give {key!r} a count of replicas such as 3 (0 removes the datacenter), without spaces.",
        )
    return factor
