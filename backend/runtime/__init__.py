"""The pod runtime: engine command lines, containers (docker-py) or local stub processes, GPU pinning,
gates before boot, readiness, placement verified from the host.

Entry points: `open_context()` (probe + runtime + catalog), `boot.boot_pod` / `boot.boot_many`,
`status.pod_rows`, `status.is_running`.
"""

from __future__ import annotations

from backend.runtime.context import RuntimeContext, open_context
from backend.runtime.models import GateResult, LaunchSpec, Placement, Workload
from backend.runtime.status import is_running

__all__ = ["GateResult", "LaunchSpec", "Placement", "RuntimeContext", "Workload", "is_running", "open_context"]
