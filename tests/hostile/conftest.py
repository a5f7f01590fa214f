"""Fixtures the hostile-input tests share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def home() -> Path:
    """The test's own C3_HOME (tests/conftest.py sets it), created."""
    path = Path(os.environ["C3_HOME"])
    path.mkdir(parents=True, exist_ok=True)
    return path
