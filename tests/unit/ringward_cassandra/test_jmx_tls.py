"""JMX over TLS on the secured local topology (issue 36): what the nodes start with, what every nodetool of
ringward and of the harness runs with, and the secrets that make it (a JKS trust store read without a password,
the key store's password in a private @argfile, never on a command line)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ringward_cassandra.connection_extras import checked_nodetool_extra
from ringward_cassandra.localcluster import cluster as cluster_module
from ringward_cassandra.localcluster.security import ClusterSecrets, ensure_secrets, jmx_tls_options
from ringward_cassandra.localcluster.topology import load_topology
from ringward_cassandra.nodetool import NodetoolClient
from ringward_cli.airflow_env import local_connections

needs_tools = pytest.mark.skipif(
    not (shutil.which("openssl") and shutil.which("keytool")), reason="openssl and keytool make the test CA"
)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> ClusterSecrets:
    if not (shutil.which("openssl") and shutil.which("keytool")):
        pytest.skip("openssl and keytool make the test CA")
    folder = tmp_path_factory.mktemp("cluster") / "secrets"
    return ensure_secrets(folder, load_topology("secured").addresses)


def test_the_nodes_serve_jmx_over_tls_with_the_store_password_off_the_command_line(made: ClusterSecrets) -> None:
    options = jmx_tls_options(made)
    assert "-Dcom.sun.management.jmxremote.ssl=true" in options
    assert "-Dcom.sun.management.jmxremote.registry.ssl=true" in options
    assert f"@{made.jmx_server_arguments}" in options
    assert not any(made.store_password in option for option in options)
    arguments = Path(made.jmx_server_arguments).read_text().splitlines()
    assert arguments == [
        f'"-Djavax.net.ssl.keyStore={made.keystore}"',
        "-Djavax.net.ssl.keyStoreType=PKCS12",
        f'"-Djavax.net.ssl.keyStorePassword={made.store_password}"',
    ]
    assert stat.S_IMODE(os.stat(made.jmx_server_arguments).st_mode) == 0o600


def test_the_jmx_trust_store_holds_the_test_ca_and_opens_without_a_password(made: ClusterSecrets) -> None:
    assert stat.S_IMODE(os.stat(made.jmx_truststore).st_mode) == 0o600
    keytool = shutil.which("keytool")
    assert keytool is not None
    # No -storepass: keytool lists a JKS store's certificates without it, as the JMX clients' JVM reads it.
    listed = subprocess.run([keytool, "-list", "-keystore", made.jmx_truststore, "-storetype", "JKS"],
                            input="\n", capture_output=True, text=True, check=False)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "ringward-test-ca" in listed.stdout and "trustedCertEntry" in listed.stdout
    assert made.jmx_client_options() == [
        f"-Djavax.net.ssl.trustStore={made.jmx_truststore}",
        "-Djavax.net.ssl.trustStoreType=JKS",
    ]


def test_the_node_certificate_names_the_loopback_address_jmx_answers_on(made: ClusterSecrets) -> None:
    openssl = shutil.which("openssl")
    assert openssl is not None
    shown = subprocess.run([openssl, "pkcs12", "-in", made.keystore, "-nokeys", "-clcerts", "-passin",
                            "env:PW"], env={**os.environ, "PW": made.store_password},
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    text = subprocess.run([openssl, "x509", "-noout", "-ext", "subjectAltName"], input=shown,
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "IP Address:127.0.0.1" in text and "IP Address:127.0.0.2" in text


def test_secrets_kept_from_before_jmx_tls_get_its_files(made: ClusterSecrets) -> None:
    Path(made.jmx_truststore).unlink()
    Path(made.jmx_server_arguments).unlink()
    again = ensure_secrets(Path(made.folder), load_topology("secured").addresses)
    assert again == made
    assert Path(made.jmx_truststore).exists() and Path(made.jmx_server_arguments).exists()


def _spawned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, topology_name: str) -> list[str]:
    started: list[list[str]] = []

    class Recorded:
        pid = 0

        def __init__(self, command: list[str], **_: object) -> None:
            started.append(command)

    local = cluster_module.LocalCluster(home=tmp_path, log=lambda _: None)
    topology = load_topology(topology_name)
    if topology.secured:  # made before Popen is replaced (openssl and keytool run through it)
        ensure_secrets(local.root / "secrets", topology.addresses)
    monkeypatch.setattr(cluster_module, "_check_free", lambda node: None)
    monkeypatch.setattr(cluster_module.subprocess, "Popen", Recorded)
    monkeypatch.setattr(cluster_module.runtime, "cassandra_classpath", lambda conf, version=None: "cp")
    monkeypatch.setattr(cluster_module.runtime, "java_binary", lambda: "java")
    try:
        local._spawn(topology, topology.nodes[0], heap_mb=256)
    finally:
        cluster_module._CHILDREN.pop(0, None)
    assert len(started) == 1
    return started[0]


@needs_tools
def test_a_secured_node_starts_with_jmx_over_tls_and_a_plain_one_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secured = _spawned(tmp_path / "secured", monkeypatch, "secured")
    found = cluster_module.LocalCluster(home=tmp_path / "secured").secrets()
    assert found is not None
    assert "-Dcom.sun.management.jmxremote.ssl=true" in secured
    assert f"@{found.jmx_server_arguments}" in secured
    assert secured.index(f"@{found.jmx_server_arguments}") < secured.index("-cp")  # a JVM option, not an argument
    assert not any(found.store_password in part for part in secured)
    plain = _spawned(tmp_path / "plain", monkeypatch, "seed")
    assert not any("jmxremote.ssl" in part or part.startswith("@") for part in plain)


def _local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> cluster_module.LocalCluster:
    monkeypatch.setattr(cluster_module.runtime, "cassandra_classpath", lambda conf, version=None: "/opt/c/lib/*")
    monkeypatch.setattr(cluster_module.runtime, "java_binary", lambda: "/usr/bin/java")
    return cluster_module.LocalCluster(home=tmp_path, log=lambda _: None)


@needs_tools
def test_the_secured_nodetool_connection_speaks_tls_and_trusts_the_test_ca(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = _local(tmp_path, monkeypatch)
    extra = local.nodetool_connection_extra(load_topology("secured"))
    found = local.secrets()
    assert found is not None
    assert extra["ssl"] is True
    assert set(found.jmx_client_options()) <= set(extra["java_options"])
    checked_nodetool_extra({k: v for k, v in extra.items() if k not in ("nodetool_path", "java_binary")})
    plain = local.nodetool_connection_extra(load_topology("seed"))
    assert "ssl" not in plain and not any("javax.net.ssl" in o for o in plain["java_options"])


@needs_tools
def test_local_connections_give_airflow_the_tls_nodetool_on_a_secured_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    local = _local(tmp_path, monkeypatch)
    monkeypatch.setattr("ringward_cli.airflow_env.LocalCluster", lambda home: local)
    monkeypatch.setattr("ringward_cli.airflow_env.connector_lib_dir", lambda home: tmp_path / "jars")
    nodetool = json.loads(local_connections(tmp_path, "secured")["AIRFLOW_CONN_RINGWARD_NODETOOL"])
    found = local.secrets()
    assert found is not None
    assert nodetool["extra"]["ssl"] is True
    assert f"-Djavax.net.ssl.trustStore={found.jmx_truststore}" in nodetool["extra"]["java_options"]
    assert not any(found.store_password in option for option in nodetool["extra"]["java_options"])


def test_a_tls_nodetool_process_gets_ssl_and_the_trust_store_a_plain_one_neither() -> None:
    trust = ("-Xmx64m", "-Djavax.net.ssl.trustStore=/s/jmx-truststore.jks", "-Djavax.net.ssl.trustStoreType=JKS")
    tls = NodetoolClient(nodetool_path="/opt/cassandra/bin/nodetool", ssl=True, java_options=trust)
    assert tls.command("10.0.0.1", ["status"]) == [
        "/opt/cassandra/bin/nodetool", "--ssl", "-Djavax.net.ssl.trustStore=/s/jmx-truststore.jks",
        "-Djavax.net.ssl.trustStoreType=JKS", "-h", "10.0.0.1", "-p", "7199", "status",
    ]  # fmt: skip
    plain = NodetoolClient(nodetool_path="/opt/cassandra/bin/nodetool", java_options=trust)
    assert plain.command("10.0.0.1", ["status"]) == ["/opt/cassandra/bin/nodetool", "-h", "10.0.0.1", "-p", "7199",
                                                     "status"]  # fmt: skip


def test_the_resident_jvm_turns_tls_on_with_the_trust_store_and_no_ssl_argument(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[Any] = []

    class Resident:
        def __init__(self, classpath: str, java_options: tuple[str, ...], java: str) -> None:
            made.append(java_options)

        def run(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
            made.append(args)
            return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr("ringward_cassandra.nodetool.ResidentNodetool", Resident)
    trust = ("-Djavax.net.ssl.trustStore=/s/jmx-truststore.jks",)
    client = NodetoolClient(java_classpath="/opt/c/lib/*", ssl=True, java_options=trust)
    client.run("10.0.0.1", ["status"])
    assert made == [(*trust, "-Dssl.enable=true"), ["-h", "10.0.0.1", "-p", "7199", "status"]]
    assert NodetoolClient(java_options=trust).resident_java_options() == trust


def test_the_generated_nodetool_turns_ssl_into_the_jvm_switch(tmp_path: Path) -> None:
    java = tmp_path / "java"
    java.write_text('#!/bin/sh\nfor a do printf "%s\\n" "$a"; done\n')
    java.chmod(0o755)
    script = tmp_path / "nodetool"
    script.write_text(cluster_module.nodetool_script(str(java), ["-Djavax.net.ssl.trustStore=/a b/t.jks"], "/c p/*"))
    script.chmod(0o755)
    ran = subprocess.run([str(script), "--ssl", "-h", "127.0.0.1", "-u", "x y", "status"], capture_output=True,
                         text=True, check=True).stdout.splitlines()  # fmt: skip
    assert ran == ["-Djavax.net.ssl.trustStore=/a b/t.jks", "-Dssl.enable=true", "-cp", "/c p/*",
                   "org.apache.cassandra.tools.NodeTool", "-h", "127.0.0.1", "-u", "x y", "status"]  # fmt: skip
    plain = subprocess.run([str(script), "status"], capture_output=True, text=True, check=True).stdout.splitlines()
    assert "-Dssl.enable=true" not in plain and plain[-1] == "status"


@needs_tools
def test_the_harness_own_nodetool_uses_tls_on_a_secured_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[list[str]] = []
    local = _local(tmp_path, monkeypatch)
    topologies = {"secured": load_topology("secured"), "seed": load_topology("seed")}
    monkeypatch.setattr(cluster_module.subprocess, "run", lambda command, **_: ran.append(command))
    for name in ("secured", "seed"):
        monkeypatch.setattr(local, "topology", lambda name=name: topologies[name])
        monkeypatch.setattr(local, "_jmx_login", lambda: [])
        local.nodetool(topologies[name].addresses[0], ["status"])
    assert ran[0][1] == "--ssl" and ran[0][-1] == "status"
    assert "--ssl" not in ran[1]
