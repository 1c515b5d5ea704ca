#!/bin/bash
# cassandra-init: run once every node is up (and again whenever you like: every step is idempotent).
#
#   1. Log in as the admin superuser (CASSANDRA_ADMIN_USER / CASSANDRA_ADMIN_PASSWORD). On the first run
#      that role does not exist yet: log in as the image's default superuser (cassandra/cassandra), create
#      the admin, and replicate system_auth to every node of the DC (up to 3).
#   2. Repair system_auth on every node, so that every replica holds the roles (nodetool over TLS logs in as the admin:
#      JMX logins are Cassandra roles).
#   3. As the admin: disable the default superuser (random password, no superuser, no login), create
#      ringward_ops, the role `ringward` (RINGWARD_CQL_PASSWORD) with its grants, the Spark
#      verification's read-only role `ringward_spark` (RINGWARD_SPARK_CQL_PASSWORD): SELECT on the managed
#      keyspaces only, and the JMX role RINGWARD_JMX_USER (RINGWARD_JMX_PASSWORD) with its per-MBean grants.
#   4. Check that every node lets the admin in and refuses cassandra/cassandra; exit 1 when one does not.
#
# Passwords never reach a command line: cqlsh reads them from a credentials file, the statements that set
# them from a file, nodetool from a password file, all in a private temporary directory.
#
# Environment: RINGWARD_CASSANDRA_NODES (comma-separated; CQL goes to the first), RINGWARD_CASSANDRA_DC,
# CASSANDRA_ADMIN_USER, CASSANDRA_ADMIN_PASSWORD, RINGWARD_CQL_PASSWORD, RINGWARD_SPARK_CQL_PASSWORD, RINGWARD_JMX_USER,
# RINGWARD_JMX_PASSWORD, RINGWARD_MANAGED_KEYSPACES (comma- or space-separated; may be empty).
set -euo pipefail

die() {
    echo "cassandra-init: $*" >&2
    exit 1
}

identifier() {  # a name that goes into CQL unquoted or inside quotes: letters, digits, underscores only
    [[ "$2" =~ ^[A-Za-z0-9_]{1,48}$ ]] || die "$1 must be letters, digits and underscores (got '$2')"
}

# No placeholder of .env.example, no weak value: deploy/check-secrets.sh (one folder up).
bash "$(dirname "${BASH_SOURCE[0]}")/../check-secrets.sh" \
    CASSANDRA_ADMIN_PASSWORD RINGWARD_CQL_PASSWORD RINGWARD_SPARK_CQL_PASSWORD RINGWARD_JMX_PASSWORD
admin="${CASSANDRA_ADMIN_USER:-ringward_admin}"
dc="${RINGWARD_CASSANDRA_DC:-dc1}"
jmx_user="${RINGWARD_JMX_USER:-ringward_jmx}"
IFS=', ' read -r -a nodes <<< "${RINGWARD_CASSANDRA_NODES:-cassandra-1,cassandra-2,cassandra-3}"
IFS=', ' read -r -a managed <<< "${RINGWARD_MANAGED_KEYSPACES:-}"
attempts="${RINGWARD_INIT_ATTEMPTS:-24}"
retry_seconds="${RINGWARD_INIT_RETRY_SECONDS:-5}"
# JMX runs over TLS only (docker-compose.yaml): nodetool --ssl, trusting the nodes' certificate (deploy/jmx-tls.sh;
# Cassandra's bin/nodetool hands -D options to its JVM; a JKS trust store is read without a password).
jmx_trust=("-Djavax.net.ssl.trustStore=${RINGWARD_JMX_TRUSTSTORE:-/opt/ringward/jmx-trust/truststore.jks}"
           "-Djavax.net.ssl.trustStoreType=JKS")

identifier CASSANDRA_ADMIN_USER "${admin}"
identifier RINGWARD_CASSANDRA_DC "${dc}"
[[ "${admin}" != cassandra && "${admin}" != ringward ]] || die "CASSANDRA_ADMIN_USER must not be '${admin}'"
identifier RINGWARD_JMX_USER "${jmx_user}"
case "${jmx_user}" in
    cassandra | ringward | ringward_spark | "${admin}")
        die "RINGWARD_JMX_USER must be a role of its own (got '${jmx_user}'): JMX logs in with Cassandra's roles" ;;
esac
for keyspace in "${managed[@]}"; do
    identifier RINGWARD_MANAGED_KEYSPACES "${keyspace}"
done
(( ${#nodes[@]} > 0 )) || die "RINGWARD_CASSANDRA_NODES is empty"
host="${nodes[0]}"
replicas=$(( ${#nodes[@]} < 3 ? ${#nodes[@]} : 3 ))
replication="{'class': 'NetworkTopologyStrategy', '${dc}': ${replicas}}"

umask 077
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

credentials() {  # file user password: cqlsh's credentials file (read without interpolation)
    printf '[PlainTextAuthProvider]\nusername = %s\npassword = %s\n' "$2" "$3" > "$1"
}
credentials "${work}/admin" "${admin}" "${CASSANDRA_ADMIN_PASSWORD}"
credentials "${work}/default" cassandra cassandra
# nodetool logs in as the admin: JMX logins are Cassandra roles, and the JMX role's grants come last.
printf '%s %s\n' "${admin}" "${CASSANDRA_ADMIN_PASSWORD}" > "${work}/jmx"

can_login() {
    can_login_on "${host}" "$1"
}

can_login_on() {  # node credentials
    cqlsh --credentials="$2" -e "SELECT release_version FROM system.local" "$1" 9042 > /dev/null 2>&1
}

cql_file() {  # credentials statements-file
    cqlsh --credentials="$1" -f "$2" "${host}" 9042
}

one_row() {  # credentials query: whether the query returns exactly one row (a failed query stops the run)
    local output
    output="$(cqlsh --credentials="$1" -e "$2" "${host}" 9042)" || die "this query failed: $2"
    [[ "${output}" == *"(1 rows)"* ]]
}

repair_system_auth() {  # asked again when a node refuses the admin's JMX login for a moment (its role cache)
    local repaired
    for node in "${nodes[@]}"; do
        echo "cassandra-init: repairing system_auth on ${node}"
        repaired=""
        for (( attempt = 1; attempt <= attempts; attempt++ )); do
            if nodetool --ssl "${jmx_trust[@]}" -h "${node}" -p 7199 -u "${admin}" --password-file "${work}/jmx" \
                repair --full system_auth
            then
                repaired="yes"
                break
            fi
            sleep "${retry_seconds}"
        done
        [[ -n "${repaired}" ]] || die "could not repair system_auth on ${node} over JMX as ${admin} (see above).
Check ${node} (docker compose logs ${node}), then run: docker compose run --rm cassandra-init"
    done
}

# --- 1. log in ---------------------------------------------------------------------------------------
login=""
for (( attempt = 1; attempt <= attempts; attempt++ )); do
    if can_login "${work}/admin"; then
        login="admin"
        break
    elif can_login "${work}/default"; then
        login="default"
        break
    fi
    sleep "${retry_seconds}"
done

if [[ "${login}" == default ]]; then
    # system_auth is replicated first: the admin's role is then written to a quorum of its replicas, so every
    # node can read it, and the admin can log in over JMX on every node for the repair below.
    echo "cassandra-init: first run: replicating system_auth (${replication}) and creating the superuser ${admin}"
    cat > "${work}/bootstrap.cql" <<CQL
ALTER KEYSPACE system_auth WITH replication = ${replication};
CREATE ROLE IF NOT EXISTS ${admin} WITH SUPERUSER = true AND LOGIN = true AND PASSWORD = '${CASSANDRA_ADMIN_PASSWORD}';
ALTER ROLE ${admin} WITH SUPERUSER = true AND LOGIN = true AND PASSWORD = '${CASSANDRA_ADMIN_PASSWORD}';
CQL
    cql_file "${work}/default" "${work}/bootstrap.cql"
fi

# --- 2. every replica of system_auth holds the roles ---------------------------------------------------
# Also heals a run that stopped between replicating system_auth and this repair.
repair_system_auth

if [[ "${login}" != admin ]]; then
    login=""
    for (( attempt = 1; attempt <= attempts; attempt++ )); do
        if can_login "${work}/admin"; then
            login="admin"
            break
        fi
        sleep "${retry_seconds}"
    done
    [[ -n "${login}" ]] || die "cannot log in as ${admin}, and the default superuser is disabled or refused.
If CASSANDRA_ADMIN_PASSWORD changed in .env since the first run, put the old value back (or reset the
role's password as another superuser), then run: docker compose run --rm cassandra-init"
fi

# --- 3. as the admin -------------------------------------------------------------------------------------
{
    if one_row "${work}/admin" "SELECT role FROM system_auth.roles WHERE role = 'cassandra'"; then
        random="$(head -c 96 /dev/urandom | base64 -w 0)"
        random="${random//[^A-Za-z0-9]/}"
        echo "ALTER ROLE cassandra WITH PASSWORD = '${random:0:40}' AND SUPERUSER = false AND LOGIN = false;"
    fi
    cat <<CQL
CREATE KEYSPACE IF NOT EXISTS ringward_ops WITH replication = ${replication};
CREATE ROLE IF NOT EXISTS ringward WITH LOGIN = true AND PASSWORD = '${RINGWARD_CQL_PASSWORD}';
ALTER ROLE ringward WITH SUPERUSER = false AND LOGIN = true AND PASSWORD = '${RINGWARD_CQL_PASSWORD}';
-- ringward's grants: ringward.permissions.grant_statements (docs/operators-guide.md §2.6; a unit test compares).
GRANT ALL PERMISSIONS ON KEYSPACE ringward_ops TO ringward;
GRANT SELECT ON TABLE system_distributed.parent_repair_history TO ringward;
GRANT SELECT ON TABLE system_views.settings TO ringward;
GRANT SELECT ON TABLE system_views.gossip_info TO ringward;
GRANT SELECT ON TABLE system_views.disk_usage TO ringward;
CREATE ROLE IF NOT EXISTS ringward_spark WITH LOGIN = true AND PASSWORD = '${RINGWARD_SPARK_CQL_PASSWORD}';
ALTER ROLE ringward_spark WITH SUPERUSER = false AND LOGIN = true AND PASSWORD = '${RINGWARD_SPARK_CQL_PASSWORD}';
-- The JMX role: nodetool's login (CassandraLogin) with per-MBean grants for Cassandra's JMX authorizer, nothing on
-- the JVM's own MBeans. ringward.permissions.jmx_grants (docs/operators-guide.md §2.2; a unit test compares).
CREATE ROLE IF NOT EXISTS ${jmx_user} WITH LOGIN = true AND PASSWORD = '${RINGWARD_JMX_PASSWORD}';
ALTER ROLE ${jmx_user} WITH SUPERUSER = false AND LOGIN = true AND PASSWORD = '${RINGWARD_JMX_PASSWORD}';
GRANT DESCRIBE ON ALL MBEANS TO ${jmx_user};
GRANT SELECT ON MBEANS 'org.apache.cassandra.db:*' TO ${jmx_user};
GRANT SELECT ON MBEANS 'org.apache.cassandra.metrics:*' TO ${jmx_user};
GRANT SELECT ON MBEANS 'org.apache.cassandra.net:*' TO ${jmx_user};
GRANT EXECUTE ON MBEAN 'org.apache.cassandra.db:type=StorageService' TO ${jmx_user};
GRANT EXECUTE ON MBEAN 'org.apache.cassandra.db:type=EndpointSnitchInfo' TO ${jmx_user};
CQL
    # Per managed keyspace. A GRANT on a keyspace that does not exist is refused: absent ones are skipped.
    for keyspace in "${managed[@]}"; do
        if one_row "${work}/admin" "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = '${keyspace}'"
        then
            echo "GRANT ALTER ON KEYSPACE \"${keyspace}\" TO ringward;"
            echo "GRANT SELECT ON KEYSPACE \"${keyspace}\" TO ringward_spark;"
        else
            echo "cassandra-init: skipped keyspace ${keyspace} (RINGWARD_MANAGED_KEYSPACES): it does not exist;" \
                "create it, then run: docker compose run --rm cassandra-init" >&2
        fi
    done
} > "${work}/roles.cql"
cql_file "${work}/admin" "${work}/roles.cql"

# --- 4. no node lets the default superuser in any more ---------------------------------------------------
# Each node answers the admin (it is up and reads the roles) and refuses cassandra/cassandra. A node may
# accept the old credentials for a moment (its credentials cache): each is asked again until it refuses.
for node in "${nodes[@]}"; do
    refused=""
    for (( attempt = 1; attempt <= attempts; attempt++ )); do
        if can_login_on "${node}" "${work}/admin" && ! can_login_on "${node}" "${work}/default"; then
            refused="yes"
            break
        fi
        sleep "${retry_seconds}"
    done
    [[ -n "${refused}" ]] || die "the image's default superuser cassandra/cassandra still logs in on ${node} (or \
${admin} cannot log in there). Every Airflow component waits for cassandra-init, so the stack stays down.
Check ${node} (docker compose logs ${node}), then run: docker compose run --rm cassandra-init"
done
echo "cassandra-init: done: ${admin} is the superuser, no node lets the default superuser in, ringward has its grants"
