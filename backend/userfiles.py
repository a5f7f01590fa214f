"""Reading the files c3 is given or that a person may have edited: regular files only, size-capped.

`open()` on a FIFO blocks until a writer appears and `read()` on /dev/zero never ends, so a file is
opened non-blocking, checked with fstat to be a regular file, and read up to its cap plus one byte.
Failures follow the exit-code classes (DESIGN.md "Exit codes"): what the file *is* or *holds*
(not a regular file, too large, not UTF-8, malformed) is a usage error (2); what the file system
refuses (permission, I/O error, a file where a folder should be) is an environment problem (3).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, overload

from backend.errors import EnvironmentProblem, UsageError, os_failure
from backend.text import show

KiB, MiB = 1024, 1024 * 1024

# Caps per kind of file: generous for what a person writes, small enough that parsing the worst
# file of that size stays within seconds and a few hundred MB.
LIMITS = {
    "estate file": 16 * MiB,  # ~200,000 pods; the YAML node budget is the tighter bound
    "node registry": 1 * MiB,
    "catalog file": 4 * MiB,
    "recipe file": 1 * MiB,
    "profile": 1 * MiB,
    "simulated rig file": 1 * MiB,
    "boot log": 64 * MiB,
    "model config": 8 * MiB,
    # State files c3 writes itself: a few hundred bytes each when c3 wrote them, so anything near
    # the cap was put there by someone else.
    "router status file": 1 * MiB,  # lists the pool's node names
    "router admin token": 4 * KiB,
    "router salt": 4 * KiB,
    "watchdog state": 64 * KiB,
    "simulator record": 64 * KiB,
    "demo record": 64 * KiB,  # the demo's leases and its gateway's record: a pid, a start time, a port
    "router pins file": 16 * MiB,  # one row (~100 bytes) per sticky session the router remembers
    "simulated pod log": 4 * MiB,  # read from its end: the lines `pod logs` shows
    # Files other programs write, read by c3.
    "GPU registration file": 64 * KiB,  # a few lines: pid, name, port, one line per GPU
    "systemd unit file": 1 * MiB,
    "CDI spec file": 4 * MiB,
}

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def link_loop(path: Path | str, what: str) -> EnvironmentProblem:
    """The error for a symlink loop where a file should be (ELOOP is the file system's answer: exit 3)."""
    return EnvironmentProblem(f"cannot read {what} {path}: it is a symbolic link loop", hint="point the link at a real file, or remove it")


@overload
def read_bytes(path: Path | str, *, what: str, limit: int | None = None, missing_ok: Literal[False] = False) -> bytes: ...
@overload
def read_bytes(path: Path | str, *, what: str, limit: int | None = None, missing_ok: bool) -> bytes | None: ...
def read_bytes(path: Path | str, *, what: str, limit: int | None = None, missing_ok: bool = False) -> bytes | None:
    """The bytes of `path`, a regular file of at most `limit` bytes (`LIMITS[what]` by default).

    Missing: None when `missing_ok`, else a usage error. Symlinks are followed (the target is checked).
    """
    cap = limit if limit is not None else LIMITS.get(what, 4 * MiB)
    with _opened(path, what, missing_ok=missing_ok) as opened:
        if opened is None:
            return None
        fd, size = opened
        if size > cap:
            raise UsageError(f"{what} {path} is larger than {_size(cap)} ({_size(size)})", hint="c3 reads files up to that size; split or trim it")
        data = _read_at(fd, 0, cap + 1)  # the size may change under us (a file being written): cap what we read
        if len(data) > cap:
            raise UsageError(f"{what} {path} is larger than {_size(cap)}", hint="c3 reads files up to that size; split or trim it")
        return data


def read_tail(path: Path | str, *, what: str, limit: int | None = None) -> tuple[bytes, bool] | None:
    """The last `limit` bytes (`LIMITS[what]` by default) of `path`, a regular file, and whether its start
    was left out: for a log that grows while it is read, whose size is no reason to refuse it. None when
    missing; the same checks and errors as `read_bytes` otherwise."""
    cap = limit if limit is not None else LIMITS.get(what, 4 * MiB)
    with _opened(path, what, missing_ok=True) as opened:
        if opened is None:
            return None
        fd, size = opened
        start = max(0, size - cap)
        return _read_at(fd, start, cap), start > 0  # at most `cap`, even when the file grows while it is read


@contextlib.contextmanager
def _opened(path: Path | str, what: str, *, missing_ok: bool) -> Iterator[tuple[int, int] | None]:
    """An open descriptor of `path` and its size, once fstat says it is a regular file (opened without
    blocking: a FIFO is refused, not waited on); None when missing and `missing_ok`. Closed on leaving;
    an OSError inside is the file system's error about `path`."""
    fd: int | None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        if not missing_ok:
            raise UsageError(f"cannot read {what} {path}: no such file") from None
        fd = None
    except IsADirectoryError:
        raise UsageError(f"{what} {path} is a directory, not a file") from None
    except OSError as error:
        raise (link_loop(path, what) if error.errno == errno.ELOOP else os_failure(error, path, f"read {what}")) from None
    if fd is None:
        yield None
        return
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{what} {path} is {kind_of(info.st_mode)}, not a regular file", hint="give c3 a regular file")
        yield fd, info.st_size
    except OSError as error:
        raise os_failure(error, path, f"read {what}") from None
    finally:
        os.close(fd)


def _read_at(fd: int, offset: int, most: int) -> bytes:
    """Up to `most` bytes of `fd` from `offset`, in chunks of at most 1 MiB, until the end of the file."""
    chunks, total = [], 0
    while total < most:
        chunk = os.pread(fd, min(1 * MiB, most - total), offset + total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


@overload
def read_text(path: Path | str, *, what: str, limit: int | None = None, missing_ok: Literal[False] = False, errors: str = "strict") -> str: ...
@overload
def read_text(path: Path | str, *, what: str, limit: int | None = None, missing_ok: bool, errors: str = "strict") -> str | None: ...
def read_text(path: Path | str, *, what: str, limit: int | None = None, missing_ok: bool = False, errors: str = "strict") -> str | None:
    """`read_bytes` decoded as UTF-8; undecodable text is a usage error unless `errors="replace"`."""
    raw = read_bytes(path, what=what, limit=limit, missing_ok=missing_ok)
    if raw is None:
        return None
    try:
        return raw.decode("utf-8", errors=errors)
    except UnicodeDecodeError:
        raise UsageError(f"{what} {path} is not UTF-8 text") from None


def load_json(text: str, *, source: str | Path, what: str, hint: str | None = None) -> Any:
    """A JSON document; syntax errors, duplicate keys, absurd nesting or integers are one usage error."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise _Duplicate(key)
            out[key] = value
        return out

    fix = hint or f"fix {source} by hand or remove it"
    try:
        return json.loads(text, object_pairs_hook=pairs)
    except _Duplicate as dup:
        raise UsageError(f"{what} {source}: duplicate key `{show(dup.key)}`", hint=fix) from None
    except json.JSONDecodeError as error:
        raise UsageError(f"{what} {source} is not valid JSON at line {error.lineno}, column {error.colno}: {show(error.msg, 60)}", hint=fix) from None
    except RecursionError:
        raise UsageError(f"{what} {source} is nested too deeply", hint=fix) from None
    except ValueError as error:  # Python's cap on integer digits, among others
        raise UsageError(f"{what} {source} holds a value JSON cannot read ({show(str(error), 60)})", hint=fix) from None


def read_json(path: Path, *, what: str, missing_ok: bool = False) -> Any:
    """`read_text` then `load_json`: the JSON document in a bounded regular file (None when missing and `missing_ok`)."""
    text = read_text(path, what=what, missing_ok=missing_ok)
    return None if text is None else load_json(text, source=path, what=what)


class _Duplicate(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _size(n: int) -> str:
    return f"{n / MiB:.0f} MiB" if n >= MiB else f"{n / KiB:.0f} KiB" if n >= KiB else f"{n} bytes"
