"""Every fixture that takes the machine-wide cockpit-world lock puts its tests in the `world` xdist group, so that
under `--dist loadgroup` one worker runs them in turn instead of a second worker waiting on the lock (a whole CI run
saw a `shared_world` test's setup wait 151 s for it while its worker did nothing else)."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.plugins.workers import group_of

COCKPIT = Path(__file__).resolve().parents[1] / "cockpit"


def fixtures_building_worlds() -> set[str]:
    """The cockpit fixtures whose body builds or lends a World (`World.build`, `Worlds()`, the shared keeper)."""
    found = set()
    for path in COCKPIT.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            decorated = any("fixture" in ast.unparse(d) for d in node.decorator_list)
            body = ast.unparse(node)
            if decorated and any(word in body for word in ("World.build", "Worlds()", "_shared_worlds")):
                found.add(node.name)
    return found


# Read once, at collection, before any test has started a thread: CPython 3.11's C-to-Python AST conversion keeps
# its recursion depth in interpreter-wide state, and a worker that had run cockpit tests raised "SystemError: AST
# constructor recursion depth mismatch" from this very parse in a CI run.
WORLD_FIXTURES = fixtures_building_worlds()


def item_with(fixture: str):
    return SimpleNamespace(fixturenames=[fixture], iter_markers=lambda: iter(()), nodeid=f"tests/cockpit/x.py::t[{fixture}]")


def test_the_world_fixtures_are_found():
    assert {"demo_world", "worlds", "shared_world"} <= WORLD_FIXTURES


@pytest.mark.parametrize("fixture", sorted(WORLD_FIXTURES))
def test_a_world_fixture_puts_its_test_in_the_world_group(fixture):
    assert group_of(item_with(fixture)) == "world"
