"""A pod's workload as the front ends read it: does it run, and its engine's log (the container's, or
— with no container — its last boot log)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from backend.errors import Refused

if TYPE_CHECKING:
    from backend.runtime.context import RuntimeContext
    from backend.runtime.models import ExecResult


class PodLog(BaseModel):
    """A pod's log lines: its workload's, or — with no workload — its last boot log."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    lines: list[str]
    """The last lines, oldest first."""
    boot_log: Path | None = None
    """Set when the lines come from the last boot log (there is no container)."""


def pod_log(ctx: RuntimeContext, name: str, tail: int, *, workload: Any = None, timestamps: bool = False) -> PodLog | None:
    """The last `tail` lines of a pod's engine output (each line prefixed with the runtime's receive
    time when `timestamps`), falling back to its last boot log when it has no workload; None when
    there is neither. Raises C3Error when the boot log cannot be read."""
    from backend.runtime.bootlog import read_tail

    workload = workload if workload is not None else ctx.runtime.workload(name)
    if workload.status != "absent":
        return PodLog(lines=ctx.runtime.logs(name, tail=tail, timestamps=timestamps).splitlines()[-tail:] if tail else [])
    found = read_tail(name, tail)
    if found is None:
        return None
    boot, lines = found
    return PodLog(lines=lines, boot_log=boot)


@dataclass(frozen=True)
class PodLogOutput:
    """What `c3 pod logs` prints: the container's log as the runtime gives it, its lines as they come
    (`--follow`), or — with no container — the last boot log."""

    text: str
    """The log text, printed as is (the boot log's lines joined when `boot_log` is set; empty when following)."""
    boot_log: Path | None = None
    """There is no container: `text` is this boot log's tail."""
    follow: Iterator[str] | None = None
    """`--follow`: the log's lines until the pod stops."""


def pod_log_output(name: str, tail: int, *, follow: bool = False) -> PodLogOutput:
    """A pod's engine output for `c3 pod logs`; Refused when it has neither a container nor a boot log."""
    from backend.wiring import open_context

    ctx = open_context()
    workload = ctx.runtime.workload(name)
    if workload.status == "absent":
        found = pod_log(ctx, name, tail, workload=workload)
        if found is None:
            raise Refused(f"pod {name} has no container and no boot log", hint=f"`c3 pod up {name}` first")
        return PodLogOutput(text="\n".join(found.lines), boot_log=found.boot_log)
    if follow:
        return PodLogOutput(text="", follow=iter(ctx.runtime.follow_logs(name, tail=tail)))
    return PodLogOutput(text=ctx.runtime.logs(name, tail=tail))


def pod_exec(name: str, argv: list[str], *, timeout_s: float) -> ExecResult:
    """`c3 pod exec NAME -- CMD…`: run a command in the pod's running container (on the simulated rig, in
    its sandbox: backend/sim/sandbox.py). Refused when the pod does not run or the command outlives
    `timeout_s`. The secrets c3 hands to containers (HF_TOKEN & co., VLLM_API_KEY) are masked
    as `***` in the output."""
    from backend.settings import current
    from backend.wiring import open_context

    ctx = open_context()
    workload = ctx.runtime.workload(name)
    if not workload.running:
        state = "stopped" if workload.status == "absent" else workload.status
        raise Refused(f"pod {name} is not running ({state})", hint=f"`c3 pod up {name}` first")
    found = ctx.runtime.exec_in(name, argv, timeout_s)
    settings = current()
    secrets = [*settings.secret_env().values(), *([settings.vllm_api_key.get_secret_value()] if settings.vllm_api_key else [])]
    output = found.output
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        output = output.replace(secret, "***")
    return found.model_copy(update={"output": output})


SHELL = "command -v bash >/dev/null 2>&1 && exec bash || exec sh"
"""What runs in the container: bash where the image has it (vLLM's and SGLang's do), else sh."""


def shell_argv(name: str) -> list[str]:
    """The command that opens an interactive shell in pod `name`'s container: the docker CLI (which
    honours DOCKER_HOST as c3 does) with a terminal, bash where the image has one."""
    from backend.runtime.docker_adapter import container_name

    return ["docker", "exec", "-it", container_name(name), "sh", "-c", SHELL]


def pod_shell(name: str) -> list[str]:
    """The cockpit's shell key: `shell_argv(name)` once the pod's container is known to run; on the
    simulated runtime a shell in the pod's sandbox (backend/sim/sandbox.py, as `c3 pod exec`). Refused
    for a pod that does not run; EnvironmentProblem when the docker CLI is not installed."""
    import shutil

    from backend.errors import EnvironmentProblem
    from backend.wiring import open_context

    ctx = open_context()
    workload = ctx.runtime.workload(name)
    if not workload.running:
        raise Refused(f"pod {name} is not running ({'stopped' if workload.status == 'absent' else workload.status})", hint="press u to boot it first")
    if ctx.runtime.kind == "sim":
        from backend.sim.runtime import SimRuntime

        if isinstance(ctx.runtime, SimRuntime):  # the one sim runtime; the check is for the type checker
            return ctx.runtime.shell_argv(name)
    if shutil.which("docker") is None:
        raise EnvironmentProblem("the docker CLI is not installed here: it opens the shell in the container", hint="install docker's client (apt-get install docker.io)")
    return shell_argv(name)


def pod_running(name: str) -> bool | None:
    """Does the pod's workload run? Raises EnvironmentProblem when the runtime cannot tell (daemon down)."""
    from backend.wiring import open_context

    return open_context().runtime.workload(name).running
