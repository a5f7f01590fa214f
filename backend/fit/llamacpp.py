"""llama.cpp (llama-server) by its own rules: no utilisation fraction, every byte is placed per device.

Per device (research-fitcheck.md §2.1, "llama.cpp"): model buffer (its share of the layers under the
default `--split-mode layer`, proportional to memory; the output layer on the last device) + KV
cells of its layers (`n_ctx` cells padded to 256 for full layers; SWA layers hold
`min(n_ctx, pad(window × n_seq + n_ubatch, 256))` cells; recurrent layers a fixed state per
sequence) + compute buffer (logits of one ubatch over the vocabulary plus the graph's scratch) +
CUDA context (~0.4 GiB, never logged) must stay under the device total minus llama.cpp's own 1 GiB
fit margin. `--ctx-size` is shared by the `--parallel` slots, so tokens are not per slot.
"""

from __future__ import annotations

from dataclasses import replace

from backend.fit.kvspec import cdiv
from backend.fit.plan import GIB, Knobs, Rank
from backend.fit.compat import hardware_problems
from backend.models import FitReport, GpuFit, ModelSpec

MARGIN_GIB = 1.0
CUDA_CONTEXT_GIB = 0.4
N_UBATCH = 512
_ELEMENT = {"f16": 2.0, "bf16": 2.0, "auto": 2.0, "fp16": 2.0, "f32": 4.0, "q8_0": 34 / 32, "q5_1": 24 / 32, "q5_0": 22 / 32, "q4_1": 20 / 32, "q4_0": 18 / 32, "iq4_nl": 18 / 32}


def _kv_bytes_per_token_layer(spec: ModelSpec, dtype: str) -> float:
    e = _ELEMENT.get(dtype.lower(), 2.0)
    if spec.kv_lora_rank:
        return (spec.kv_lora_rank + (spec.qk_rope_head_dim or 0)) * e
    return 2 * spec.num_kv_heads * spec.head_dim * e


def _kv_gib(spec: ModelSpec, n_ctx: int, n_seq: int, dtype: str) -> tuple[float, int]:
    """(KV + state GiB of the whole model at n_ctx, attention bytes per token)."""
    per_layer = _kv_bytes_per_token_layer(spec, dtype)
    cells = cdiv(max(1, n_ctx), 256) * 256
    kinds = spec.layer_types or tuple("full_attention" for _ in range(spec.num_layers))
    total = 0.0
    per_token = 0
    for kind in kinds:
        if kind == "linear_attention":
            kh, vh = spec.linear_num_key_heads or 0, spec.linear_num_value_heads or 0
            kd, vd = spec.linear_key_head_dim or 0, spec.linear_value_head_dim or 0
            conv = (2 * kh * kd + vh * vd) * ((spec.linear_conv_kernel_dim or 4) - 1)
            total += (conv + vh * vd * kd) * 4 * n_seq
            continue
        if kind == "sliding_attention" and spec.sliding_window:
            swa = min(cells, cdiv(spec.sliding_window * n_seq + N_UBATCH, 256) * 256)
            total += swa * per_layer
        elif kind == "chunked_attention" and spec.attention_chunk_size:
            total += min(cells, cdiv(spec.attention_chunk_size * n_seq + N_UBATCH, 256) * 256) * per_layer
        else:
            total += cells * per_layer
        per_token += int(per_layer)
    return total / GIB, per_token


def _compute_gib(spec: ModelSpec, n_ctx: int) -> float:
    logits = N_UBATCH * spec.vocab_size * 4
    scratch = N_UBATCH * (spec.hidden_size * 4 * 6 + (spec.intermediate_size or 4 * spec.hidden_size) * 4 * 2)
    mask = N_UBATCH * cdiv(max(1, n_ctx), 256) * 256 * 2
    return (logits + scratch + mask) / GIB + 0.1


def price_llamacpp(spec: ModelSpec, ranks: list[Rank], knobs: Knobs) -> FitReport:
    """Price llama-server with every layer offloaded over `ranks`."""
    reasons, notes = hardware_problems(ranks, replace(knobs, kv_cache_dtype="auto"))
    n_ctx = knobs.max_model_len or min(spec.max_position_embeddings, 4096)
    n_seq = knobs.max_num_seqs or 1
    dtype = knobs.kv_cache_dtype if knobs.kv_cache_dtype not in ("auto", "bf16", "fp16") else "f16"
    base = dict(engine="llamacpp", max_model_len=n_ctx, max_num_seqs=n_seq)
    if reasons:
        return FitReport(verdict="incompatible-hw", reasons=reasons, notes=notes, **base)
    if any(r.total_gib is None for r in ranks):
        return FitReport(verdict="unknown", reasons=["a GPU reports no usable memory total"], notes=notes, **base)
    if knobs.weights_bytes is None and knobs.weights_gib is None:
        return FitReport(verdict="unknown", reasons=["weight size unknown"], notes=notes, **base)
    weights_total = knobs.weights_gib * len(ranks) if knobs.weights_gib is not None else (knobs.weights_bytes or 0) / GIB
    totals = [r.total_gib or 0.0 for r in ranks]
    shares = [t / sum(totals) for t in totals]
    compute = _compute_gib(spec, n_ctx)

    def kv_need(ctx: int) -> float:
        return _kv_gib(spec, ctx, n_seq, dtype)[0]

    kv_total, per_token = _kv_gib(spec, n_ctx, n_seq, dtype)
    gpus = []
    room = []
    for i, rank in enumerate(ranks):
        budget = totals[i] - MARGIN_GIB
        weights = weights_total * shares[i]
        act = compute if i == len(ranks) - 1 else compute * 0.5
        available = budget - weights - act - CUDA_CONTEXT_GIB
        room.append((available, shares[i]))
        gpus.append(GpuFit(index=rank.index, card=rank.card, total_gib=round(totals[i], 3), budget_gib=round(budget, 3), weights_gib=round(weights, 3),
                           activation_gib=round(act, 3), non_torch_gib=CUDA_CONTEXT_GIB, cudagraph_gib=0.0, available_kv_gib=round(available, 3)))
    # Largest context whose per-device KV share fits everywhere.
    def fits(ctx: int) -> bool:
        need = kv_need(ctx)
        return all(avail >= need * share for avail, share in room)

    cap = max(spec.max_position_embeddings, n_ctx)
    low, high = 0, cap
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    report = dict(base, kv_bytes_per_token=per_token, kv_cache_tokens=low, max_model_len_fits=low,
                  max_concurrency=round(low / n_ctx * n_seq, 2) if n_ctx else None,
                  available_kv_gib=round(min(a for a, _ in room), 3), gpus=gpus)
    notes.append(f"KV at --ctx-size {n_ctx:,} ({n_seq} slot(s), {dtype}): {kv_total:.2f} GiB over {len(ranks)} GPU(s)")
    if min(a for a, _ in room) <= 0:
        return FitReport(verdict="wont-fit", reasons=["the weights and compute buffers alone exceed a device (all layers offloaded)"], notes=notes, **report)
    if not fits(n_ctx):
        return FitReport(verdict="wont-fit", reasons=[f"KV for --ctx-size {n_ctx:,} does not fit; largest that fits: {low:,}"], notes=notes, **report)
    if not all(avail - 0.5 >= kv_total * share for avail, share in room):
        return FitReport(verdict="tight", reasons=["less than 0.5 GiB spare on a device after KV"], notes=notes, **report)
    return FitReport(verdict="fits", notes=notes, **report)
