"""`c3 spark doctor`: whether this machine has what vLLM's JIT kernel builds need."""

from __future__ import annotations

from backend.spark import DoctorReport, doctor


def spark_readiness() -> DoctorReport:
    """Each prerequisite of a native vLLM on this machine, present or not (asks dpkg, nvcc and
    nvidia-smi here, now); its JSON (with `ok` and `missing_apt`) is `c3 spark doctor --json`."""
    return doctor()
