"""SGLang by its own rule (research-fitcheck.md §2.3): a static pool of `total × mem_fraction_static`
holds weights and KV; activations, CUDA graphs and the rest live in `(1 − mem_fraction_static)`.

Per rank: `KV = total × mfs − weights − context` (context: CUDA context, NCCL, custom all-reduce and
the torch allocator's first arena, 1.0 GiB at TP = 1, 1.5 GiB at TP ≥ 2: a public 4× H100 log of
Qwen3-235B-A22B-FP8 at mem_fraction_static 0.93 allocated 367,404 tokens = 16.47 GiB per rank,
leaving about 2 GiB besides the weights, vllm#21348); the token pool is
`KV // cell_size` with `cell_size = Σ layers 2 × Hkv_rank × head_dim × e` (MLA: the latent) —
SWA layers are sized like full ones unless SGLang's hybrid SWA pool is enabled; Mamba/GDN state is
one slot per running request. Every rank takes the minimum pool.
"""

from __future__ import annotations

from backend.fit.compat import hardware_problems
from backend.fit.kvspec import STATE_KINDS, attention_bytes_per_token_layer, kv_layout
from backend.fit.plan import GIB, Knobs, Rank
from backend.fit.weights import stage_weights_gib
from backend.models import FitReport, GpuFit, ModelSpec

CONTEXT_TP1_GIB = 1.0
CONTEXT_TP_GIB = 1.5


def price_sglang(spec: ModelSpec, ranks: list[Rank], knobs: Knobs) -> FitReport:
    """Price `python3 -m sglang.launch_server` on `ranks`."""
    reasons, notes = hardware_problems(ranks, knobs)
    length = knobs.max_model_len or spec.max_position_embeddings
    seqs = knobs.max_num_seqs or 256
    kinds = spec.layer_types or tuple("full_attention" for _ in range(spec.num_layers))
    per_layer = attention_bytes_per_token_layer(spec, knobs.tp, knobs.kv_cache_dtype)
    attention_layers = sum(1 for k in kinds if k not in STATE_KINDS and k != "mlp")
    if knobs.pp > 1:
        attention_layers = -(-attention_layers // knobs.pp)
    cell = attention_layers * per_layer
    layout = kv_layout(spec, tp=knobs.tp, pp=knobs.pp, kv_cache_dtype=knobs.kv_cache_dtype)
    state = layout.state_bytes_per_layer * sum(layout.kinds.get(k, 0) for k in STATE_KINDS) * seqs / GIB
    if spec.unpriced:
        return FitReport(verdict="unknown", engine="sglang", reasons=[spec.unpriced], notes=notes)
    base = dict(engine="sglang", kv_bytes_per_token=cell, max_model_len=length, max_num_seqs=seqs, gpu_memory_utilization=knobs.util)
    if reasons:
        return FitReport(verdict="incompatible-hw", reasons=reasons, notes=notes, **base)
    from backend.fit.vllm import shard_problem

    if (problem := shard_problem(spec, knobs.tp)) is not None:
        return FitReport(verdict="wont-fit", reasons=[f"SGLang cannot shard this model: {problem}"], notes=notes, **base)
    if any(r.total_gib is None for r in ranks):
        return FitReport(verdict="unknown", reasons=["a GPU reports no usable memory total"], notes=notes, **base)
    stage_weights = stage_weights_gib(spec, knobs)
    if stage_weights is None:
        return FitReport(verdict="unknown", reasons=["weight size unknown"], notes=notes, **base)
    context = CONTEXT_TP1_GIB if knobs.tp * knobs.pp == 1 else CONTEXT_TP_GIB
    gpus = []
    for position, rank in enumerate(ranks):
        total = rank.total_gib or 0.0
        budget = total * knobs.util
        weights = stage_weights[min(position // max(1, knobs.tp), knobs.pp - 1)]
        available = budget - weights - context - state
        gpus.append(GpuFit(index=rank.index, card=rank.card, total_gib=round(total, 3), budget_gib=round(budget, 3), weights_gib=round(weights, 3),
                           activation_gib=0.0, non_torch_gib=context, cudagraph_gib=0.0, available_kv_gib=round(available, 3)))
        if total * (1 - knobs.util) < 1.5:
            notes.append(f"GPU {rank.index if rank.index is not None else position}: {total * (1 - knobs.util):.2f} GiB outside mem_fraction_static for activations and CUDA graphs")
    available_min = min(g.available_kv_gib for g in gpus)
    tokens = int(max(0.0, available_min) * GIB // cell) if cell else 0
    report = dict(base, kv_cache_tokens=tokens, max_concurrency=round(tokens / length, 2) if length else None,
                  max_model_len_fits=min(tokens, max(spec.max_position_embeddings, length)), available_kv_gib=round(available_min, 3), gpus=gpus)
    if available_min <= 0:
        return FitReport(verdict="wont-fit", reasons=["weights exceed mem_fraction_static × total on a rank"], notes=notes, **report)
    if tokens < length:
        return FitReport(verdict="wont-fit", reasons=[f"the KV pool holds {tokens:,} tokens, less than one {length:,}-token request"], notes=notes, **report)
    if any("outside mem_fraction_static" in n for n in notes) or tokens < 1.25 * length:
        return FitReport(verdict="tight", reasons=[n for n in notes if "outside" in n] or ["pool holds under 1.25 requests"], notes=[n for n in notes if "outside" not in n], **report)
    return FitReport(verdict="fits", notes=notes, **report)
