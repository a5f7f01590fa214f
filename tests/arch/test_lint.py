"""ruff over the whole project with the rules in pyproject.toml ([tool.ruff]). Any finding fails the suite.

Deselect with `-m "not static"` when iterating; CI runs it.
"""

from __future__ import annotations

import pytest

from tests.arch.static import run_tool

pytestmark = pytest.mark.static


def test_ruff_finds_nothing():
    result = run_tool("ruff", "check", "--output-format", "concise", "--no-cache", ".")
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    assert "All checks passed" in result.stdout, result.stdout
