#!/bin/bash
# A Spark standalone daemon (the master or a worker) with Spark's RPC authentication and AES-based RPC
# encryption: every driver, executor and daemon must prove it holds RINGWARD_SPARK_AUTH_SECRET, and what they
# send each other (the tasks carry the Cassandra password of the Spark verification) is encrypted.
#
#   daemon.sh CLASS [ARG...]    e.g. daemon.sh org.apache.spark.deploy.master.Master --host spark-master
#
# Standalone mode has one secret shared by the daemons and every application (Spark's security guide:
# "spark.authenticate.secret should be configured on each of the nodes"); the Airflow side's spark_default
# connection sets the same one in its ringward-conf extra. The secret goes into a properties file only this
# user can read (the daemon reads it with --properties-file), never onto a command line. The master's REST
# submission server stays off, and its UI cannot kill applications (the UI has no login: compose publishes it
# on the loopback interface only).
set -euo pipefail

(( $# > 0 )) || { echo "usage: daemon.sh CLASS [ARG...]" >&2; exit 2; }
# No placeholder of .env.example, no weak value: deploy/check-secrets.sh (one folder up).
bash "$(dirname "${BASH_SOURCE[0]}")/../check-secrets.sh" RINGWARD_SPARK_AUTH_SECRET

umask 077
properties="$(mktemp "${TMPDIR:-/tmp}/ringward-spark.XXXXXX")"
cat > "${properties}" <<PROPERTIES
spark.authenticate=true
spark.authenticate.secret=${RINGWARD_SPARK_AUTH_SECRET}
spark.network.crypto.enabled=true
spark.master.rest.enabled=false
spark.ui.killEnabled=false
PROPERTIES

exec "${SPARK_HOME:-/opt/spark}/bin/spark-class" "$1" --properties-file "${properties}" "${@:2}"
