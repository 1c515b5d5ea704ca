"""A connection's ssl_options become the driver's ssl_context (the driver deprecates the options themselves)."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest
from ringward.errors import ConfigurationError
from ringward_cassandra.cql import cluster_arguments, ssl_context


def _ca(folder: Path) -> Path:
    pem = folder / "ca.pem"
    command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(folder / "ca.key"),
               "-out", str(pem), "-days", "1", "-subj", "/CN=test CA"]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)
    return pem


def test_the_server_certificate_is_checked_against_the_given_ca_and_address(tmp_path: Path) -> None:
    arguments = cluster_arguments(["127.0.0.2"], ssl_options={"ca_certs": str(_ca(tmp_path)), "check_hostname": True})
    context = arguments["ssl_context"]
    assert isinstance(context, ssl.SSLContext) and "ssl_options" not in arguments
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert [cert["subject"] for cert in context.get_ca_certs()] == [((("commonName", "test CA"),),)]


def test_without_tls_settings_there_is_no_tls() -> None:
    assert "ssl_context" not in cluster_arguments(["127.0.0.2"]) and "ssl_options" not in cluster_arguments(
        ["127.0.0.2"]
    )


def test_a_ca_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot be loaded") as refused:
        ssl_context({"ca_certs": str(tmp_path / "missing.pem")})
    assert "ca_certs" in refused.value.fix


def test_unknown_settings_are_refused_not_ignored() -> None:
    with pytest.raises(ConfigurationError, match=r"ca_cert\b"):
        ssl_context({"ca_cert": "/typo.pem"})


def test_the_host_name_is_checked_by_default_and_switched_off_only_explicitly(tmp_path: Path) -> None:
    """A connection that gives only a CA checks the certificate's name or address too (as the CLI does);
    `check_hostname: false` is the explicit way out (issue 36)."""
    ca = str(_ca(tmp_path))
    assert ssl_context({"ca_certs": ca}).check_hostname is True
    assert cluster_arguments(["127.0.0.2"], ssl_options={"ca_certs": ca})["ssl_context"].check_hostname is True
    assert ssl_context({"ca_certs": ca, "check_hostname": False}).check_hostname is False
    with pytest.raises(ConfigurationError, match="CERT_NONE") as refused:
        ssl_context({"ca_certs": ca, "cert_reqs": 0})
    assert '"check_hostname": false' in refused.value.fix
    assert ssl_context({"ca_certs": ca, "cert_reqs": 0, "check_hostname": False}).verify_mode == ssl.CERT_NONE
