"""The Cassandra hook's driver options, read from a `cassandra` connection (no cluster needed)."""

from __future__ import annotations

import json

import pytest
from airflow.sdk import Connection
from cassandra.cluster import EXEC_PROFILE_DEFAULT
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
from ringward.errors import ConfigurationError
from ringward_airflow.hooks import cluster_options


def connection(extra: dict[str, object] | None = None, **fields: object) -> Connection:
    return Connection(conn_id="cassandra_default", conn_type="cassandra", extra=json.dumps(extra or {}), **fields)


def local_dc(options: dict[str, object]) -> str | None:
    policy = options["execution_profiles"][EXEC_PROFILE_DEFAULT].load_balancing_policy  # type: ignore[index]
    assert isinstance(policy, TokenAwarePolicy)
    assert isinstance(policy._child_policy, DCAwareRoundRobinPolicy)
    return policy._child_policy.local_dc


def test_contact_points_port_and_defaults() -> None:
    options = cluster_options(connection(host="10.0.1.11, 10.0.2.11", port=9142))
    assert options["contact_points"] == ["10.0.1.11", "10.0.2.11"]
    assert options["port"] == 9142
    assert "protocol_version" not in options  # negotiated: v4 with a node below 5.0 (RingwardCluster)
    assert cluster_options(connection(extra={"protocol_version": 5}))["protocol_version"] == 5
    # The driver waits for agreement inside the DDL's request timeout (60 s): the wait must end first.
    assert options["max_schema_agreement_wait"] == 30.0
    assert options["execution_profiles"][EXEC_PROFILE_DEFAULT].request_timeout == 60.0
    assert "auth_provider" not in options
    assert local_dc(options) is None


def test_local_dc_from_either_spelling() -> None:
    assert local_dc(cluster_options(connection({"local_dc": "dc2"}, host="h"))) == "dc2"
    provider_style = {
        "load_balancing_policy": "DCAwareRoundRobinPolicy",
        "load_balancing_policy_args": {"local_dc": "dc3"},
    }
    assert local_dc(cluster_options(connection(provider_style, host="h"))) == "dc3"


def test_timeouts_and_credentials_from_the_connection() -> None:
    extra = {"request_timeout": "75", "schema_agreement_wait": 30}
    options = cluster_options(connection(extra, host="h", login="ringward", password="secret"))
    assert options["execution_profiles"][EXEC_PROFILE_DEFAULT].request_timeout == 75.0
    assert options["max_schema_agreement_wait"] == 30.0
    assert options["auth_provider"].username == "ringward"


def test_an_agreement_wait_longer_than_the_request_timeout_is_refused() -> None:
    extra = {"request_timeout": 30, "schema_agreement_wait": 120}
    with pytest.raises(ConfigurationError, match=r"schema_agreement_wait 120 s does not fit in request_timeout 30 s"):
        cluster_options(connection(extra, host="h"))


def test_one_list_of_settings_for_every_way_to_a_driver_cluster() -> None:
    """`connect`, `build_cluster` and `cluster_arguments` take the same `ClusterSettings`, with one set of
    defaults; a misspelt setting is refused, not ignored."""
    from cassandra.policies import WhiteListRoundRobinPolicy
    from ringward_cassandra.cql import ClusterSettings, build_cluster, cluster_arguments

    assert ClusterSettings.__optional_keys__ == {
        "coordinator", "timeout", "local_dc", "username", "password", "ssl_options", "protocol_version",
        "schema_agreement_wait",
    }  # fmt: skip
    defaults = cluster_arguments(["10.0.0.1"])
    assert (defaults["port"], defaults["max_schema_agreement_wait"]) == (9042, 15.0)
    assert "protocol_version" not in defaults
    assert defaults["execution_profiles"][EXEC_PROFILE_DEFAULT].request_timeout == 30.0
    pinned = cluster_arguments(["10.0.0.1", "10.0.0.2"], 9142, coordinator="10.0.0.2", timeout=8)
    assert pinned["contact_points"] == ["10.0.0.2"] and pinned["max_schema_agreement_wait"] == 4.0
    assert isinstance(pinned["execution_profiles"][EXEC_PROFILE_DEFAULT].load_balancing_policy,
                      WhiteListRoundRobinPolicy)  # fmt: skip
    cluster = build_cluster(["10.0.0.1", "10.0.0.2"], 9142, protocol_version=4, username="u", password="p")
    try:  # built, not connected
        assert (cluster.contact_points, cluster.port, cluster.protocol_version) == (["10.0.0.1", "10.0.0.2"], 9142, 4)
        assert cluster.auth_provider.username == "u"
    finally:
        cluster.shutdown()
    with pytest.raises(TypeError, match="timout"):
        build_cluster(["10.0.0.1"], timout=5)  # type: ignore[call-arg]
