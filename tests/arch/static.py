"""Run one of the project's static checkers (mypy, ruff, lint-imports) from this test environment.

Each reads its settings from pyproject.toml, so a test and a person at the shell run the same check.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_tool(tool: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`tool` from the interpreter's own bin/ (the test venv), run in the project root."""
    exe = Path(sys.executable).with_name(tool)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
