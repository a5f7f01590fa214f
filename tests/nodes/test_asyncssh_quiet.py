"""Importing asyncssh says nothing on stderr: cryptography 51 deprecates DSA and asyncssh names DSA types
while importing, so every `c3` command that reached a node printed ten warning lines before its own
output, and before the one `c3: error:` line scripts read (seen failing in a whole CI run: 8 node and
shard tests)."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import sys, warnings
before = list(warnings.filters)
from backend.remote.ssh_target import quiet_asyncssh_import
quiet_asyncssh_import()
import asyncssh
assert warnings.filters == before, "the import changed the process's warning filters"
warnings.warn("still shown", UserWarning)
"""


def test_the_asyncssh_import_prints_no_warning_and_leaves_other_warnings_shown():
    # -W default: show every warning once, as a user's PYTHONWARNINGS or a debug run would.
    result = subprocess.run([sys.executable, "-W", "default", "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "Warning" in line]
    assert len(lines) == 1 and "UserWarning: still shown" in lines[0], result.stderr
