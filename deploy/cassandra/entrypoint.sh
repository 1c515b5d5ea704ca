#!/bin/bash
# Each Cassandra node's entrypoint: turns on authentication before the official image's entrypoint runs.
#
# - CQL: PasswordAuthenticator and CassandraAuthorizer in cassandra.yaml. The roles themselves (an admin
#   superuser, the role `ringward` and its grants) are created once every node is up, by cassandra-init
#   (deploy/cassandra/init-cluster.sh); until then only the image's default superuser can log in, and
#   cassandra-init disables it.
# - JMX: the password and access files, from the environment. The secret never lives in the repository:
#   compose passes it from .env. The JVM refuses a password file that anyone but its owner can read, and
#   the owner must be the user Cassandra runs as (the image drops from root to `cassandra` in
#   docker-entrypoint.sh).
set -euo pipefail

: "${RINGWARD_JMX_USER:?set RINGWARD_JMX_USER (the JMX user nodetool logs in as)}"
# No placeholder of .env.example, no weak value: deploy/check-secrets.sh (one folder up).
bash "$(dirname "${BASH_SOURCE[0]}")/../check-secrets.sh" RINGWARD_JMX_PASSWORD

conf_dir="${CASSANDRA_CONF:-/etc/cassandra}"
yaml="${conf_dir}/cassandra.yaml"
password_file="${conf_dir}/jmxremote.password"
access_file="${conf_dir}/jmxremote.access"

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

umask 077
printf '%s %s\n' "${RINGWARD_JMX_USER}" "${RINGWARD_JMX_PASSWORD}" > "${password_file}"
# readwrite: repair, cleanup and snapshot are JMX operations, not just attribute reads.
printf '%s readwrite\n' "${RINGWARD_JMX_USER}" > "${access_file}"
chown cassandra:cassandra "${password_file}" "${access_file}"
chmod 0400 "${password_file}" "${access_file}"

exec docker-entrypoint.sh "$@"
