"""Per-node configuration files of the local cluster (Cassandra ships no conf/ in its Maven artifacts)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ringward_cassandra.localcluster.security import ClusterSecrets
from ringward_cassandra.localcluster.topology import LocalNode, Topology

__all__ = ["write_node_config"]

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
    topology: Topology, node: LocalNode, node_dir: Path, cluster_name: str, secrets: ClusterSecrets | None = None
) -> Path:
    """Write cassandra.yaml, cassandra-rackdc.properties and logback.xml; return the conf dir.

    `secrets` (a secured topology): password authentication, role-based authorization, client TLS."""
    conf = node_dir / "conf"
    data = node_dir / "data"
    for folder in (conf, data / "data", data / "commitlog", data / "saved_caches", data / "hints",
                   node_dir / "logs"):  # fmt: skip
        folder.mkdir(parents=True, exist_ok=True)
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
        settings["auto_repair"] = {
            "enabled": True,
            "repair_type_overrides": {kind: {"enabled": True} for kind in topology.auto_repair},
        }
        _merge(settings["auto_repair"], topology.auto_repair_settings)
    if secrets is not None:
        conf.chmod(0o700)  # cassandra.yaml then holds the key store's password
    (conf / "cassandra.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    (conf / "cassandra-rackdc.properties").write_text(f"dc={node.datacenter}\nrack={node.rack}\nprefer_local=true\n")
    (conf / "logback.xml").write_text(_LOGBACK.format(log_dir=node_dir / "logs"))
    return conf


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
