# syntax=docker/dockerfile:1.7
# ringward on the official Airflow image: Java 17, the pyspark 3.5.9 Spark client (spark-submit),
# Cassandra's nodetool, the Spark Cassandra Connector jars, and this project with its locked deps.
#
# The versions below must match the pins: tests/unit/test_deployment.py checks them against
# pyproject.toml, uv.lock and tools/maven/*.pom.xml.
ARG AIRFLOW_VERSION=3.3.2
ARG PYTHON_VERSION=3.11
ARG CASSANDRA_VERSION=5.0.9
ARG MAVEN_IMAGE=maven:3.9-eclipse-temurin-17
# The uv that reads uv.lock (its lock revision); the image's own uv then only sees requirements.
ARG UV_VERSION=0.13.9

# --- nodetool comes from the official Cassandra image (same release as the cluster) -------------
FROM cassandra:${CASSANDRA_VERSION} AS cassandra

# --- Spark Cassandra Connector and its runtime dependencies, resolved once at build time ----------
# Spark itself is `provided`; scala-library is left out as `spark-submit --packages` does, so the
# Spark distribution's own Scala runtime is the only one on the classpath.
FROM ${MAVEN_IMAGE} AS connector-jars
WORKDIR /build
COPY tools/maven/spark-connector.pom.xml pom.xml
RUN mvn -B -q dependency:copy-dependencies \
        -DincludeScope=runtime \
        -DexcludeArtifactIds=scala-library \
        -DoutputDirectory=/opt/ringward/spark-jars \
    && ls /opt/ringward/spark-jars/spark-cassandra-connector_*.jar

# --- the locked dependency set, exported as plain requirements -----------------------------------
FROM python:${PYTHON_VERSION}-slim AS lock-export
ARG UV_VERSION
RUN pip install --no-cache-dir "uv==${UV_VERSION}"
WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
# The runtime dependencies, plus the stack's tooling: the Celery executor (extra `local`), Airflow's StatsD client
# for the metrics (extra `statsd`: without it `[metrics] statsd_on` sends nothing) and pyspark for spark-submit
# (dependency group `spark`; a group, not an extra, see pyproject.toml).
RUN uv export --frozen --no-dev --extra local --extra statsd --group spark --no-hashes --no-emit-project --no-header \
        -o /requirements.txt

# --- the Airflow image ----------------------------------------------------------------------------
FROM apache/airflow:${AIRFLOW_VERSION}-python${PYTHON_VERSION}
ARG AIRFLOW_VERSION

USER root
# Debian's OpenJDK 17 runtime: spark-submit (client mode driver) and nodetool both need a JVM.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && apt-get autoremove -yqq --purge \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* \
    && ln -sfn "$(dirname "$(dirname "$(readlink -f /usr/bin/java)")")" /usr/lib/jvm/default-java
# An architecture independent JAVA_HOME (Debian's directory name carries the architecture).
ENV JAVA_HOME=/usr/lib/jvm/default-java

# nodetool (and cqlsh) from the Cassandra release: bin/ + lib/ + the default conf that
# bin/nodetool sources for JMX_PORT. /opt/cassandra/conf is a symlink to /etc/cassandra there.
COPY --from=cassandra /opt/cassandra /opt/cassandra
COPY --from=cassandra /etc/cassandra /etc/cassandra
ENV CASSANDRA_HOME=/opt/cassandra \
    CASSANDRA_CONF=/etc/cassandra \
    PATH="${PATH}:/opt/cassandra/bin"

COPY --from=connector-jars /opt/ringward/spark-jars /opt/ringward/spark-jars
ENV RINGWARD_SPARK_JARS_DIR=/opt/ringward/spark-jars

USER airflow

# Bytecode compiled at build time (--compile-bytecode): a task process then imports Airflow and ringward from .pyc
# instead of compiling them from source at every start (where PYTHONDONTWRITEBYTECODE is set, at every start).
# Project dependencies exactly as locked (uv.lock), with Airflow pinned to the image's own version
# as the official image asks for extra packages. The override mirrors [tool.uv] in pyproject.toml:
# the Spark provider's pyspark-client (Spark Connect, writes into the same `pyspark` package) is
# left out so that pyspark 3.5.9 and its spark-submit stay intact; python-dateutil stays at the lock's 4.x over
# Flask-AppBuilder's cap below 3.
COPY --from=lock-export --chown=airflow:0 /requirements.txt /tmp/ringward-requirements.txt
RUN printf 'pyspark-client; sys_platform == "never"\npython-dateutil>=4\n' > /tmp/ringward-overrides.txt \
    && uv pip install --no-cache --compile-bytecode \
        --overrides /tmp/ringward-overrides.txt \
        "apache-airflow==${AIRFLOW_VERSION}" \
        -r /tmp/ringward-requirements.txt \
    && rm /tmp/ringward-requirements.txt /tmp/ringward-overrides.txt

# The project itself (console command `ringward`, importable packages), then the tree Airflow reads.
COPY --chown=airflow:0 pyproject.toml uv.lock README.md /opt/ringward/src/
COPY --chown=airflow:0 include /opt/ringward/src/include
COPY --chown=airflow:0 plugins /opt/ringward/src/plugins
RUN uv pip install --no-cache --compile-bytecode --no-deps /opt/ringward/src
COPY --chown=airflow:0 dags /opt/airflow/dags
COPY --chown=airflow:0 plugins /opt/airflow/plugins
COPY --chown=airflow:0 include /opt/airflow/include

# Same import roots as in the repository (dags/ -> plugins/ -> include/); compose mounts over them.
ENV PYTHONPATH=/opt/airflow/include:/opt/airflow/plugins:/opt/airflow/dags

# Fail the build on a broken install, not at the first task: the locked set must not conflict with
# what the image already holds. The only accepted gap is the deliberately excluded pyspark-client.
RUN spark-submit --version 2>&1 | grep -q "version 3.5" \
    && nodetool help > /dev/null \
    && python -c "import ringward, ringward_airflow, ringward_cassandra, ringward_cli" \
    && { uv pip check > /tmp/pip-check.txt 2>&1 || true; } \
    && ! grep '^The package' /tmp/pip-check.txt | grep -v 'pyspark-client' \
    && rm /tmp/pip-check.txt
