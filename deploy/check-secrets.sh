#!/bin/bash
# Refuses to start the stack while a secret is missing, still holds its .env.example placeholder, or is
# too weak to use. compose's ${VAR:?} refuses only an empty value: the public placeholders would
# otherwise be accepted (a JWT signed with "CHANGE-ME-jwt-secret" is a valid token for anyone).
#
#   check-secrets.sh NAME...     the values are read from the environment
#
# Exit 1 naming every variable at fault and how to generate a value; 0 when all are usable. airflow-init
# runs it for every secret of .env.example before anything else (everything waits for airflow-init), the
# Cassandra entrypoint and cassandra-init for the secrets they use.
#
# Rules: no "CHANGE-ME" anywhere; a Fernet key (*FERNET*) is 32 bytes of URL-safe base64; the signing keys
# (*_SECRET, *_SECRET_KEY) have at least 32 characters and every other secret at least 16, all of them
# letters, digits and . _ ~ - only (they end up inside connection URIs, JSON and CQL literals).
set -uo pipefail

token='python3 -c "import secrets; print(secrets.token_urlsafe(32))"'
fernet='python3 -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
failures=0

refuse() {  # name problem how-to-generate
    echo "refusing to start: $1 $2. Set $1 in .env to a new value, e.g. the output of: $3" >&2
    failures=$((failures + 1))
}

(( $# > 0 )) || { echo "usage: check-secrets.sh NAME..." >&2; exit 2; }
for name in "$@"; do
    if [[ ! "${name}" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
        echo "check-secrets.sh: '${name}' is not a variable name" >&2
        exit 2
    fi
    value="${!name-}"
    case "${name}" in
        *FERNET*) how="${fernet}" minimum=44 ;;
        *_SECRET | *_SECRET_KEY) how="${token}" minimum=32 ;;
        *) how="${token}" minimum=16 ;;
    esac
    if [[ -z "${value}" ]]; then
        refuse "${name}" "is not set" "${how}"
    elif [[ "${value^^}" == *CHANGE-ME* ]]; then
        refuse "${name}" "still holds the placeholder of .env.example" "${how}"
    elif [[ "${name}" == *FERNET* ]]; then
        [[ "${value}" =~ ^[A-Za-z0-9_-]{43}=$ ]] \
            || refuse "${name}" "is not a Fernet key (44 characters of URL-safe base64)" "${how}"
    elif (( ${#value} < minimum )); then
        refuse "${name}" "is shorter than ${minimum} characters" "${how}"
    elif [[ ! "${value}" =~ ^[A-Za-z0-9._~-]+$ ]]; then
        refuse "${name}" "holds characters other than letters, digits and . _ ~ -" "${how}"
    fi
done

(( failures == 0 )) || exit 1
echo "check-secrets: $# secrets set: $*"
