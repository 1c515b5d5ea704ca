#!/bin/bash
# JMX over TLS for the compose cluster (issue 36), run by airflow-init (as root, before any node starts; the
# image's Java 17 has keytool). Made once, kept in two volumes:
#
#   $1 (cassandra-jmx-keystore, the nodes' only): keystore.p12, the nodes' key pair (a self-signed certificate
#      naming every node), and jmx-tls.jvmargs, a java @argfile with the key store and its password. The nodes'
#      JVM_EXTRA_OPTS name the @argfile, so the password never appears on a command line. Owned by the image's
#      `cassandra` user (uid 999), 0400.
#   $2 (jmx-truststore, the task runners' and cassandra-init's): truststore.jks, the certificate alone, in a JKS
#      store that Java reads without a password (nodetool's JVM gets no password at all). 0444.
#
# The key store password is random and lives only in $1: .env holds no JMX TLS secret. Running again keeps what
# exists (a restart never changes the certificate the clients trust); delete both volumes to make new ones.
set -euo pipefail

node_dir="${1:?usage: jmx-tls.sh NODE_DIR TRUST_DIR [NODES]}"
trust_dir="${2:?usage: jmx-tls.sh NODE_DIR TRUST_DIR [NODES]}"
nodes="${3:-cassandra-1,cassandra-2,cassandra-3}"
node_uid="${CASSANDRA_UID:-999}"
keystore="${node_dir}/keystore.p12"
arguments="${node_dir}/jmx-tls.jvmargs"
truststore="${trust_dir}/truststore.jks"
umask 077

if [[ ! -s "${keystore}" || ! -s "${arguments}" ]]; then
    rm -f "${keystore}" "${arguments}" "${truststore}"
    password="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"  # 48 hex digits
    san="$(printf 'dns:%s,' ${nodes//,/ })"
    RINGWARD_STORE_PASSWORD="${password}" keytool -genkeypair -alias node -keyalg RSA -keysize 2048 -validity 3650 \
        -dname "CN=ringward compose cassandra" -ext "SAN=${san%,}" -keystore "${keystore}" -storetype PKCS12 \
        -storepass:env RINGWARD_STORE_PASSWORD
    # The node's mount point (docker-compose.yaml: /ringward-jmx), not this script's.
    printf '"-Djavax.net.ssl.keyStore=/ringward-jmx/keystore.p12"\n-Djavax.net.ssl.keyStoreType=PKCS12\n' > "${arguments}"
    printf '"-Djavax.net.ssl.keyStorePassword=%s"\n' "${password}" >> "${arguments}"
fi
if [[ ! -s "${truststore}" ]]; then
    password="$(sed -n 's/^"-Djavax.net.ssl.keyStorePassword=\(.*\)"$/\1/p' "${arguments}")"
    certificate="$(mktemp)"
    RINGWARD_STORE_PASSWORD="${password}" keytool -exportcert -rfc -alias node -keystore "${keystore}" \
        -storetype PKCS12 -storepass:env RINGWARD_STORE_PASSWORD -file "${certificate}"
    RINGWARD_STORE_PASSWORD="${password}" keytool -importcert -noprompt -alias ringward-jmx -file "${certificate}" \
        -keystore "${truststore}" -storetype JKS -storepass:env RINGWARD_STORE_PASSWORD
    rm -f "${certificate}"
fi
chown "${node_uid}:${node_uid}" "${keystore}" "${arguments}"
chmod 0400 "${keystore}" "${arguments}"
chmod 0444 "${truststore}"
echo "jmx-tls: the nodes' JMX key store and the clients' trust store are ready"
