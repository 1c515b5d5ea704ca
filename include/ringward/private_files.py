"""Folders and files only the user ringward runs as can change: where it writes pictures and keeps code.

A folder at a predictable path can be made by another local user first, or be a symbolic link to somewhere
else; a file path can hold a planted symbolic link. `private_folder` creates a folder 0700 and accepts one
that exists only when it is a real folder (not a link), owned by this user and writable by nobody else.
`write_private` writes through a fresh temporary file (0600) and an atomic rename in that folder, so a link
at the target path is replaced, never followed.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ringward.errors import ConfigurationError

__all__ = ["folder_problem", "private_folder", "user_cache_folder", "write_private"]


def folder_problem(path: str | Path) -> str | None:
    """Why `path` is not a folder private to this user (None when it is). A link is never followed."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return f"{path} does not exist"
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder"
    if info.st_uid != os.geteuid():
        return f"{path} belongs to user id {info.st_uid}, not to this user ({os.geteuid()})"
    if info.st_mode & 0o022:
        return f"{path} can be written by its group or by everyone (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def private_folder(path: str | Path) -> Path:
    """`path` as a folder only this user can write: created 0700 when missing (missing parents too, 0700),
    else checked (`folder_problem`). Raises ConfigurationError naming the problem and the fix."""
    folder = Path(path)
    if not folder.is_absolute():  # e.g. `~` left unexpanded without a HOME: never a folder of the cwd
        raise ConfigurationError(f"Folder {path} is not an absolute path.", "Give an absolute folder path.")
    missing = [p for p in (folder, *folder.parents) if not os.path.lexists(p)]
    try:
        for step in reversed(missing):  # each one 0700 (`mkdir -p` would give the parents the umask's mode)
            with contextlib.suppress(FileExistsError):  # made meanwhile: the folder is checked below
                step.mkdir(mode=0o700)
    except OSError as error:
        raise ConfigurationError(
            f"Cannot create the folder {folder}: {error.strerror or error}.",
            "Give a folder the user ringward runs as can create.",
        ) from error
    problem = folder_problem(folder)
    if problem:
        raise ConfigurationError(
            f"{problem}: ringward writes only into a folder private to the user it runs as (another user could "
            "plant links or files there).",
            f"Remove {folder} or make it a real folder of this user that only it can write (chmod 700), "
            "or choose another folder.",
        )
    return folder


def write_private(folder: str | Path, name: str, text: str) -> Path:
    """Write `text` to `folder`/`name` (mode 0600): a new temporary file (O_EXCL), then renamed over the
    target, so a symbolic link planted there is replaced and what it points to is left alone. `folder`
    must be private (`private_folder`): in a folder others can write, the rename itself could be raced."""
    if not name or "/" in name or name in {".", ".."}:
        raise ConfigurationError(f"{name!r} is not a plain file name.", "Give a name without '/'.")
    target = Path(folder) / name
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")  # 0600, O_EXCL
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, target)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise ConfigurationError(
            f"Cannot write {target}: {error.strerror or error}.", f"Check that {target} is not a folder."
        ) from error
    return target


def user_cache_folder(environ: Mapping[str, str] | None = None) -> Path:
    """ringward's folder in this user's cache ($XDG_CACHE_HOME when absolute, else ~/.cache), not yet
    created or checked (`private_folder` does both)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ringward"
