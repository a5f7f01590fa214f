"""Atomic file writes and advisory locks, so the CLI, the cockpit and a second terminal never lose
each other's changes (DESIGN.md "Files c3 owns")."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def write_atomic(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` so that readers see either the old file or the new one, never a mix.

    Temp file in the same folder (rename is atomic only within one file system), fsync, rename,
    then fsync the folder so the rename itself survives a crash. A symlink is written through: the
    file it points to is replaced (atomically, in the target's folder) and the link stays a link, so
    an estate kept in a dotfiles repository and linked into C3_HOME does not silently diverge.
    """
    path = real_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def real_path(path: Path | str) -> Path:
    """`path` with symlinks resolved (the file a write must replace); unchanged when it is no link."""
    path = Path(path)
    if not path.is_symlink():
        return path
    return Path(os.path.realpath(path))


@contextlib.contextmanager
def locked(path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold an advisory lock for a read-modify-write of `path`.

    The lock lives on a sibling `.<name>.lock` file, not on `path` itself, because `write_atomic`
    replaces `path`'s inode and a lock on the old inode would protect nothing. A symlink's lock is
    its target's, so writers through the link and to the target exclude each other.
    """
    path = real_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.parent / f".{path.name}.lock"
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
