"""The secured local cluster's secrets: passwords, JMX password and access files, a test CA and the nodes'
TLS key store, made once per cluster under `<cluster>/secrets/` (0700, every file 0600), with openssl and
keytool only (nothing downloaded).

What a production cluster has and the lab did not: PasswordAuthenticator and CassandraAuthorizer, a
least-privilege role for ringward (never the superuser), JMX logins checked against Cassandra's roles and each
JMX call authorized per MBean (`ringward.permissions.jmx_grants`), JMX over TLS only (`jmx_tls_options`),
client-to-node TLS.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import ssl
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ringward.permissions import JMX_ROLE
from ringward.private_files import write_private

from ringward_cassandra.localcluster.errors import LocalClusterError

__all__ = ["ADMIN_ROLE", "JMX_USER", "RINGWARD_ROLE", "SPARK_ROLE", "ClusterSecrets", "ensure_secrets",
           "jmx_tls_options", "load_secrets"]  # fmt: skip

ADMIN_ROLE = "ringward_admin"  # the test setup's superuser: creates keyspaces and grants, never used by ringward
RINGWARD_ROLE = "ringward"  # the least-privilege role ringward's connections log in as
SPARK_ROLE = "ringward_spark"  # the Spark verification's read-only role (connection cassandra_spark)
JMX_USER = JMX_ROLE  # ringward's JMX login: a Cassandra role with exactly the per-MBean grants
_SECRETS_FILE = "secrets.json"


@dataclass(frozen=True)
class ClusterSecrets:
    """Where the secured cluster's secrets live and what they are (passwords: random, per cluster)."""

    folder: str
    admin_password: str
    ringward_password: str
    jmx_password: str
    store_password: str  # the nodes' key store and the clients' trust store
    spark_password: str = ""  # the Spark verification's role; made on first use by secrets kept from before it

    @property
    def ca_certificate(self) -> str:
        return str(Path(self.folder) / "ca.pem")

    @property
    def keystore(self) -> str:
        return str(Path(self.folder) / "node-keystore.p12")

    @property
    def truststore(self) -> str:
        """The CA in a PKCS12 trust store, for Java clients (the Spark connector)."""
        return str(Path(self.folder) / "truststore.p12")

    @property
    def jmx_truststore(self) -> str:
        """The CA in a JKS trust store for JMX clients (nodetool `--ssl`, the resident nodetool): Java reads a
        JKS store's certificates without its password, so no password goes on a client's command line."""
        return str(Path(self.folder) / "jmx-truststore.jks")

    @property
    def jmx_server_arguments(self) -> str:
        """A java `@argfile` (0600) with the nodes' key store for JMX over TLS and its password: the password
        stays off the node's command line, where `ps` shows it to every local user."""
        return str(Path(self.folder) / "jmx-tls.jvmargs")

    def jmx_client_options(self) -> list[str]:
        """The JVM options of a JMX client of the secured cluster: the node certificate checked against the test
        CA (`-Djavax.net.ssl.*`, which connection_extras.py allows; no password, see `jmx_truststore`)."""
        return [f"-Djavax.net.ssl.trustStore={self.jmx_truststore}", "-Djavax.net.ssl.trustStoreType=JKS"]

    @property
    def jmx_password_file(self) -> str:
        """nodetool's `-pwf` file for ringward's JMX role (`user password`, 0600)."""
        return str(Path(self.folder) / "jmx-ringward.password")

    @property
    def jaas_config(self) -> str:
        """The JAAS entry JMX logs in through: Cassandra's roles (CassandraLoginModule)."""
        return str(Path(self.folder) / "cassandra-jaas.config")

    def admin_jmx_password_file(self, roles_created: bool) -> str:
        """nodetool's `-pwf` file for the test setup's own JMX calls: the default superuser until the roles
        exist (its well-known password; it can log in only until then), the setup's superuser after."""
        return str(Path(self.folder) / ("jmx-admin.password" if roles_created else "jmx-default.password"))

    def ssl_options(self) -> dict[str, object]:
        """The driver's ssl_options: the server's certificate checked against the test CA and its address."""
        return {"ca_certs": self.ca_certificate, "check_hostname": True, "cert_reqs": int(ssl.CERT_REQUIRED)}


def jmx_tls_options(found: ClusterSecrets) -> list[str]:
    """A secured node's JVM options for JMX over TLS only, with the JMX port it already has
    (-Dcassandra.jmx.local.port).

    Cassandra 5.0 (also 4.0/4.1) builds its JMX server itself: CassandraDaemon.maybeInitJmx calls
    JMXServerUtils.createJMXServer(port, local=true) for -Dcassandra.jmx.local.port, which sets
    java.rmi.server.hostname=127.0.0.1, and JMXServerUtils.configureJmxSocketFactories gives both the RMI
    registry (JmxRegistry) and the connector server an SslRMIServerSocketFactory when
    com.sun.management.jmxremote.ssl=true (need.client.auth from its own property; the registry.ssl property
    of the JDK agent is not read: Cassandra's registry takes the same SSL factory). cassandra.yaml's
    jmx_server_options/jmx_encryption_options are trunk's (CASSANDRA-18508, after 5.0), not 5.0's. With SSL
    the loopback-only socket factory is not used (that branch is the `else if (localOnly)`): the port listens
    on every interface, TLS and a login required. The key store is the client-TLS one (the certificate names
    127.0.0.1), its password in a private @argfile (`jmx_server_arguments`), never on the command line.
    No client certificate is asked for (need.client.auth=false): logins are Cassandra roles."""
    return [
        "-Dcom.sun.management.jmxremote.ssl=true",
        "-Dcom.sun.management.jmxremote.ssl.need.client.auth=false",
        "-Dcom.sun.management.jmxremote.registry.ssl=true",
        f"@{found.jmx_server_arguments}",
    ]


def load_secrets(folder: Path) -> ClusterSecrets | None:
    path = folder / _SECRETS_FILE
    if not path.exists():
        return None
    return ClusterSecrets(**json.loads(path.read_text()))


def ensure_secrets(folder: Path, addresses: Sequence[str]) -> ClusterSecrets:
    """The cluster's secrets, made on first use: a CA, one node certificate naming every node's address,
    the JMX files, and the passwords. Idempotent (a cluster keeps its secrets until purged)."""
    found = load_secrets(folder)
    if found is not None and not found.spark_password:  # kept from before the Spark role: add its password
        found = replace(found, spark_password=secrets.token_urlsafe(18))
        write_private(folder, _SECRETS_FILE, json.dumps(asdict(found), indent=2))
    if found is not None:
        if not Path(found.jaas_config).exists():  # kept from before JMX logged in through Cassandra's roles
            previous = os.umask(0o077)
            try:
                _write_jmx_files(found)
            finally:
                os.umask(previous)
        if not Path(found.jmx_truststore).exists() or not Path(found.jmx_server_arguments).exists():
            previous = os.umask(0o077)  # kept from before JMX ran over TLS
            try:
                _make_jmx_tls_files(found)
            finally:
                os.umask(previous)
        return found
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    made = ClusterSecrets(
        folder=str(folder),
        admin_password=secrets.token_urlsafe(18),
        ringward_password=secrets.token_urlsafe(18),
        jmx_password=secrets.token_urlsafe(18),
        store_password=secrets.token_urlsafe(18),
        spark_password=secrets.token_urlsafe(18),
    )
    previous = os.umask(0o077)
    try:
        _make_tls_stores(made, addresses)
        _make_jmx_tls_files(made)
        _write_jmx_files(made)
        (folder / _SECRETS_FILE).write_text(json.dumps(asdict(made), indent=2))
    finally:
        os.umask(previous)
    for path in folder.iterdir():
        path.chmod(0o600)
    return made


def _write_jmx_files(made: ClusterSecrets) -> None:
    """The JAAS entry and nodetool's password files (the umask keeps them private)."""
    login = "CassandraLogin {\n  org.apache.cassandra.auth.CassandraLoginModule REQUIRED;\n};\n"
    Path(made.jaas_config).write_text(login)
    Path(made.jmx_password_file).write_text(f"{JMX_USER} {made.jmx_password}\n")
    Path(made.admin_jmx_password_file(False)).write_text("cassandra cassandra\n")
    Path(made.admin_jmx_password_file(True)).write_text(f"{ADMIN_ROLE} {made.admin_password}\n")


def _make_jmx_tls_files(made: ClusterSecrets) -> None:
    """JMX over TLS: the nodes serve the client-TLS key store (the certificate names every node's address and
    127.0.0.1, where the nodes' JMX listens); JMX clients trust the test CA from a JKS store."""
    keytool = shutil.which("keytool")
    if not keytool:
        raise LocalClusterError(
            "A secured local cluster needs keytool to make its JMX trust store.",
            "Install it (apt-get install openjdk-17-jdk-headless).",
        )
    Path(made.jmx_truststore).unlink(missing_ok=True)
    env = {**os.environ, "RINGWARD_STORE_PASSWORD": made.store_password}
    _run([keytool, "-importcert", "-noprompt", "-alias", "ringward-test-ca", "-file", made.ca_certificate,
          "-keystore", made.jmx_truststore, "-storetype", "JKS", "-storepass:env", "RINGWARD_STORE_PASSWORD"],
         env)  # fmt: skip
    # A java @argfile: one option a line, quoted (a path may hold a space; token_urlsafe passwords never hold
    # a quote or a backslash).
    Path(made.jmx_server_arguments).write_text(
        f'"-Djavax.net.ssl.keyStore={made.keystore}"\n'
        "-Djavax.net.ssl.keyStoreType=PKCS12\n"
        f'"-Djavax.net.ssl.keyStorePassword={made.store_password}"\n'
    )


def _make_tls_stores(made: ClusterSecrets, addresses: Sequence[str]) -> None:
    folder = Path(made.folder)
    openssl, keytool = shutil.which("openssl"), shutil.which("keytool")
    if not openssl or not keytool:
        raise LocalClusterError(
            "A secured local cluster needs openssl and keytool to make its test CA and key store.",
            "Install them (apt-get install openssl openjdk-17-jdk-headless).",
        )
    ca_key, ca_pem = folder / "ca.key", folder / "ca.pem"
    node_key, node_csr, node_pem = folder / "node.key", folder / "node.csr", folder / "node.pem"
    extensions = folder / "node.ext"
    extensions.write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
        "subjectAltName=" + ",".join(f"IP:{address}" for address in dict.fromkeys([*addresses, "127.0.0.1"])) + "\n"
    )
    _run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca_pem,
          "-days", "3650", "-subj", "/CN=ringward test CA"])  # fmt: skip
    _run([openssl, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", node_key, "-out", node_csr,
          "-subj", "/CN=ringward local node"])  # fmt: skip
    _run([openssl, "x509", "-req", "-in", node_csr, "-CA", ca_pem, "-CAkey", ca_key, "-CAcreateserial",
          "-out", node_pem, "-days", "3650", "-extfile", extensions])  # fmt: skip
    # The password goes through the environment, never on a command line (ps shows those to every user).
    env = {**os.environ, "RINGWARD_STORE_PASSWORD": made.store_password}
    _run([openssl, "pkcs12", "-export", "-in", node_pem, "-inkey", node_key, "-certfile", ca_pem,
          "-name", "node", "-out", made.keystore, "-passout", "env:RINGWARD_STORE_PASSWORD"], env)  # fmt: skip
    _run([keytool, "-importcert", "-noprompt", "-alias", "ringward-test-ca", "-file", ca_pem,
          "-keystore", made.truststore, "-storetype", "PKCS12",
          "-storepass:env", "RINGWARD_STORE_PASSWORD"], env)  # fmt: skip
    for leftover in (node_csr, extensions, folder / "ca.srl"):
        leftover.unlink(missing_ok=True)


def _run(command: Sequence[object], env: dict[str, str] | None = None) -> None:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise LocalClusterError(
            f"Making the local cluster's TLS material failed: {' '.join(map(str, command[:3]))}: "
            f"{(result.stderr or result.stdout).strip()[-500:]}",
            "Check that openssl and keytool work here, then run `ringward cluster down --purge` and `up` again.",
        )
