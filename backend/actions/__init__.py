"""One class per write, shared by the CLI and the cockpit: `plan()`, `problems()`, `run(progress)`.

Adding a write is one `@register`ed class in its own module here (plus its test); `registry.build`
makes one from what the cockpit knows. This package imports nothing heavy at import time: the
cockpit reads `base` and `inputs` on its event loop. The names below are loaded on first use
(PEP 562), as in `backend.views`: every `c3` command enters through `backend.actions.session`, and
a help page or `c3 pod list` has no use for the write classes' dataclasses (issue 22).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backend.actions.base import Action, Outcome, Plan, Problem, Progress, ProgressSink, refuse_on
    from backend.actions.inputs import NewNode, NewPod, RecipeLaunch

_WHERE = {
    "Action": "backend.actions.base",
    "Outcome": "backend.actions.base",
    "Plan": "backend.actions.base",
    "Problem": "backend.actions.base",
    "Progress": "backend.actions.base",
    "ProgressSink": "backend.actions.base",
    "refuse_on": "backend.actions.base",
    "NewNode": "backend.actions.inputs",
    "NewPod": "backend.actions.inputs",
    "RecipeLaunch": "backend.actions.inputs",
}

__all__ = ["Action", "NewNode", "NewPod", "Outcome", "Plan", "Problem", "Progress", "ProgressSink", "RecipeLaunch", "refuse_on"]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value  # once loaded, a plain module attribute
    return value
