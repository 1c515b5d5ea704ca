"""JMX credentials never reach nodetool's command line, which every local user can read (`ps`)."""

from __future__ import annotations

import stat
from pathlib import Path

from ringward_cassandra.nodetool import NodetoolClient


def _fake_nodetool(folder: Path) -> Path:
    """A `nodetool` that prints its own command line as the kernel shows it to `ps`, then the password file."""
    script = folder / "nodetool"
    script.write_text(
        "#!/bin/sh\n"
        'tr "\\0" " " < /proc/$$/cmdline; echo\n'
        'while [ "$#" -gt 0 ]; do [ "$1" = -pwf ] && cat "$2"; shift; done\n'
    )
    script.chmod(0o755)
    return script


def test_the_jmx_password_is_not_on_the_child_command_line(tmp_path: Path) -> None:
    client = NodetoolClient(nodetool_path=str(_fake_nodetool(tmp_path)), username="ringward", password="s3cret-pw")
    output = client.run("127.0.0.2", ["status"]).stdout
    command_line, password_file = output.splitlines()[0], output.splitlines()[1:]
    assert "s3cret-pw" not in command_line and "-pw " not in command_line
    assert "-u ringward -pwf " in command_line
    assert password_file == ["ringward s3cret-pw"]  # nodetool's own password-file format
    written = Path(command_line.split("-pwf ", 1)[1].split()[0])
    assert stat.S_IMODE(written.stat().st_mode) == 0o600 and written.stat().st_uid == Path("/proc/self").stat().st_uid
    assert "s3cret-pw" not in repr(client)
    client.close()
    assert not written.exists()


def test_an_operators_password_file_is_used_as_it_is(tmp_path: Path) -> None:
    mine = tmp_path / "jmx.password"
    mine.write_text("ringward from-a-file\n")
    client = NodetoolClient(nodetool_path=str(_fake_nodetool(tmp_path)), username="ringward", password_file=str(mine))
    output = client.run("127.0.0.2", ["status"]).stdout
    assert f"-pwf {mine}" in output and "from-a-file" not in output.splitlines()[0]
    client.close()
    assert mine.exists()  # not ours to remove
