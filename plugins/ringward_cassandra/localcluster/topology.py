"""Topologies of the embedded local cluster: which nodes, where, with which tokens."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ringward.errors import ConfigurationError

__all__ = ["AUTO_REPAIR_TYPES", "PRESETS_DIR", "LocalNode", "Topology", "load_topology"]

PRESETS_DIR = Path(__file__).parent / "topologies"
AUTO_REPAIR_TYPES = ("full", "incremental", "preview_repaired")


@dataclass(frozen=True)
class LocalNode:
    address: str
    datacenter: str
    rack: str
    tokens: tuple[int, ...] = ()
    num_tokens: int = 0

    @property
    def name(self) -> str:
        return "node" + self.address.rsplit(".", 1)[1]

    @property
    def jmx_port(self) -> int:
        # JMX binds 127.0.0.1 only, so each node needs its own port: 7200 for 127.0.0.2, 7300 for .3 ...
        return 7000 + 100 * int(self.address.rsplit(".", 1)[1])

    @property
    def token_count(self) -> int:
        return len(self.tokens) or self.num_tokens


@dataclass(frozen=True)
class Topology:
    """A local cluster's nodes and AutoRepair settings, read from a preset or a JSON file.

    "seed" names a preset (`seed.json`, the seed article's cluster), not Cassandra's seed nodes: every node of
    a local cluster is a seed (config.py lists all `addresses` in the seed provider)."""

    name: str
    nodes: tuple[LocalNode, ...]
    # Repair types CEP-37 AutoRepair schedules on every node ("full", "incremental", "preview_repaired"); empty:
    # AutoRepair is off (the nodes start without -Dcassandra.autorepair.enable).
    auto_repair: tuple[str, ...] = ()
    # Further cassandra.yaml `auto_repair` settings, merged over the above (e.g. a short repair_check_interval,
    # or a type listed above but switched off until `nodetool setautorepairconfig` turns it on).
    auto_repair_settings: Mapping[str, Any] = field(default_factory=dict)
    # A production-like cluster: PasswordAuthenticator and CassandraAuthorizer, JMX behind a password file,
    # client-to-node TLS with a test CA (localcluster.security), a least-privilege role for ringward.
    secured: bool = False
    # The Cassandra series its nodes run ("4.1", "4.0"); None: the default (5.0) or `cluster up --cassandra`.
    cassandra: str | None = None

    @property
    def addresses(self) -> list[str]:
        """Every node's address, in the topology's order."""
        return [node.address for node in self.nodes]

    def node(self, address: str) -> LocalNode:
        for node in self.nodes:
            if node.address == address:
                return node
        known = ", ".join(self.addresses)
        raise ConfigurationError(f"No node {address} in topology {self.name!r}.", f"Use one of: {known}.")


def load_topology(name_or_path: str) -> Topology:
    """A preset name or a JSON file path. Presets: `seed` (the seed article's three-node dc1 cluster, the
    default), `secured` (the same nodes with authentication, authorization, JMX passwords and TLS), `two-dc`,
    `autorepair`, `cassandra41` (the seed nodes on Cassandra 4.1) (topologies/*.json)."""
    path = Path(name_or_path)
    if not path.is_file():
        path = PRESETS_DIR / f"{name_or_path}.json"
    if not path.is_file():
        presets = ", ".join(sorted(p.stem for p in PRESETS_DIR.glob("*.json")))
        raise ConfigurationError(
            f"Topology {name_or_path!r} is neither a file nor a preset.",
            f"Give a JSON file or one of: {presets}.",
        )
    try:
        document = json.loads(path.read_text())
        nodes = tuple(_parse_node(entry) for entry in document["nodes"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise ConfigurationError(
            f"Topology file {path} is malformed: {error}.",
            'Write {"nodes": [{"address", "datacenter", "rack", "tokens": [...] or "num_tokens": N}]}.',
        ) from error
    if len({n.address for n in nodes}) != len(nodes) or not nodes:
        raise ConfigurationError(f"Topology {path} lists no nodes or a node twice.", "List each node once.")
    auto_repair = tuple(str(kind) for kind in document.get("auto_repair", ()))
    unknown = sorted(set(auto_repair) - set(AUTO_REPAIR_TYPES))
    if unknown:
        raise ConfigurationError(
            f"Topology {path} asks AutoRepair for unknown repair types {unknown}.",
            f"List some of {list(AUTO_REPAIR_TYPES)} under auto_repair.",
        )
    settings = document.get("auto_repair_settings", {})
    if not isinstance(settings, dict) or (settings and not auto_repair):
        raise ConfigurationError(
            f"Topology {path} has auto_repair_settings that are not a mapping, or no auto_repair types.",
            "Give auto_repair_settings as cassandra.yaml's auto_repair mapping, with the types under auto_repair.",
        )
    secured = document.get("secured", False)
    if not isinstance(secured, bool):
        raise ConfigurationError(f"Topology {path} has secured={secured!r}.", "Give secured as true or false.")
    cassandra = document.get("cassandra")
    if cassandra is not None and not isinstance(cassandra, str):
        raise ConfigurationError(f"Topology {path} has cassandra={cassandra!r}.", 'Give it as a string, e.g. "4.1".')
    return Topology(name=str(document.get("name", path.stem)), nodes=nodes, auto_repair=auto_repair,
                    auto_repair_settings=settings, secured=secured, cassandra=cassandra)  # fmt: skip


def _parse_node(entry: dict[str, object]) -> LocalNode:
    address = str(entry["address"])
    if not ipaddress.ip_address(address).is_loopback:
        raise ValueError(f"node address {address} is not a loopback address (127.0.0.x)")
    tokens = tuple(int(t) for t in entry.get("tokens", []))  # type: ignore[attr-defined]
    num_tokens = int(entry.get("num_tokens", 0))  # type: ignore[call-overload]
    if not tokens and num_tokens < 1:
        raise ValueError(f"node {address} needs tokens or num_tokens")
    return LocalNode(address, str(entry["datacenter"]), str(entry["rack"]), tokens, num_tokens)
