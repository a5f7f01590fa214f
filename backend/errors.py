"""The small error hierarchy every layer raises and the CLI maps to one line and an exit code.

Exit codes are part of the CLI contract (DESIGN.md): 1 refused/failed, 2 usage, 3 environment.
"""

from __future__ import annotations

import errno
from pathlib import Path


class C3Error(Exception):
    """A failure a user can act on: one line of what went wrong, optionally a hint of what to do."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class Refused(C3Error):
    """A request that was understood but refused (validation, a gate, a conflict). Exit 1."""

    exit_code = 1


class UsageError(C3Error):
    """The command line or an input file is malformed. Exit 2."""

    exit_code = 2


class EnvironmentProblem(C3Error):
    """Something outside c3 is missing or unreachable (Docker, NVML, SSH). Exit 3."""

    exit_code = 3


def os_failure(error: OSError, path: Path | str, doing: str, hint: str | None = None) -> EnvironmentProblem:
    """One environment-class error line for an OSError on `path` (never the errno's repr)."""
    reason = error.strerror or type(error).__name__
    if error.errno == errno.ENOSPC:
        reason = "no space left on the device"
    elif error.errno == errno.EROFS:
        reason = "the file system is read-only"
    return EnvironmentProblem(f"cannot {doing} {path}: {reason}", hint=hint or "check the folder's permissions and free space (C3_HOME / C3_STATE)")
