#!/bin/bash
# Healthy = this node's native transport (CQL) is running and the node reports itself Up/Normal, both read
# over authenticated remote JMX, the same path ringward's nodetool takes. It needs no CQL login: the
# cluster requires one, and the roles are created only once every node is healthy (cassandra-init).
set -euo pipefail

credentials="$(mktemp)"
trap 'rm -f "${credentials}"' EXIT
printf '%s %s\n' "${RINGWARD_JMX_USER}" "${RINGWARD_JMX_PASSWORD}" > "${credentials}"

node_tool() {
    nodetool -h "$(hostname)" -p 7199 -u "${RINGWARD_JMX_USER}" --password-file "${credentials}" "$@"
}

binary="$(node_tool statusbinary)"
[[ "${binary//[[:space:]]/}" == "running" ]]

own_address="$(hostname -i | awk '{print $1}')"
node_tool status | grep -E "^UN +${own_address//./\\.} " > /dev/null
