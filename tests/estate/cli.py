"""Running `c3` in-process (fast) and as a real subprocess (`.venv/bin/c3`, for tracebacks and
concurrency)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from c3.cli import main

C3_BIN = Path(sys.executable).with_name("c3")

RIG_4 = """\
gpus:
  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6", reserved_mib: 422}
  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6", reserved_mib: 422}
  - {name: "NVIDIA GeForce RTX 5090", total_mib: 32607, sm: "12.0", reserved_mib: 487}
  - {name: "NVIDIA GeForce RTX 3090", total_mib: 24576, sm: "8.6", reserved_mib: 422}
"""

# H100s: every create in the concurrency tests fits with room to spare, whatever the fit-check's details.
RIG_8 = "gpus:\n" + "".join('  - {name: "NVIDIA H100 80GB HBM3", total_mib: 81559, sm: "9.0", reserved_mib: 454}\n' for _ in range(8))


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_inproc(*args: str) -> Result:
    """`main(args)` with stdout/stderr captured; any exception other than SystemExit propagates
    (that would have been a traceback for the user)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return Result(code, out.getvalue(), err.getvalue())


def run_proc(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
    """The installed console script as a real process."""
    full = dict(os.environ)
    full.update(env or {})
    done = subprocess.run([str(C3_BIN), *args], capture_output=True, text=True, env=full, timeout=timeout)
    return Result(done.returncode, done.stdout, done.stderr)
