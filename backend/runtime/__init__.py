"""The pod runtime: engine command lines, containers (docker-py) or local stub processes, GPU pinning,
gates before boot, readiness, placement verified from the host.

Entry points: `RuntimeContext` (probe + runtime + catalog, built by `backend.wiring.open_context`), `boot.boot_pod` / `boot.boot_many`,
`status.is_running` (the `c3 pod status` rows are built in `backend.views.pods`).

The names below are loaded on first use (PEP 562), as in `backend.views`: reading `runtime.models`
(a view's `Placement`) must not import the context, the status queries and the HTTP probe (issue 22).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from backend.runtime.context import RuntimeContext
    from backend.runtime.models import GateResult, LaunchSpec, Placement, Workload
    from backend.runtime.status import is_running

_WHERE = {
    "RuntimeContext": "backend.runtime.context",
    "GateResult": "backend.runtime.models",
    "LaunchSpec": "backend.runtime.models",
    "Placement": "backend.runtime.models",
    "Workload": "backend.runtime.models",
    "is_running": "backend.runtime.status",
}

__all__ = ["GateResult", "LaunchSpec", "Placement", "RuntimeContext", "Workload", "is_running"]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value  # once loaded, a plain module attribute
    return value
