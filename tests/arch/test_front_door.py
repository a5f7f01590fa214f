"""c3/ reaches the backend only through backend.actions, backend.views, backend.models and
backend.errors (issue 13), so a write's rules live in one action class and every read is a named
query with a typed result that both front ends share.

The import-linter contract in pyproject.toml enforces it in `lint-imports` (tests/arch/test_layers.py);
that contract lists the forbidden packages by name, so this file also checks the rule on the import
graph directly and that the contract's list names every backend package outside the front door — a
new backend package cannot slip past by not being listed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp
import pytest

FRONT_DOOR = {"actions", "views", "models", "errors"}
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.static


def side_doors() -> list[str]:
    graph = grimp.build_graph("backend", "c3", "widgets", exclude_type_checking_imports=True)
    return sorted(
        f"{importer} -> {imported}"
        for importer in graph.modules
        if importer == "c3" or importer.startswith("c3.")
        for imported in graph.find_modules_directly_imported_by(importer)
        if imported.startswith("backend") and (imported == "backend" or imported.split(".")[1] not in FRONT_DOOR)
    )


def test_c3_uses_only_the_backends_front_door():
    doors = side_doors()
    assert doors == [], f"{len(doors)} imports past the front door:\n" + "\n".join(doors)


def test_the_front_door_check_sees_imports():
    """The check above must be able to fail: c3's CLI does import backend.errors, which it sees."""
    graph = grimp.build_graph("backend", "c3", "widgets", exclude_type_checking_imports=True)
    assert "backend.errors" in {m for i in graph.modules if i.startswith("c3.") for m in graph.find_modules_directly_imported_by(i)}


def test_the_contract_forbids_every_backend_package_outside_the_front_door():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["name"].startswith("c3 reaches the backend only"))
    packages = {p.name.removesuffix(".py") for p in (ROOT / "backend").iterdir() if not p.name.startswith("__") and (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert {f"backend.{p}" for p in packages - FRONT_DOOR} == set(contract["forbidden_modules"])
