"""Private folders and files (security review, issue 25): what ringward writes into or loads code from is a
real folder of its own user that nobody else can write, and a planted link is replaced, never followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from ringward.errors import ConfigurationError
from ringward.private_files import folder_problem, private_folder, user_cache_folder, write_private


def test_a_missing_folder_is_created_0700_with_its_parents(tmp_path: Path) -> None:
    folder = private_folder(tmp_path / "a" / "b" / "c")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for made in (tmp_path / "a", tmp_path / "a" / "b"):  # the parents it made too
        assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert folder_problem(folder) is None
    assert private_folder(folder) == folder  # an existing private folder is taken as it is


def test_a_read_only_shared_folder_of_ours_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir(mode=0o755)
    assert folder_problem(tmp_path / "shared") is None


@pytest.mark.parametrize("mode", [0o770, 0o777, 0o1777])
def test_a_folder_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(mode)
    with pytest.raises(ConfigurationError, match="written by its group or by everyone") as refused:
        private_folder(folder)
    assert "chmod 700" in str(refused.value)


def test_links_and_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "file").write_text("")
    assert folder_problem(tmp_path / "link") == f"{tmp_path / 'link'} is a symbolic link"
    assert folder_problem(tmp_path / "file") == f"{tmp_path / 'file'} is not a folder"
    for path in ("link", "file"):
        with pytest.raises(ConfigurationError):
            private_folder(tmp_path / path)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_another_users_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, 12345, 12345)
    with pytest.raises(ConfigurationError, match="belongs to user id 12345"):
        private_folder(folder)


def test_a_relative_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="not an absolute path"):
        private_folder("~/.cache/ringward")  # `~` unexpanded: never a folder named `~` in the cwd
    assert not (tmp_path / "~").exists()


def test_write_private_replaces_a_planted_link_and_refuses_path_names(tmp_path: Path) -> None:
    folder = private_folder(tmp_path / "out")
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (folder / "x.svg").symlink_to(victim)
    written = write_private(folder, "x.svg", "<svg/>")
    assert victim.read_text() == "keep" and written.read_text() == "<svg/>" and not written.is_symlink()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    for bad in ("", "..", "a/b"):
        with pytest.raises(ConfigurationError, match="not a plain file name"):
            write_private(folder, bad, "")
    (folder / "dir.svg").mkdir()
    with pytest.raises(ConfigurationError, match="Cannot write"):
        write_private(folder, "dir.svg", "")
    assert sorted(p.name for p in folder.iterdir()) == ["dir.svg", "x.svg"]  # no temporary file left


def test_the_user_cache_folder_follows_xdg_when_absolute() -> None:
    assert user_cache_folder({"XDG_CACHE_HOME": "/var/cache/me"}) == Path("/var/cache/me/ringward")
    home = Path(os.path.expanduser("~"))
    assert user_cache_folder({"XDG_CACHE_HOME": "relative"}) == home / ".cache" / "ringward"
    assert user_cache_folder({}) == home / ".cache" / "ringward"
