#!/bin/bash
# Each Cassandra node's entrypoint: turns on authentication before the official image's entrypoint runs.
#
# - CQL: PasswordAuthenticator and CassandraAuthorizer in cassandra.yaml. The roles themselves (an admin
#   superuser, the role `ringward` and its grants) are created once every node is up, by cassandra-init
#   (deploy/cassandra/init-cluster.sh); until then only the image's default superuser can log in, and
#   cassandra-init disables it.
# - JMX: logins are Cassandra roles (the CassandraLogin JAAS entry, written here) and each call is authorized
#   per MBean (AuthorizationProxy; both switched on in JVM_EXTRA_OPTS by docker-compose.yaml). The JMX role
#   and its grants are cassandra-init's: until it has run, no role but the image's default superuser can use
#   JMX, and a node answers no JMX login before it has joined the ring. The node holds no JMX secret.
set -euo pipefail

conf_dir="${CASSANDRA_CONF:-/etc/cassandra}"
yaml="${conf_dir}/cassandra.yaml"
jaas_file="${conf_dir}/cassandra-jaas.config"

# The image's authenticator and authorizer go (a one-line value or a `class_name:` block, whichever form
# the release writes), ours are appended. Running again (a container restart) gives the same file.
marker="# ringward (deploy/cassandra/entrypoint.sh): password authentication, role-based authorization"
awk -v marker="${marker}" '
    $0 == marker { next }
    /^[A-Za-z_][A-Za-z0-9_]*[ \t]*:/ {
        key = $0
        sub(/[ \t]*:.*/, "", key)
        dropping = (key == "authenticator" || key == "authorizer")
    }
    dropping && /^([A-Za-z_]|[ \t]+[^ \t])/ { next }
    { print }
' "${yaml}" > "${yaml}.ringward"
printf '%s\nauthenticator: PasswordAuthenticator\nauthorizer: CassandraAuthorizer\n' "${marker}" >> "${yaml}.ringward"
# Rewritten in place: the file keeps its owner and mode.
cat "${yaml}.ringward" > "${yaml}"
rm -f "${yaml}.ringward"

# The JAAS entry -Dcassandra.jmx.remote.login.config names (the release ships the same file; written so that
# the node never depends on it). No password or access file: a stale one from an older configuration goes.
printf 'CassandraLogin {\n  org.apache.cassandra.auth.CassandraLoginModule REQUIRED;\n};\n' > "${jaas_file}"
rm -f "${conf_dir}/jmxremote.password" "${conf_dir}/jmxremote.access"

exec docker-entrypoint.sh "$@"
