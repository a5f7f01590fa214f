"""`c3 … | head` closing the pipe early is not a failure: exit 0, nothing on stderr (no traceback, no
`Exception ignored` at shutdown). Deterministic: stdout is a pipe whose reader is already closed, so
the first write hits EPIPE whatever the machine's speed.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.cli.cases import SLUG
from tests.cli.harness import C3, base_env, fresh_dirs

READS = [("gpus",), ("gpus", "--json"), ("catalog",), ("catalog", "--json"), ("fit", SLUG, "--gpus", "0"), ("pod", "list"),
         ("recipes", "list"), ("--help",)]


@pytest.mark.parametrize("argv", READS, ids=[" ".join(a) for a in READS])
def test_closed_stdout_is_not_an_error(tmp_path, argv):
    dirs = fresh_dirs(tmp_path / "base")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([C3, *argv], stdout=write_end, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                              env=base_env(dirs), cwd=dirs["files"], timeout=60, check=False)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.returncode == 0, (done.returncode, done.stderr)
