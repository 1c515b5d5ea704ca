"""ResidentNodetool's life cycle without a JVM: once closed it starts nothing and refuses commands, and the
server's classes come only from a folder private to this user (the JVM's own behaviour is tested against
real nodes in tests/integration/test_resident_nodetool.py)."""

from __future__ import annotations

import hashlib
import stat
import tempfile
from pathlib import Path

import pytest
from ringward.errors import ClusterError
from ringward.private_files import folder_problem
from ringward_cassandra import resident_nodetool
from ringward_cassandra.resident_nodetool import ResidentNodetool


def test_a_late_start_after_close_starts_no_jvm() -> None:
    # NodetoolClient.prepare() boots the JVM from a thread; if the task closed the client first, that
    # thread must not leave a JVM behind. The classpath is bogus: a start attempt would raise.
    resident = ResidentNodetool(classpath="/nonexistent.jar", java="/nonexistent/java")
    resident.close()
    resident.start()
    assert resident.pid is None


def test_a_closed_resident_nodetool_refuses_commands() -> None:
    resident = ResidentNodetool(classpath="/nonexistent.jar", java="/nonexistent/java")
    resident.close()
    with pytest.raises(ClusterError, match="closed"):
        resident.run(["status"], timeout=5)


def test_share_jvm_clients_of_one_process_share_one_jvm_that_close_leaves_until_exit() -> None:
    """`share_jvm`: clients with the same Java settings get the same resident JVM, and closing one client leaves
    it for the others (it stops when the process ends); without it each client has its own, closed with it."""
    from ringward_cassandra import nodetool
    from ringward_cassandra.nodetool import NodetoolClient

    settings = {"java_classpath": CLASSPATH, "java_binary": "/nonexistent/java"}
    first, second = NodetoolClient(**settings, share_jvm=True), NodetoolClient(**settings, share_jvm=True)
    other = NodetoolClient(**settings, java_options=("-Xmx64m",), share_jvm=True)
    alone = NodetoolClient(**settings)
    try:
        shared = first._resident_jvm()
        assert second._resident_jvm() is shared and other._resident_jvm() is not shared
        assert alone._resident_jvm() is not shared
        first.close()
        assert not shared._closed and second._resident_jvm() is shared  # left running for the other tasks
        alone_jvm = alone._resident_jvm()
        alone.close()
        assert alone_jvm._closed
    finally:
        nodetool.close_shared_jvms()  # what exit does
    assert shared._closed and NodetoolClient(**settings, share_jvm=True)._resident_jvm() is not shared
    nodetool.close_shared_jvms()


# -- where the server's compiled classes come from (security review, issue 25, finding 6) --------------------
CLASSPATH = "/nonexistent/cassandra.jar"


def _fake_jdk(tmp_path: Path) -> tuple[str, Path]:
    """A `java` path whose `javac` beside it writes a stand-in class file into its -d folder, and the log of
    its runs (no real JDK or Cassandra jars needed)."""
    bin_dir = tmp_path / "jdk" / "bin"
    bin_dir.mkdir(parents=True)
    runs = tmp_path / "javac-runs"
    javac = bin_dir / "javac"
    javac.write_text(
        f'#!/bin/sh\necho run >> "{runs}"\nwhile [ "$1" != "-d" ]; do shift; done\n'
        f'echo compiled > "$2/{resident_nodetool._MAIN_CLASS}.class"\n'
    )
    javac.chmod(0o755)
    return str(bin_dir / "java"), runs


def _key() -> str:
    key = resident_nodetool._SOURCE.read_bytes() + CLASSPATH.encode() + resident_nodetool._RELEASE.encode()
    return hashlib.sha256(key).hexdigest()[:16]


def _plant(path: Path, how: str, attacker: Path) -> None:
    """Code another local user left where the classes are looked for."""
    if how == "link":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(attacker, target_is_directory=True)
        return
    path.mkdir(parents=True)
    (path / f"{resident_nodetool._MAIN_CLASS}.class").write_text("planted")
    path.chmod(0o777)


@pytest.mark.parametrize("how", ["world-writable", "link"])
def test_planted_classes_are_never_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    (attacker / f"{resident_nodetool._MAIN_CLASS}.class").write_text("planted")
    shared_tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    shared_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared_tmp))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    _plant(shared_tmp / f"ringward-nodetool-{_key()}", how, attacker)  # where it was looked for up to now
    _plant(cache / "ringward" / f"nodetool-{_key()}", how, attacker)  # where it is looked for now
    java, _ = _fake_jdk(tmp_path)

    classes = resident_nodetool._compiled(java, CLASSPATH)

    assert (classes / f"{resident_nodetool._MAIN_CLASS}.class").read_text() == "compiled\n"
    assert folder_problem(classes) is None  # a real folder of ours that nobody else can write
    assert stat.S_IMODE(classes.stat().st_mode) == 0o700
    assert (attacker / f"{resident_nodetool._MAIN_CLASS}.class").read_text() == "planted"


def test_classes_are_compiled_once_into_the_private_user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    java, runs = _fake_jdk(tmp_path)
    classes = resident_nodetool._compiled(java, CLASSPATH)
    assert classes == tmp_path / "cache" / "ringward" / f"nodetool-{_key()}"
    assert stat.S_IMODE((tmp_path / "cache" / "ringward").stat().st_mode) == 0o700
    assert resident_nodetool._compiled(java, CLASSPATH) == classes
    assert runs.read_text().count("run") == 1  # the second JVM start reuses the classes


def test_without_a_private_cache_the_classes_go_to_a_fresh_private_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    (cache / "ringward").mkdir(parents=True)
    (cache / "ringward").chmod(0o777)  # not ours alone: not used at all
    shared_tmp = tmp_path / "tmp"
    shared_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared_tmp))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    java, _ = _fake_jdk(tmp_path)
    classes = resident_nodetool._compiled(java, CLASSPATH)
    assert classes.parent == shared_tmp and folder_problem(classes) is None
    assert list((cache / "ringward").iterdir()) == []
