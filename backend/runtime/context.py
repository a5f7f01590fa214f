"""Wiring: the GPU probe, the pod runtime, the catalog and the reservation rule, chosen once per command.

Runtime choice: `C3_RUNTIME=sim|docker` forces one; otherwise a simulated GPU probe (C3_RIG, `c3 demo`)
gets the simulated runtime and a real one gets Docker. No NVML is not fatal here: placement is then
`unknown` (with the reason), and the gates that need NVML report "not checked" (a boot then needs
--force) instead of passing on no data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from backend.errors import EnvironmentProblem
from backend.gpu.probe import GpuProbe
from backend.models import CatalogEntry, ComputeProcess, Gpu
from backend.runtime.protocol import PodRuntime

if TYPE_CHECKING:  # loaded on first use (see `entry`)
    from backend.catalog import Catalog


@dataclass
class RuntimeContext:
    """What every runtime command needs."""

    runtime: PodRuntime
    probe: GpuProbe | None
    """A GpuProbe, or None when NVML is unavailable (see `probe_problem`)."""
    probe_problem: str | None = None
    catalog: Catalog | None = None
    forced_mode: str | None = None
    reservation: Callable[[CatalogEntry, Gpu], int | None] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def simulated(self) -> bool:
        return self.probe is not None and str(getattr(self.probe, "source", "")).startswith("simulated")

    def gpus(self) -> list[Gpu]:
        if self.probe is None:
            return []
        return self.probe.gpus()

    def processes(self) -> list[ComputeProcess] | None:
        """Every compute process, or None when NVML cannot be asked (a failure here never crashes)."""
        if self.probe is None:
            return None
        try:
            return list(self.probe.processes())
        except Exception as error:  # NVML can fail mid-flight (driver reload, GPU fell off the bus)
            self.probe_problem = f"NVML stopped answering: {error}"
            return None

    def free_mib(self) -> dict[str, int | None]:
        """Free memory per GPU UUID (None for a card that reports none, e.g. a GB10).

        Raises EnvironmentProblem when there is no probe or it fails: an empty answer would let the
        VRAM gate pass on no data."""
        if self.probe is None:
            raise EnvironmentProblem(self.probe_problem or "NVML is unavailable")
        try:
            return {s.gpu.uuid: s.free_mib for s in self.probe.snapshots()}
        except Exception as error:  # NVML can fail mid-flight (driver reload, GPU fell off the bus)
            self.probe_problem = f"NVML stopped answering: {error}"
            raise EnvironmentProblem(self.probe_problem) from error

    def entry(self, slug: str) -> CatalogEntry:
        if self.catalog is None:
            from backend.catalog import load_catalog

            self.catalog = load_catalog()
        return self.catalog.get(slug)

    def reserve(self, entry: CatalogEntry, gpu: Gpu) -> int | None:
        if self.reservation is None:
            from backend.fit import reservation_mib

            self.reservation = reservation_mib
        return self.reservation(entry, gpu)


def runtime_kind(simulated_probe: bool) -> str:
    """`sim` or `docker`, from C3_RUNTIME or the probe."""
    from backend.settings import current

    value = current().runtime  # a value other than sim/docker is refused when the settings are read
    if value:
        return value
    return "sim" if simulated_probe else "docker"


def open_context(*, forced_mode: str | None = None, demo: bool = False, runtime: PodRuntime | None = None) -> RuntimeContext:
    """Build the context for one command (the Docker client connects lazily, on first use)."""
    probe, problem = None, None
    try:
        from backend.gpu import get_probe

        probe = get_probe(demo=demo)
    except EnvironmentProblem as error:
        problem = error.message
    simulated = probe is not None and str(getattr(probe, "source", "")).startswith("simulated")
    if runtime is None:
        if runtime_kind(simulated) == "sim":
            from backend.sim.runtime import SimRuntime

            runtime = SimRuntime()
        else:
            from backend.runtime.docker_adapter import DockerRuntime

            runtime = DockerRuntime(simulated_probe=simulated)
    from backend.runtime.gpu_mode import forced_mode as pick

    return RuntimeContext(runtime=runtime, probe=probe, probe_problem=problem, forced_mode=pick(forced_mode))
