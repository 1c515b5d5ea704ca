"""Per-node configuration files of the local cluster (Cassandra ships no conf/ in its Maven artifacts)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ringward_cassandra.localcluster.security import ClusterSecrets
from ringward_cassandra.localcluster.topology import LocalNode, Topology

__all__ = ["node_settings", "write_node_config"]

# Cassandra 4.0 rejects these 4.1+/5.0 names; it wants its own (durations as plain milliseconds).
_NAMES_BEFORE_4_1 = {
    "commitlog_sync_period": "commitlog_sync_period_in_ms",
    "read_request_timeout": "read_request_timeout_in_ms",
    "range_request_timeout": "range_request_timeout_in_ms",
    "write_request_timeout": "write_request_timeout_in_ms",
    "request_timeout": "request_timeout_in_ms",
    "materialized_views_enabled": "enable_materialized_views",
    "user_defined_functions_enabled": "enable_user_defined_functions",
}

_LOGBACK = """<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log_dir}/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{{ISO8601}} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <logger name="org.apache.cassandra" level="INFO"/>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def write_node_config(
    topology: Topology,
    node: LocalNode,
    node_dir: Path,
    cluster_name: str,
    secrets: ClusterSecrets | None = None,
    version: tuple[int, int] = (5, 0),
) -> Path:
    """Write cassandra.yaml, cassandra-rackdc.properties and logback.xml; return the conf dir.

    `secrets` (a secured topology): password authentication, role-based authorization, client TLS.
    `version`: the Cassandra series the node runs ((4, 1), (4, 0)): each accepts only its own yaml names."""
    conf = node_dir / "conf"
    data = node_dir / "data"
    for folder in (conf, data / "data", data / "commitlog", data / "saved_caches", data / "hints",
                   node_dir / "logs"):  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
    settings = node_settings(topology, node, data, cluster_name, secrets, version)
    if secrets is not None:
        conf.chmod(0o700)  # cassandra.yaml then holds the key store's password
    (conf / "cassandra.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    (conf / "cassandra-rackdc.properties").write_text(f"dc={node.datacenter}\nrack={node.rack}\nprefer_local=true\n")
    (conf / "logback.xml").write_text(_LOGBACK.format(log_dir=node_dir / "logs"))
    return conf


def node_settings(
    topology: Topology,
    node: LocalNode,
    data: Path,
    cluster_name: str,
    secrets: ClusterSecrets | None = None,
    version: tuple[int, int] = (5, 0),
) -> dict[str, object]:
    """One node's cassandra.yaml settings, in the names its Cassandra series accepts."""
    settings: dict[str, object] = {
        "cluster_name": cluster_name,
        "partitioner": "org.apache.cassandra.dht.Murmur3Partitioner",
        "endpoint_snitch": "GossipingPropertyFileSnitch",
        "seed_provider": [
            {
                "class_name": "org.apache.cassandra.locator.SimpleSeedProvider",
                "parameters": [{"seeds": ",".join(topology.addresses)}],  # every node is a seed
            }
        ],
        "listen_address": node.address,
        "rpc_address": node.address,
        "native_transport_port": 9042,
        "storage_port": 7000,
        "commitlog_sync": "periodic",
        "commitlog_sync_period": "10000ms",
        "data_file_directories": [str(data / "data")],
        "commitlog_directory": str(data / "commitlog"),
        "saved_caches_directory": str(data / "saved_caches"),
        "hints_directory": str(data / "hints"),
        # Every node is a seed and none bootstraps: the cluster forms at once with the tokens given.
        "auto_bootstrap": False,
        "auto_snapshot": False,
        "storage_compatibility_mode": "NONE",
        "concurrent_compactors": 1,
        "num_tokens": node.token_count,
        "authenticator": "AllowAllAuthenticator",
        "authorizer": "AllowAllAuthorizer",
        "read_request_timeout": "10000ms",
        "range_request_timeout": "20000ms",
        "write_request_timeout": "5000ms",
        "request_timeout": "20000ms",
        # Replicas are ranked by rack/DC proximity only, so a coordinator that is a replica serves CL ONE
        # from its own data, as in the seed: host-pinned reads then test that host, deterministically.
        "dynamic_snitch": False,
        "materialized_views_enabled": False,
        "user_defined_functions_enabled": False,
    }
    if node.tokens:
        settings["initial_token"] = ",".join(str(t) for t in node.tokens)
    else:
        settings["allocate_tokens_for_local_replication_factor"] = 3
    if secrets is not None:
        settings.update(_secured_settings(secrets))
    if topology.auto_repair:
        # CEP-37 AutoRepair (the JVM also needs -Dcassandra.autorepair.enable=true, see LocalCluster._spawn).
        auto_repair: dict[str, Any] = {
            "enabled": True,
            "repair_type_overrides": {kind: {"enabled": True} for kind in topology.auto_repair},
        }
        _merge(auto_repair, topology.auto_repair_settings)
        settings["auto_repair"] = auto_repair
    return _for_series(settings, version)


def _for_series(settings: dict[str, object], version: tuple[int, int]) -> dict[str, object]:
    """5.0's settings as `version` names them: 4.1 has no storage_compatibility_mode (5.0's SSTable and
    messaging formats), 4.0 also predates the 4.1 renames (`*_in_ms` integers, `enable_*`)."""
    if version >= (5, 0):
        return settings
    settings = {k: v for k, v in settings.items() if k != "storage_compatibility_mode"}
    if version >= (4, 1):
        return settings
    renamed: dict[str, object] = {}
    for key, value in settings.items():
        new = _NAMES_BEFORE_4_1.get(key, key)
        if new.endswith("_in_ms") and isinstance(value, str):
            value = int(value.removesuffix("ms"))
        renamed[new] = value
    return renamed


def _secured_settings(secrets: ClusterSecrets) -> dict[str, object]:
    return {
        "authenticator": "PasswordAuthenticator",
        "authorizer": "CassandraAuthorizer",
        "role_manager": "CassandraRoleManager",
        # Roles are read at LOCAL_QUORUM by default: with a node down (the crash tests) a login could fail.
        # system_auth is replicated to every node at setup, so ONE always finds the role.
        "auth_read_consistency_level": "ONE",
        "client_encryption_options": {
            "enabled": True,
            "optional": False,
            "keystore": secrets.keystore,
            "keystore_password": secrets.store_password,
            "store_type": "PKCS12",
            "require_client_auth": False,
        },
    }


def _merge(into: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """`overrides` merged into `into`, mapping by mapping (a leaf of `overrides` wins)."""
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = dict(value) if isinstance(value, Mapping) else value
