"""Hardware gates that come before any memory arithmetic: compute capability, mixed architectures,
KV dtypes the card's kernels support."""

from __future__ import annotations

from backend.fit.plan import Knobs, Rank, sm_tuple


def hardware_problems(ranks: list[Rank], knobs: Knobs) -> tuple[list[str], list[str]]:
    """(reasons that make the set incompatible, notes about slower fallbacks)."""
    reasons: list[str] = []
    notes: list[str] = []
    need = sm_tuple(knobs.required_sm)
    fallback = sm_tuple(knobs.fallback_sm)
    for rank in ranks:
        have = sm_tuple(rank.sm)
        where = f"GPU {rank.index}" if rank.index is not None else (rank.card or "card")
        if need is None or have is None:
            continue
        if have >= need:
            continue
        if fallback is not None and have >= fallback:
            notes.append(f"{where} (sm {rank.sm}) is below sm {knobs.required_sm}: runs on the slower sm {knobs.fallback_sm} path")
        else:
            floor = f" (fallback needs sm {knobs.fallback_sm})" if knobs.fallback_sm else ""
            reasons.append(f"{where} has compute capability {rank.sm}; this slug needs sm {knobs.required_sm}{floor}")
    arches = {rank.sm for rank in ranks if rank.sm}
    if knobs.requires_homogeneous_arch and len(arches) > 1:
        reasons.append(f"this slug needs one GPU architecture across its TP set; got sm {', '.join(sorted(arches))}")
    kv = (knobs.kv_cache_dtype or "auto").lower()
    for rank in ranks:
        if rank.kv_dtypes is not None and kv not in rank.kv_dtypes and kv not in ("bfloat16", "float16", "half"):
            where = f"GPU {rank.index}" if rank.index is not None else (rank.card or "card")
            reasons.append(f"{where} (sm {rank.sm}) has no kernels for KV dtype {kv}; supported: {', '.join(rank.kv_dtypes)}")
    return reasons, notes
