"""`c3 fit … --max-context`: the largest context one request can have on the chosen ranks, and which rank binds.

c3's own pricer is the oracle: a context L *holds* when the fit priced at `max_model_len = L` keeps one
request of L tokens in its KV pool. vLLM: `D(L) ≤ min_r blocks_r` (kvspec's per-request demand against the
smallest rank's blocks, `max_model_len_fits ≥ L`); llama.cpp: the KV of `--ctx-size L` (cells padded to 256)
fits every device's share after weights, compute buffer (which grows with L) and CUDA context
(`kv_cache_tokens ≥ L`). Holding is monotone in L for a fixed set of overhead terms, so the search is a
binary search over `[1, model max]` — split where an overhead term changes with L (vLLM's V0 profiler runs the
whole context up to 32 K, then chunks it), each piece searched on its own. That mirrors vLLM's own auto-fit
(`--max-model-len auto`: `_auto_fit_max_model_len` binary-searches each worker's largest length with
`_max_memory_usage_bytes_from_groups ≤ available_memory`, takes the minimum over workers, capped at the
model's derived max_model_len), and it is exact against `c3 fit --max-model-len L` by construction.
"""

from __future__ import annotations

from collections.abc import Callable

from backend.errors import Refused
from backend.fit.llamacpp import server_slots
from backend.fit.overhead import V0_CHUNKED_PREFILL_ABOVE
from backend.fit.plan import Knobs
from backend.models import FitReport, GpuFit, MaxContext

PRICEABLE = ("vllm", "llamacpp")
LLAMACPP_CELLS = 256
"""llama.cpp pads each KV stream to a multiple of 256 cells (llama-kv-cache: `GGML_PAD(n_ctx, 256)`)."""


def holds(report: FitReport, length: int) -> bool:
    """Whether the fit priced at `length` keeps one request of `length` tokens in its KV pool."""
    if report.engine == "llamacpp":
        return report.kv_cache_tokens is not None and report.kv_cache_tokens >= length
    return report.max_model_len_fits is not None and report.max_model_len_fits >= length


def _largest(price_at: Callable[[int], FitReport], low: int, high: int) -> tuple[int, FitReport] | None:
    """The largest L in [low, high] that holds (holding is monotone there), with its report; None when none does."""
    report = price_at(low)
    if not holds(report, low):
        return None
    best = (low, report)
    low += 1
    while low <= high:
        mid = (low + high) // 2
        report = price_at(mid)
        if holds(report, mid):
            best, low = (mid, report), mid + 1
        else:
            high = mid - 1
    return best


def _pieces(engine: str, model_max: int) -> list[tuple[int, int]]:
    """Ranges of L over which every overhead term is monotone in L (vLLM V0's activation drops past 32 K)."""
    if engine == "vllm" and model_max > V0_CHUNKED_PREFILL_ABOVE:
        return [(1, V0_CHUNKED_PREFILL_ABOVE), (V0_CHUNKED_PREFILL_ABOVE + 1, model_max)]
    return [(1, model_max)]


def _streams(knobs: Knobs) -> tuple[int, bool]:
    return server_slots(knobs.max_num_seqs, knobs.extra_args)


def _binding(report: FitReport) -> tuple[int, int]:
    """(position of the binding rank, how many ranks are as tight). vLLM: the fewest KV blocks (every rank is
    shrunk to that count); llama.cpp: the least KV memory per share of the layer split (the split is
    proportional to device memory, so the device that runs out first as L grows)."""
    gpus = report.gpus
    if report.engine == "llamacpp":
        whole = sum(g.total_gib for g in gpus) or 1.0

        def tightness(g: GpuFit) -> float:
            return g.available_kv_gib / (g.total_gib / whole) if g.total_gib else 0.0
    else:

        def tightness(g: GpuFit) -> float:
            return float(g.kv_blocks if g.kv_blocks is not None else g.available_kv_gib)

    values = [tightness(g) for g in gpus]
    least = min(values)
    return values.index(least), sum(1 for v in values if v == least)


def _nothing_fits(report: FitReport) -> Refused:
    """Why not even one token of context fits: the weights alone, or the weights with the engine's overheads."""
    for position, g in enumerate(report.gpus):
        where = f"GPU {g.index}" if g.index is not None else f"rank {position} ({g.card})"
        if g.weights_gib >= g.budget_gib:
            return Refused(f"no context fits: the weights alone ({g.weights_gib:.2f} GiB) exceed the budget of {where}, {g.budget_gib:.2f} GiB",
                           hint="use more or larger GPUs, or a smaller weights variant")
    reason = report.reasons[0] if report.reasons else "no memory is left for the KV cache"
    return Refused(f"no context fits: {reason}", hint="use more or larger GPUs, or a smaller weights variant")


def largest_context(price_at: Callable[[int], FitReport], *, model_max: int, knobs: Knobs) -> tuple[MaxContext, FitReport]:
    """The largest context that holds (capped at `model_max`) and the fit priced at it. Refused when the engine's
    context rule is not modelled, when the setup cannot be priced, or when not one token fits."""
    if knobs.engine not in PRICEABLE:
        raise Refused(f"--max-context: c3 cannot compute the largest context for {knobs.engine} (only vLLM and llama.cpp slugs)",
                      hint="price a given length with --max-model-len instead")
    at_max = price_at(model_max)
    if at_max.verdict in ("incompatible-hw", "unknown") and not holds(at_max, model_max):
        raise Refused(f"--max-context: {at_max.verdict}: {at_max.reasons[0] if at_max.reasons else 'c3 cannot price this setup'}")
    found: tuple[int, FitReport] | None = (model_max, at_max) if holds(at_max, model_max) else None
    if found is None:
        for low, high in _pieces(knobs.engine, model_max - 1):
            best = _largest(price_at, low, high)
            if best is not None and (found is None or best[0] > found[0]):
                found = best
    if found is None:
        raise _nothing_fits(price_at(1))
    tokens, report = found
    if report.verdict not in ("fits", "tight"):
        raise Refused(f"--max-context: at {tokens:,} tokens: {report.verdict}: {report.reasons[0] if report.reasons else 'see c3 fit --max-model-len'}")
    position, alike = _binding(report)
    rank = report.gpus[position]
    per_request = tokens
    if knobs.engine == "llamacpp":
        n_seq, unified = _streams(knobs)
        granularity = LLAMACPP_CELLS * (1 if unified else n_seq)
        per_request = tokens if unified else tokens // n_seq
    else:
        granularity = report.block_size or 16
    return MaxContext(
        tokens=tokens, bound="model" if tokens == model_max else "memory", model_max=model_max, granularity=granularity,
        kv_bytes_per_token=report.kv_bytes_per_token or 0, kv_budget_gib=rank.available_kv_gib, kv_blocks=report.kv_blocks,
        per_request_tokens=per_request, binding_rank=position, binding_gpu=rank.index, binding_card=rank.card, ranks_alike=alike,
    ), report
