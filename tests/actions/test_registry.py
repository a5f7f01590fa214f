"""The shape that makes a new write one class: every write is a registered action, the cockpit asks
for writes by registry name only, and no front end switches on a write's name."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import backend.actions as package
from backend.actions.base import Action
from backend.actions.registry import ACTIONS, build, load_all

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = {"base", "registry", "workspace", "inputs", "views", "session", "unit_install"}
FRONT_ENDS = [ROOT / "c3" / "app.py", *sorted((ROOT / "c3").glob("services*.py")), *sorted((ROOT / "c3" / "screens").glob("*.py")),
              *sorted((ROOT / "c3" / "modals").glob("*.py"))]


def _asked_for(path: Path) -> set[str]:
    """The write names a front-end file passes to `request_write(...)` / `make_plan(...)`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in {"request_write", "make_plan"}:
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                names.add(node.args[0].value)
    return names


def test_every_action_module_registers_its_class():
    registered = load_all()
    for module in pkgutil.iter_modules(package.__path__):
        if module.name in SUPPORT:
            continue
        mod = importlib.import_module(f"backend.actions.{module.name}")
        own = [c for c in vars(mod).values() if isinstance(c, type) and issubclass(c, Action) and c.__module__ == mod.__name__]
        assert own, f"backend/actions/{module.name}.py defines no action"
        for cls in own:
            assert registered.get(cls.key) is cls, f"{cls.__name__} is not registered as {cls.key}"
            assert cls.doing and "{" not in cls.doing.replace("{target}", ""), cls
    assert {"create", "up", "down", "rm", "stop_all", "node_add", "node_rm", "node_trust", "recipe_launch", "recipe_stop"} <= set(registered)


def test_the_cockpit_asks_only_for_registered_writes():
    load_all()
    asked = set().union(*(_asked_for(p) for p in FRONT_ENDS))
    orch = (ROOT / "c3" / "screens" / "orchestration.py").read_text()
    asked |= set(re.findall(r"pod\('(\w+)'\)", orch)) - {"logs", "details", "try", "shell"}  # the pod keys name their write in the binding (these only read; shell hands the terminal to docker exec)
    assert asked, "no write found: the scan is broken"
    assert asked <= set(ACTIONS), asked - set(ACTIONS)


def test_no_front_end_switches_on_a_write_name():
    """`kind == "up"`, `plan.kind in {...}`, `key == ...`: the action's own attributes say it instead."""
    pattern = re.compile(r"""\b(kind|key)\s*(==|!=|in)\s*[("{\[]?\s*["'](create|up|down|rm|stop_all|node_\w+|recipe_\w+)["']""")
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in FRONT_ENDS for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == []
    assert "WriteKind" not in "".join(p.read_text() for p in FRONT_ENDS)


def test_build_refuses_an_unknown_write_with_the_known_ones():
    import pytest

    from backend.errors import UsageError

    with pytest.raises(UsageError) as caught:
        build("explode", None)
    assert "no write is called `explode`" in caught.value.message and "up" in (caught.value.hint or "")
