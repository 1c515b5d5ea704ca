#!/bin/bash
# Writes the JMX password and access files from the environment, then hands over to the official
# image's entrypoint. The secret never lives in the repository: compose passes it from .env.
#
# The JVM refuses a password file that anyone but its owner can read, and the owner must be the
# user Cassandra runs as (the image drops from root to `cassandra` in docker-entrypoint.sh).
set -euo pipefail

: "${RINGWARD_JMX_USER:?set RINGWARD_JMX_USER (the JMX user nodetool logs in as)}"
: "${RINGWARD_JMX_PASSWORD:?set RINGWARD_JMX_PASSWORD (the JMX password nodetool uses)}"

conf_dir="${CASSANDRA_CONF:-/etc/cassandra}"
password_file="${conf_dir}/jmxremote.password"
access_file="${conf_dir}/jmxremote.access"

umask 077
printf '%s %s\n' "${RINGWARD_JMX_USER}" "${RINGWARD_JMX_PASSWORD}" > "${password_file}"
# readwrite: repair, cleanup and snapshot are JMX operations, not just attribute reads.
printf '%s readwrite\n' "${RINGWARD_JMX_USER}" > "${access_file}"
chown cassandra:cassandra "${password_file}" "${access_file}"
chmod 0400 "${password_file}" "${access_file}"

exec docker-entrypoint.sh "$@"
