"""The runtime context: the GPU probe, the pod runtime, the catalog and the reservation rule of one command.

Which probe and runtime (simulated or real) is decided once, by the composition root `backend.wiring`
(`open_context`); this module only holds what it chose. No NVML is not fatal: placement is then `unknown`
(with the reason), and the gates that need NVML report "not checked" (a boot then needs --force)
instead of passing on no data.
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


def is_simulated(probe: GpuProbe | None) -> bool:
    """A simulated rig's probe (its source says `simulated:…`)."""
    return probe is not None and str(getattr(probe, "source", "")).startswith("simulated")


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
    reopen_probe: Callable[[], GpuProbe] | None = field(default=None, repr=False)
    """How to open the probe again when it was unavailable (the live hub retries it); None: it stays unavailable."""

    @property
    def simulated(self) -> bool:
        return is_simulated(self.probe)

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
