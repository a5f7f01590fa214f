"""Everything the CLI prints passes one sanitizer (backend.errors.terminal_safe) on its way out.

(It lives beside the errors, whose messages quote user text: the one backend module `c3 --help`
already imports and that the front door lets c3 reach.)

Names and values come from files (the estate, catalog.d, recipes.d, profiles, config.json, the rig
file), from the user and from remote systems (engine logs, routers, SSH); any of them may hold an
escape sequence that sets the window title, clears the screen or hides text. Rather than trusting
each of the CLI's many `click.echo` calls to remember, `sanitized_output()` puts a filter in front of
`sys.stdout` and `sys.stderr` for the command's lifetime. The cockpit is not affected by that filter
(Textual drives the terminal through `sys.__stderr__`); it passes every line it draws through the same
function (c3/look.py `SafeTextFilter`, `shown`). `error_line` keeps the one-line error contract (a newline in a
name is shown as `\\n`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import click

from backend.errors import terminal_safe


class SafeStream:
    """A text stream that shows control characters visibly and otherwise behaves as the one it wraps
    (isatty, encoding, flush, buffer: click inspects them)."""

    def __init__(self, stream: TextIO) -> None:
        self.wrapped = stream

    def write(self, text: Any) -> int:
        # Bytes go through untouched so click's binary-writer probe (`write(b"")`) fails as it would.
        return self.wrapped.write(terminal_safe(text) if isinstance(text, str) else text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


@contextmanager
def sanitized_output() -> Iterator[None]:
    """Filter sys.stdout and sys.stderr for the block; put back what is still ours afterwards
    (click may have wrapped them in its EPIPE pacifier meanwhile, which then stays)."""
    saved = sys.stdout, sys.stderr
    sys.stdout = SafeStream(sys.stdout)
    sys.stderr = SafeStream(sys.stderr)
    try:
        yield
    finally:
        if isinstance(sys.stdout, SafeStream):
            sys.stdout = saved[0]
        if isinstance(sys.stderr, SafeStream):
            sys.stderr = saved[1]


def error_line(message: str, hint: str | None = None) -> None:
    """The `c3: error: …` line (and its `hint: …`) on stderr, each kept to one line."""
    click.echo(f"c3: error: {terminal_safe(message, one_line=True)}", err=True)
    if hint:
        click.echo(f"hint: {terminal_safe(hint, one_line=True)}", err=True)
