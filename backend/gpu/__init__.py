"""GPU probes: the `GpuProbe` protocol and its NVML implementation.

The simulated rig (`C3_RIG`, or the built-in demo rig) lives in `backend.sim.probe`; which of the two a
command gets is decided by the composition root, `backend.wiring.open_probe`.
"""

from __future__ import annotations

from backend.errors import EnvironmentProblem
from backend.gpu.probe import GpuProbe

__all__ = ["GpuProbe", "nvml_probe"]


def nvml_probe() -> GpuProbe:
    """The NVML probe. Raises EnvironmentProblem (exit 3) when NVML is unavailable, with the hint
    that names the simulated rig."""
    from backend.gpu.nvml import NvmlProbe

    try:
        return NvmlProbe()
    except EnvironmentProblem as error:
        raise EnvironmentProblem(
            f"no GPUs to read: {error.message} and C3_RIG is not set",
            hint="on a machine without NVIDIA GPUs try `C3_RIG=demo c3 gpus` (the built-in demo rig) or C3_RIG=rig.yaml",
        ) from error
