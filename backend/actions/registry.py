"""Every write by name: adding a write is one `@register`ed action class (and its test).

The cockpit asks for writes by these names (its keys and palette), the facade builds the action from
the registry, and no front end switches on a name.
"""

from __future__ import annotations

from typing import Any, TypeVar

from backend.actions.base import Action

A = TypeVar("A", bound=type[Action])

ACTIONS: dict[str, type[Action]] = {}


def register(cls: A) -> A:
    """Class decorator: file the action under its `key` (one class per key)."""
    if cls.key in ACTIONS and ACTIONS[cls.key] is not cls:
        raise ValueError(f"two actions are called {cls.key}: {ACTIONS[cls.key].__name__} and {cls.__name__}")
    ACTIONS[cls.key] = cls
    return cls


def load_all() -> dict[str, type[Action]]:
    """Import every action module (they register themselves) and return the registry."""
    import importlib
    import pkgutil

    import backend.actions as package

    for module in pkgutil.iter_modules(package.__path__):
        if module.name not in {"base", "registry", "workspace", "inputs", "views"}:
            importlib.import_module(f"backend.actions.{module.name}")
    return ACTIONS


def build(key: str, ws: Any, target: str | None = None, request: Any = None) -> Action:
    """The action `key` for a target (a pod, node or profile name) or a form's request."""
    cls = load_all().get(key)
    if cls is None:
        from backend.errors import UsageError

        raise UsageError(f"no write is called `{key}`", hint="known: " + ", ".join(sorted(ACTIONS)))
    return cls.from_request(ws, target, request)
