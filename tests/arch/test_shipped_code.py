"""What ships (c3/, widgets/, backend/) carries no test doubles, never reaches into tests/, and the
cockpit uses only Textual's public API for its screens."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("c3", "widgets", "backend")


def sources(*packages: str) -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for package in packages for path in sorted((ROOT / package).rglob("*.py"))}


def test_no_fake_facade_ships_and_nothing_imports_tests():
    offenders = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p, text in sources(*SHIPPED).items()
                 for m in re.finditer(r"FakeServices|^\s*(from|import) tests\b.*$", text, re.MULTILINE)]
    assert offenders == []


def test_the_cockpit_touches_no_private_textual_attribute():
    private = r"\._(screen_stacks|current_mode|installed_screens|compose_stacks|screen_stack)\b"
    offenders = [f"{p.relative_to(ROOT)}:{text[: m.start()].count(chr(10)) + 1}" for p, text in sources("c3", "widgets").items() for m in re.finditer(private, text)]
    assert offenders == []


def _private_names(classes: set[type]) -> set[str]:
    """Every single-underscore name the Textual classes among `classes` and their bases define, class
    attributes and (read from their source) instance attributes such as `App._notifications`."""
    import inspect

    bases = {klass for cls in classes for klass in cls.__mro__ if klass.__module__.startswith("textual")}
    names = {name for klass in bases for name in vars(klass)}
    names |= {m.group(1) for klass in bases for m in re.finditer(r"\bself\.(_[A-Za-z]\w*)", inspect.getsource(klass))}
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def _textual_public_classes() -> set[type]:
    import inspect

    import textual.app
    import textual.containers
    import textual.screen
    import textual.widgets

    classes: set[type] = {textual.app.App, textual.screen.Screen, textual.screen.ModalScreen}
    for module in (textual.widgets, textual.containers):
        classes |= {v for n in getattr(module, "__all__", dir(module)) if inspect.isclass(v := getattr(module, n, None))}
    return classes


def private_textual_uses(files: dict[Path, str], module_of: dict[Path, str] | None = None) -> list[str]:
    """Where c3 touches a Textual private: `app._notifications`, `screen._x`… (any receiver but `self`:
    any private name of any Textual class); `self._x` in a class built on Textual classes, when `_x` is
    one of theirs (reaching into the base, or overriding its private by accident); imports from
    Textual's private modules (`textual.widgets._toast`). `module_of` names each file's module, to
    import its classes and read their bases."""
    import ast
    import importlib

    everywhere = _private_names(_textual_public_classes())
    found: list[str] = []
    for path, text in files.items():
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        module = importlib.import_module(module_of[path]) if module_of and path in module_of else None
        tree = ast.parse(text)
        own: dict[int, set[str]] = {}  # id of an Attribute node on `self` -> the privates of its class's Textual bases
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            klass = getattr(module, cls.name, None)
            privates = _private_names({klass}) if isinstance(klass, type) else set()
            for node in ast.walk(cls):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                    own[id(node)] = privates
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
                if node.attr in (own.get(id(node), set()) if on_self else everywhere):
                    found.append(f"{where}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("textual") and any(p.startswith("_") for p in node.module.split(".")):
                found.append(f"{where}:{node.lineno}: from {node.module}")
    return found


def test_the_cockpit_uses_no_textual_private_name(tmp_path):
    """Issue 13: c3 and widgets use Textual's public API only — a Textual release may rename any private.
    The check itself is shown to catch what it forbids: the withdrawal c3 once did (`app._unnotify` over
    `app._notifications`, ToastRack from `textual.widgets._toast`)."""
    planted = tmp_path / "planted.py"
    planted.write_text("from textual.widgets._toast import ToastRack\n"
                       "def withdraw(app, note):\n    for n in list(app._notifications):\n        app._unnotify(n)\n")
    assert len(private_textual_uses({planted: planted.read_text()})) == 3
    files = sources("c3", "widgets")
    modules = {p: ".".join(p.relative_to(ROOT).with_suffix("").parts) for p in files if p.name != "__main__.py"}  # importing it runs c3
    assert private_textual_uses(files, modules) == []
