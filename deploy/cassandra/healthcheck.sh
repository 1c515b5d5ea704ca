#!/bin/bash
# Healthy = this node answers CQL and reports itself Up/Normal over authenticated remote JMX,
# the same path ringward's nodetool takes.
set -euo pipefail

cqlsh -e 'SELECT release_version FROM system.local' "$(hostname)" 9042 > /dev/null

credentials="$(mktemp)"
trap 'rm -f "${credentials}"' EXIT
printf '%s %s\n' "${RINGWARD_JMX_USER}" "${RINGWARD_JMX_PASSWORD}" > "${credentials}"
own_address="$(hostname -i | awk '{print $1}')"
nodetool -h "$(hostname)" -p 7199 -u "${RINGWARD_JMX_USER}" --password-file "${credentials}" status \
    | grep -E "^UN +${own_address//./\\.} " > /dev/null
