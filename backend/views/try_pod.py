"""`c3 pod try` and the cockpit's `t`: one test prompt to a running pod of the estate file, on the port
the plan publishes it on (as `c3 pod status` probes it), timed (backend/runtime/trial.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from backend.errors import Refused
from backend.runtime.trial import DEFAULT_PROMPT, TryResult

if TYPE_CHECKING:
    from backend.models import Pod
    from backend.runtime.context import RuntimeContext

__all__ = ["DEFAULT_PROMPT", "TryResult", "try_planned_pod", "try_pod"]


def try_planned_pod(ctx: RuntimeContext, pod: Pod, estate: Path, prompt: str, *, max_tokens: int, timeout_s: float) -> TryResult:
    """Ask `pod` (planned in `estate`) one prompt. Refused when its workload does not run, belongs to
    another estate file, or its engine does not answer in time."""
    from backend.runtime.status import describe_estate, same_estate
    from backend.runtime.trial import try_prompt
    from backend.settings import current

    workload = ctx.runtime.workload(pod.name)
    if not workload.running:
        state = "stopped" if workload.status == "absent" else workload.status
        raise Refused(f"pod {pod.name} is not running ({state})", hint=f"`c3 pod up {pod.name}` first")
    if workload.estate is not None and not same_estate(workload.estate, str(estate.resolve())):
        raise Refused(f"container c3-{pod.name} belongs to {describe_estate(workload.estate)}, not to {estate}",
                      hint="pass that file with --file")
    key = current().vllm_api_key
    return try_prompt(pod.name, pod.port, prompt, max_tokens=max_tokens, timeout_s=timeout_s, api_key=key.get_secret_value() if key else None)


def try_pod(name: str, prompt: str, *, max_tokens: int, timeout_s: float, file: Path | None = None) -> TryResult:
    """`c3 pod try NAME`: the pod named in the estate file (`--file`, else the default one)."""
    from backend.views.estate_file import estate_path, planned_pods
    from backend.wiring import open_context

    path = estate_path(file)
    pods = planned_pods(path)
    pod = next((p for p in pods if p.name.casefold() == name.casefold()), None)
    if pod is None:
        raise Refused(f"pod `{name}` not found in {path}", hint=f"pods in the file: {', '.join(p.name for p in pods) or 'none'}")
    return try_planned_pod(open_context(), pod, path, prompt, max_tokens=max_tokens, timeout_s=timeout_s)
