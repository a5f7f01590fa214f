"""Commands that break the CLI contract on purpose, to prove the harness sees each breach by both
paths (a real process and a fork of the warm interpreter): tests/cli/test_forkserver.py.

They reach `c3` the way a real command does: a `sitecustomize` on PYTHONPATH (written by the test)
adds `breach` to `c3.cli.COMMANDS` at interpreter start, in the real process and in the fork
server alike. Never part of the product.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import click

from backend.errors import C3Error

SITECUSTOMIZE = """import c3.cli
c3.cli.COMMANDS["breach"] = "tests.cli.planted:breach"
"""


@click.group()
def breach() -> None:
    """Contract breaches, one per command."""


@breach.command()
def traceback() -> None:
    raise RuntimeError("planted: an unexpected exception")


@breach.command("second-format")
def second_format() -> None:
    click.echo("Error: planted, a second error format", err=True)
    raise C3Error("planted")


@breach.command()
def exit4() -> None:
    click.echo("c3: error: planted", err=True)
    sys.exit(4)


@breach.command()
def silent() -> None:
    sys.exit(1)


@breach.command("exit-message")
def exit_message() -> None:
    sys.exit("planted: a message instead of an exit code")  # the interpreter prints it and exits 1


@breach.command()
def writes() -> None:
    Path(os.environ["C3_HOME"], "planted.txt").write_text("written before failing\n")
    raise C3Error("planted: failed after writing")


@breach.command("atexit-raises")
def atexit_raises() -> None:
    def boom() -> None:
        raise RuntimeError("planted: at exit")

    atexit.register(boom)  # the interpreter's shutdown prints its traceback; rc stays 0
    click.echo("done")


@breach.command("thread-raises")
def thread_raises() -> None:
    def late() -> None:
        time.sleep(0.2)
        raise RuntimeError("planted: in a thread after main returned")

    threading.Thread(target=late).start()  # non-daemon: the shutdown waits for it and its traceback
    click.echo("done")


@breach.command()
def signalled() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


@breach.command()
@click.argument("pidfile")
def hang(pidfile: str) -> None:
    """Start a grandchild, note its pid, and never end: the deadline must kill the whole group."""
    child = subprocess.Popen(["sleep", "600"])
    Path(pidfile).write_text(str(child.pid))
    time.sleep(600)
