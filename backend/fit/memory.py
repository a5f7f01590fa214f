"""What CUDA will see on a GPU: the total the engine's budget is a fraction of.

Order of trust: NVML v2 (`total − reserved`, exact: cards-README table); the matched profile's
logged CUDA total; the NVML total minus a per-family reserve estimate; a unified-memory profile's
logged total (GB10 reports no NVML memory at all). The per-family reserves are the largest values
seen in the cards-README captures for that family, so the estimate errs low (conservative).
"""

from __future__ import annotations

from backend.models import CardProfile, Gpu

# Driver reserve seen per family (cards-README "CUDA total = NVML total − reserved").
_RESERVE_MIB = {
    "8.0": 800,  # A100 80GB: 763
    "8.6": 560,  # 3090 422, A6000 450, A10 526
    "8.9": 560,  # 4090 354, 6000 Ada 500, L4 556
    "9.0": 720,  # H100 454, H100 NVL 594, H200 700
    "10.0": 800,
    "12.0": 520,  # 5090 487
}
_DEFAULT_RESERVE_MIB = 800


def reserve_estimate_mib(sm: str | None) -> int:
    """Driver reserve to assume when NVML's v2 memory info is not available."""
    return _RESERVE_MIB.get(sm or "", _DEFAULT_RESERVE_MIB)


def cuda_total_gib(gpu: Gpu, profile: CardProfile | None) -> tuple[float | None, str]:
    """(CUDA-visible total in GiB or None, how it was obtained); None rather than a total ≤ 0."""
    total, how = _cuda_total(gpu, profile)
    if total is not None and total <= 0:
        return None, f"implausible memory reading ({gpu.total_mib} MiB total, {gpu.reserved_mib} MiB reserved)"
    return total, how


def _cuda_total(gpu: Gpu, profile: CardProfile | None) -> tuple[float | None, str]:
    if gpu.total_mib is not None and gpu.reserved_mib is not None:
        return (gpu.total_mib - gpu.reserved_mib) / 1024, "NVML total − reserved"
    if profile is not None and profile.cuda_total_gib is not None:
        if profile.total_mib is None or gpu.total_mib is None:
            return profile.cuda_total_gib, f"{profile.id} logged CUDA total (unified memory)" if profile.unified_memory else f"{profile.id} logged CUDA total"
        if abs(gpu.total_mib - profile.total_mib) <= 2:
            return profile.cuda_total_gib, f"{profile.id} logged CUDA total"
    if gpu.total_mib is not None:
        sm = gpu.sm or (profile.sm if profile else None)
        reserve = reserve_estimate_mib(sm)
        return (gpu.total_mib - reserve) / 1024, f"NVML total − estimated {reserve} MiB reserve (sm {sm or '?'})"
    return None, "no memory reported and no profile"
