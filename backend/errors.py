"""The small error hierarchy every layer raises and the CLI maps to one line and an exit code.

Exit codes are part of the CLI contract (DESIGN.md): 1 refused/failed, 2 usage, 3 environment.
"""

from __future__ import annotations

import errno
import re
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


class PhaseFailure(C3Error):
    """A multi-node launch failed in one named phase on one node: `phase <name> failed on node <node>:
    <reason>`. `tail` holds the last lines of that node's output (shown before the error line); the
    exit code is the cause's (1 refused or a part failed, 3 a node could not be reached, or the
    server's own status)."""

    def __init__(self, phase: str, node: str, reason: str, *, hint: str | None = None, tail: tuple[str, ...] = (),
                 exit_code: int = 1) -> None:
        super().__init__(f"phase {phase} failed on node {node}: {reason}", hint=hint)
        self.phase = phase
        self.node = node
        self.reason = reason
        self.tail = tail
        self.exit_code = exit_code


def os_failure(error: OSError, path: Path | str, doing: str, hint: str | None = None) -> EnvironmentProblem:
    """One environment-class error line for an OSError on `path` (never the errno's repr)."""
    reason = error.strerror or type(error).__name__
    if error.errno == errno.ENOSPC:
        reason = "no space left on the device"
    elif error.errno == errno.EROFS:
        reason = "the file system is read-only"
    return EnvironmentProblem(f"cannot {doing} {path}: {reason}", hint=hint or "check the folder's permissions and free space (C3_HOME / C3_STATE)")


# What a terminal acts on instead of showing: C0 controls (ESC starts every escape sequence, BEL ends
# OSC titles, CR overwrites a line), DEL, C1 controls (U+009B is a one-byte CSI), the bidirectional
# and zero-width format characters that reorder or hide text, and lone surrogates (undecodable bytes).
# Tab and newline stay: output is lines of text; `one_line` escapes newline too.
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff"
_UNSAFE_TEXT = re.compile(f"[{_UNSAFE}]")
UNSAFE_LINE = re.compile(f"[\t\n{_UNSAFE}]")
"""What `terminal_safe(text, one_line=True)` escapes (the cockpit's line filter searches with it first)."""


def _visible(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]  # "\x1b" → `\x1b`, "\n" → `\n`, "\u202e" → `\u202e`


def terminal_safe(text: str, *, one_line: bool = False) -> str:
    """`text` with every control character and escape shown as its Python escape (`\\x1b`), so a
    name or value from a file, a user or a remote system can neither drive the terminal (titles,
    clearing, cursor moves) nor, with `one_line`, split a one-line message."""
    pattern = UNSAFE_LINE if one_line else _UNSAFE_TEXT
    return pattern.sub(_visible, text) if pattern.search(text) else text
