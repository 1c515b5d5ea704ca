"""tests/warm_airflow.py: a command forked from the warm server gets the caller's argv, environment and working
directory, gives back its output and exit code, is killed on a timeout, and runs afresh where Airflow would import
another configuration."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import warm_airflow

SCRIPT = """\
import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "mine": os.environ.get("MINE"),
                  "warm": "airflow.sdk.execution_time.supervisor" in sys.modules, "pid": os.getpid()}))
print("to stderr", file=sys.stderr)
if sys.argv[1:] == ["sleep"]:
    import time
    time.sleep(600)
sys.exit(int(sys.argv[1]) if sys.argv[1:] and sys.argv[1].isdigit() else 0)
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "probe.py"
    path.write_text(SCRIPT)
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[warm_airflow.WarmAirflow]:
    """One server for the module (its start imports Airflow: about 9 s of CPU)."""
    started = warm_airflow.WarmAirflow(dict(os.environ), ringward=False, cwd=tmp_path_factory.mktemp("server"))
    yield started
    started.close()


def run(server: warm_airflow.WarmAirflow, args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    with server.start(args, env=env, cwd=cwd) as process:
        assert process.stdout is not None
        output = process.stdout.read()
        return process.wait(120), output


def test_a_forked_script_runs_as_its_own_process_with_the_callers_argv_env_and_cwd(
    server: warm_airflow.WarmAirflow, script: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "MINE": "one"}
    code, output = run(server, [str(script), "3", "x y"], env, tmp_path)
    assert code == 3 and "to stderr" in output
    seen = json.loads(output.splitlines()[0])
    assert seen["argv"] == ["3", "x y"] and seen["cwd"] == str(tmp_path) and seen["mine"] == "one"
    assert seen["warm"] and seen["pid"] != os.getpid()  # forked from the server that imported Airflow
    code, output = run(server, [str(script)], {**env, "MINE": "two"}, tmp_path)
    again = json.loads(output.splitlines()[0])
    assert code == 0 and again["mine"] == "two" and again["warm"] and again["pid"] != seen["pid"]


def test_a_command_past_its_timeout_is_killed(server: warm_airflow.WarmAirflow, script: Path, tmp_path: Path) -> None:
    with server.start([str(script), "sleep"], env=dict(os.environ), cwd=tmp_path) as process:
        assert process.stdout is not None
        assert json.loads(process.stdout.readline())["argv"] == ["sleep"]
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(0.5)
        process.kill()
        assert process.wait(60) == -9


def test_another_airflow_configuration_runs_afresh(
    server: warm_airflow.WarmAirflow, script: Path, tmp_path: Path
) -> None:
    """A setting Airflow reads at import differs from the server's: the command is exec'd anew, not forked warm."""
    code, output = run(server, [str(script)], {**os.environ, "AIRFLOW__CORE__PARALLELISM": "7"}, tmp_path)
    assert code == 0 and not json.loads(output.splitlines()[0])["warm"]
    afresh = (Path(server.socket_path).parent / warm_airflow.AFRESH).read_text().splitlines()
    assert afresh == [str(script)]  # listed, for the report the server's close prints
    code, output = run(server, [str(script)], dict(os.environ), tmp_path)
    assert code == 0 and json.loads(output.splitlines()[0])["warm"]


def test_a_server_whose_caller_is_gone_removes_its_folder(server: warm_airflow.WarmAirflow) -> None:
    """The caller's end of the server's stdin closes without `close()` (a pytest-xdist worker ends without running
    atexit): the server ends and removes its folder. Last in this module: it ends the module's server."""
    folder = Path(server.socket_path).parent
    assert (folder / "socket").exists()
    assert server._server.stdin is not None
    server._server.stdin.close()
    assert server._server.wait(30) == 0
    assert not folder.exists()
