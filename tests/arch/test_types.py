"""mypy over backend/, widgets/ and c3/ with the settings in pyproject.toml ([tool.mypy]): strict on
backend/ and widgets/, every def typed and checked on c3/. Any error fails the suite.

Deselect with `-m "not static"` when iterating; CI runs it.
"""

from __future__ import annotations

import pytest

from tests.arch.static import run_tool

pytestmark = pytest.mark.static


def test_mypy_finds_no_error():
    result = run_tool("mypy")
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
    assert "Success: no issues found" in result.stdout, result.stdout
