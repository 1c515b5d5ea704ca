"""How the CLI logs in to a cluster it reads live (plan, endpoints, repair status): from the environment,
never from a flag, so a password never sits in shell history or on a command line (`ps`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ringward.errors import ConfigurationError

__all__ = ["LOGIN_VARIABLES", "cql_login"]

LOGIN_VARIABLES = {
    "RINGWARD_CQL_USERNAME": "the role to log in as (PasswordAuthenticator)",
    "RINGWARD_CQL_PASSWORD": "its password",
    "RINGWARD_CQL_CA_CERTS": "a PEM file of the CA that signed the nodes' certificates: switches TLS on",
    "RINGWARD_CQL_CHECK_HOSTNAME": "'false' to accept a certificate that does not name the node (default: true)",
}


def cql_login(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """`connect`/`build_cluster` settings from RINGWARD_CQL_* (none set: an open cluster, no TLS)."""
    settings: dict[str, Any] = {}
    username = environ.get("RINGWARD_CQL_USERNAME")
    if username:
        if "RINGWARD_CQL_PASSWORD" not in environ:
            raise ConfigurationError(
                "RINGWARD_CQL_USERNAME is set but RINGWARD_CQL_PASSWORD is not.",
                "Export RINGWARD_CQL_PASSWORD too (read it with `read -s`, so it stays out of shell history).",
            )
        settings.update(username=username, password=environ["RINGWARD_CQL_PASSWORD"])
    ca_certs = environ.get("RINGWARD_CQL_CA_CERTS")
    if ca_certs:
        check = environ.get("RINGWARD_CQL_CHECK_HOSTNAME", "true").lower() not in {"false", "0", "no"}
        settings["ssl_options"] = {"ca_certs": ca_certs, "check_hostname": check}
    return settings
