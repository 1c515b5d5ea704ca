#!/bin/bash
# Healthy = this node accepts connections on its native transport (CQL) port, at its own address. Cassandra
# opens that port only once the node has joined the ring (after bootstrap), so the next node may start then.
# It needs no login at all: the cluster requires one for CQL, JMX logins are Cassandra roles, and the roles
# are created only once every node is healthy (cassandra-init). No secret reaches the node for this check.
set -euo pipefail

own_address="$(hostname -i | awk '{print $1}')"
exec 3<> "/dev/tcp/${own_address}/${CASSANDRA_NATIVE_PORT:-9042}"
