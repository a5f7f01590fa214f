"""The import contracts in pyproject.toml ([tool.importlinter]: the UI layer, one adapter per SDK, the backend's layers,
no cycles), and a run-time check that backend/ never loads textual, rich, c3 or widgets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.static
def test_import_linter_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_importing_every_backend_module_loads_no_ui():
    """A run-time check beside the static one: import all of backend/ and look at sys.modules."""
    code = (
        "import importlib, pkgutil, sys, backend\n"
        "for m in pkgutil.walk_packages(backend.__path__, 'backend.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in {'textual', 'rich', 'c3', 'widgets'})\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
