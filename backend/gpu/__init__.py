"""GPU probes: NVML on a real machine, a simulated rig (`C3_RIG`, or the built-in demo rig).

`get_probe()` is the one way the rest of c3 obtains a probe. The simulated rig lives in
`backend.sim.probe`; its names are still importable from here (loaded on first use, because
`backend.sim.probe` itself reads `backend.gpu.registry`).
"""

from __future__ import annotations

from typing import Any

from backend.errors import EnvironmentProblem
from backend.gpu.probe import GpuProbe

__all__ = [
    "DEMO_RIG",
    "GpuProbe",
    "Rig",
    "RigGpu",
    "SimulatedProbe",
    "derive_uuid",
    "get_probe",
    "load_rig",
]

_SIM_NAMES = frozenset({"DEMO_RIG", "Rig", "RigGpu", "SimulatedProbe", "derive_uuid", "load_rig", "probe_from_env"})


def __getattr__(name: str) -> Any:
    if name in _SIM_NAMES:
        from backend.sim import probe

        return getattr(probe, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_probe(*, demo: bool = False) -> GpuProbe:
    """The simulated probe when `C3_RIG` is set (or `demo`), else NVML.

    Raises EnvironmentProblem (exit 3) when neither is available, UsageError (exit 2) for a
    malformed rig file.
    """
    from backend.sim.probe import probe_from_env

    simulated = probe_from_env(demo=demo)
    if simulated is not None:
        return simulated
    from backend.gpu.nvml import NvmlProbe

    try:
        return NvmlProbe()
    except EnvironmentProblem as error:
        raise EnvironmentProblem(
            f"no GPUs to read: {error.message} and C3_RIG is not set",
            hint="on a machine without NVIDIA GPUs try `C3_RIG=demo c3 gpus` (the built-in demo rig) or C3_RIG=rig.yaml",
        ) from error
