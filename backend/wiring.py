"""The composition root: where "simulated or real" is decided, once per command.

Every front end builds its world through here — the CLI's commands (through `backend.views` and
`backend.actions`), the cockpit's facade (`views.live_estate.LiveEstate`) and `c3 demo` (`demo=True`):

- the GPU probe: the simulated rig when `C3_RIG` is set (or `demo`), else NVML (`open_probe`);
- the pod runtime: `C3_RUNTIME=sim|docker` forces one; otherwise a simulated probe gets the simulated
  runtime (stub engines as local processes) and a real one gets Docker (`runtime_kind`);
- the runtime context that carries both, with the way to open the probe again (the live hub retries
  it when NVML was missing at start) so that nothing below decides again.

This module sits above `backend.gpu`, `backend.runtime` and `backend.sim` (pyproject.toml's layers),
which therefore never import each other to pick an implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from backend.errors import EnvironmentProblem
from backend.gpu.probe import GpuProbe
from backend.runtime.context import RuntimeContext, is_simulated
from backend.runtime.protocol import PodRuntime

if TYPE_CHECKING:
    from backend.models import Gpu


def open_probe(*, demo: bool = False) -> GpuProbe:
    """The simulated probe when `C3_RIG` is set (or `demo`), else NVML.

    Raises EnvironmentProblem (exit 3) when neither is available, UsageError (exit 2) for a
    malformed rig file.
    """
    from backend.sim.probe import probe_from_env

    simulated = probe_from_env(demo=demo)
    if simulated is not None:
        return simulated
    from backend.gpu import nvml_probe

    return nvml_probe()


def runtime_kind(simulated_probe: bool) -> str:
    """`sim` or `docker`, from C3_RUNTIME or the probe."""
    from backend.settings import current

    value = current().runtime  # a value other than sim/docker is refused when the settings are read
    if value:
        return value
    return "sim" if simulated_probe else "docker"


def open_runtime(*, simulated_probe: bool) -> PodRuntime:
    """The pod runtime for a probe of that kind (the Docker client connects lazily, on first use)."""
    if runtime_kind(simulated_probe) == "sim":
        from backend.sim.runtime import SimRuntime

        return SimRuntime()
    from backend.runtime.docker_adapter import DockerRuntime

    return DockerRuntime(simulated_probe=simulated_probe)


def open_context(*, forced_mode: str | None = None, demo: bool = False, runtime: PodRuntime | None = None) -> RuntimeContext:
    """Build the context for one command. No NVML is not fatal here: placement is then `unknown` (with the
    reason), and the gates that need NVML report "not checked" (a boot then needs --force)."""
    probe, problem = None, None
    try:
        probe = open_probe(demo=demo)
    except EnvironmentProblem as error:
        problem = error.message
    if runtime is None:
        runtime = open_runtime(simulated_probe=is_simulated(probe))
    from backend.runtime.gpu_mode import forced_mode as pick

    def reopen_probe() -> GpuProbe:
        return open_probe(demo=demo)

    return RuntimeContext(runtime=runtime, probe=probe, probe_problem=problem, forced_mode=pick(forced_mode), reopen_probe=reopen_probe)


def local_rig_gpus() -> Callable[[], list[Gpu]] | None:
    """This machine's GPUs for a launch's hardware check when a simulated rig stands in for it
    (`C3_RIG`, `c3 demo`): what its GPU probe reads. None on a real machine, where the launch asks
    nvidia-smi as on any node (backend.cluster.hardware)."""
    from backend.settings import current

    if not current().rig:
        return None
    return lambda: open_probe().gpus()
