"""llama.cpp (llama-server) by its own rules: no utilisation fraction, every byte is placed per device.

Per device (research-fitcheck.md §2.1, "llama.cpp"): model buffer (its share of the layers under the
default `--split-mode layer`, proportional to memory; the output layer on the last device) + KV
cells of its layers (`n_ctx` cells padded to 256 for full layers; SWA layers hold
`min(n_ctx, pad(window × n_seq + n_ubatch, 256))` cells; recurrent layers a fixed state per
sequence) + compute buffer (logits of one ubatch over the vocabulary plus the graph's scratch) +
CUDA context (~0.4 GiB, never logged) must stay under the device total minus llama.cpp's own 1 GiB
fit margin. `--ctx-size` is shared by the `--parallel` slots, so tokens are not per slot; with `-np`
left at 1 the server runs 4 slots over one unified pool, with `-np N > 1` N streams of `ctx/N`
(`server_slots`).
"""

from __future__ import annotations

from dataclasses import replace

from backend.fit.compat import hardware_problems
from backend.fit.kvspec import cdiv
from backend.fit.plan import GIB, Knobs, Rank
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


def server_slots(n_parallel: int | None, extra_args: tuple[str, ...] = ()) -> tuple[int, bool]:
    """(slots, unified KV) llama-server really runs with. tools/server/server.cpp: when `-np` is left at
    1 (its default) and `-kvu` is not given, the server switches to 4 slots over one unified KV pool
    ("setting n_parallel = 4 and kv_unified = true"); `-np N>1` gives N separate streams."""
    unified = any(a in ("-kvu", "--kv-unified") for a in extra_args)
    speculative = any(a in ("-md", "--model-draft") for a in extra_args)
    slots = n_parallel or 1
    if slots == 1 and not unified and not speculative:
        return 4, True
    return slots, unified


def _state_bytes(spec: ModelSpec, kind: str) -> int:
    """Recurrent state of one layer per sequence (llama-memory-recurrent: r and s rows, f32)."""
    if kind == "linear_attention":
        kh, vh = spec.linear_num_key_heads or 0, spec.linear_num_value_heads or 0
        kd, vd = spec.linear_key_head_dim or 0, spec.linear_value_head_dim or 0
        return ((2 * kh * kd + vh * vd) * ((spec.linear_conv_kernel_dim or 4) - 1) + vh * vd * kd) * 4
    inner, d_state, d_conv = spec.mamba_d_inner or 0, spec.mamba_d_state or 16, spec.mamba_d_conv or 4
    groups = (spec.mamba_n_groups or 1) if spec.mamba_version == 2 else 0
    # llama-hparams.cpp n_embd_r = (d_conv − 1)·(d_inner + 2·n_group·d_state), n_embd_s = d_state·d_inner.
    return ((d_conv - 1) * (inner + 2 * groups * d_state) + d_state * inner) * 4


def _kv_gib(spec: ModelSpec, n_ctx: int, n_seq: int, dtype: str, *, unified: bool = True, swa_full: bool = False) -> tuple[float, int]:
    """(KV + state GiB of the whole model at n_ctx, attention bytes per token).

    Cells (src/llama-context.cpp, src/llama-kv-cache-iswa.cpp): a unified pool holds one stream of
    `pad(n_ctx, 256)` cells; non-unified, each of the n_seq streams holds `n_ctx / n_seq`. SWA layers
    hold `pad(min(size, n_swa·(unified ? n_seq : 1) + n_ubatch), 256)` per stream (all with --swa-full).
    """
    per_layer = _kv_bytes_per_token_layer(spec, dtype)
    streams = 1 if unified else max(1, n_seq)
    size = cdiv(max(1, n_ctx // streams), 256) * 256
    kinds = spec.layer_types or tuple("full_attention" for _ in range(spec.num_layers))
    total = 0.0
    per_token = 0
    for kind in kinds:
        if kind == "mlp":
            continue
        if kind in ("linear_attention", "mamba"):
            total += _state_bytes(spec, kind) * max(1, n_seq)
            continue
        window = spec.sliding_window if kind == "sliding_attention" else spec.attention_chunk_size if kind == "chunked_attention" else None
        if window and not swa_full:
            cells = cdiv(min(size, window * (n_seq if unified else 1) + N_UBATCH), 256) * 256
        else:
            cells = size
        total += cells * streams * per_layer
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
    n_seq, unified = server_slots(knobs.max_num_seqs, knobs.extra_args)
    swa_full = "--swa-full" in knobs.extra_args
    dtype = knobs.kv_cache_dtype if knobs.kv_cache_dtype not in ("auto", "bf16", "fp16") else "f16"
    base = dict(engine="llamacpp", max_model_len=n_ctx, max_num_seqs=n_seq)
    if reasons:
        return FitReport(verdict="incompatible-hw", reasons=reasons, notes=notes, **base)
    if any(r.total_gib is None for r in ranks):
        return FitReport(verdict="unknown", reasons=["a GPU reports no usable memory total"], notes=notes, **base)
    if knobs.weights_bytes is None and knobs.weights_gib is None:
        return FitReport(verdict="unknown", reasons=["weight size unknown"], notes=notes, **base)
    if spec.unpriced:
        return FitReport(verdict="unknown", reasons=[spec.unpriced], notes=notes, **base)
    weights_total = knobs.weights_gib * len(ranks) if knobs.weights_gib is not None else (knobs.weights_bytes or 0) / GIB
    totals = [r.total_gib or 0.0 for r in ranks]
    shares = [t / sum(totals) for t in totals]
    compute = knobs.measured_compute_gib if knobs.measured_compute_gib is not None else _compute_gib(spec, n_ctx)

    def kv_need(ctx: int) -> float:
        return _kv_gib(spec, ctx, n_seq, dtype, unified=unified, swa_full=swa_full)[0]

    kv_total, per_token = _kv_gib(spec, n_ctx, n_seq, dtype, unified=unified, swa_full=swa_full)
    gpus = []
    room = []
    for i, rank in enumerate(ranks):
        budget = totals[i] - MARGIN_GIB
        weights = weights_total * shares[i]
        act = compute if i == len(ranks) - 1 else compute * 0.5
        available = budget - weights - act - CUDA_CONTEXT_GIB
        room.append((available, shares[i]))
        gpus.append(GpuFit(index=rank.index, card=rank.card, total_gib=round(totals[i], 3), budget_gib=round(budget, 3), weights_gib=round(weights, 6),
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
    # Concurrency is counted in requests of the longest length one request can hold: with a unified pool
    # that is the whole --ctx-size (the slots share it, so 4 slots do not make 4 full-length requests);
    # with separate streams it is one stream's share, and every slot can be full at once.
    per_request = n_ctx if unified else n_ctx // n_seq
    if not unified:
        base["max_model_len"] = per_request
    report = dict(base, kv_bytes_per_token=per_token, kv_cache_tokens=low, max_model_len_fits=low if unified else low // n_seq,
                  max_concurrency=(round(low / n_ctx, 2) if unified else round(low / n_ctx * n_seq, 2)) if n_ctx else None,
                  available_kv_gib=round(min(a for a, _ in room), 3), gpus=gpus)
    pool = "one unified pool" if unified else f"{n_seq} streams of {n_ctx // n_seq:,} tokens (one request holds at most that)"
    notes.append(f"KV at --ctx-size {n_ctx:,} ({n_seq} slot(s), {pool}, {dtype}): {kv_total:.2f} GiB over {len(ranks)} GPU(s)")
    if (knobs.max_num_seqs or 1) == 1 and n_seq == 4:
        notes.append("llama-server runs 4 slots over a unified KV pool when -np is 1 or unset (server.cpp); priced that way")
    if min(a for a, _ in room) <= 0:
        return FitReport(verdict="wont-fit", reasons=["the weights and compute buffers alone exceed a device (all layers offloaded)"], notes=notes, **report)
    if not fits(n_ctx):
        return FitReport(verdict="wont-fit", reasons=[f"KV for --ctx-size {n_ctx:,} does not fit; largest that fits: {low:,}"], notes=notes, **report)
    if not all(avail - 0.5 >= kv_total * share for avail, share in room):
        return FitReport(verdict="tight", reasons=["less than 0.5 GiB spare on a device after KV"], notes=notes, **report)
    return FitReport(verdict="fits", notes=notes, **report)
