"""Weights each rank loads: sharded bytes / TP plus what every rank replicates; PP splits by stage.

vLLM's `Model loading took X GiB` is the torch allocation delta of loading on one rank. Under TP it is
about total / TP plus replicated tensors (norms, routers, K/V projections when KV heads < TP); public
TP=2 logs show +0.02–0.07 GiB over an exact halving, so every TP > 1 rank is charged 0.07 GiB extra.
Every rank (and every PP stage) also builds the rotary cos/sin cache at load (`ModelSpec.rope_cache_bytes`).
Load factors over the checkpoint size: see `load_factor`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from backend.catalog.params import dtype_bytes, estimated_weight_bytes
from backend.models import CatalogEntry, ModelSpec

if TYPE_CHECKING:
    from backend.fit.plan import Knobs

GIB = 1024**3
_TP_REPLICATED_GIB = 0.07
_REPACK = 1.01
_MXFP4_LOAD = 1.086


def variant_bytes(spec: ModelSpec | None, entry: CatalogEntry | None) -> tuple[int | None, str]:
    """Checkpoint bytes for the entry's weights variant, and where the number comes from."""
    if spec is None:
        return None, "no model spec"
    wanted = entry.weights if entry is not None else None
    for variant in spec.weights:
        if wanted is None or variant.name == wanted:
            source = variant.source if len(variant.source) <= 90 else variant.source[:89] + "…"
            return variant.bytes, f"weights.csv {variant.name} ({variant.bytes / GIB:.2f} GiB): {source}"
    return estimated_weight_bytes(spec), "estimated from config.json shapes"


def load_factor(spec: ModelSpec | None, quantized: bool) -> float:
    """Loaded / checkpoint bytes: MXFP4 experts are padded and their E8M0 scales widened at load
    (gpt-oss-120b on H100 logged 65.97 GiB for a 60.77 GiB checkpoint, vllm#23278); other quantised
    formats are repacked (+1 %; for FP8 the logs show the checkpoint plus the rotary cache — 33.88 GiB
    per rank for Llama-3.3-70B-FP8 at TP 2, llm-d — but the 1 % stays: it covers the FP8 rows'
    other terms, which run above this model); bf16 loads as stored — the +0.03 GiB Llama-3.1-8B shows
    over its checkpoint (14.99 vs 14.96 GiB, vllm#10517) is its rotary cache (131,072 × 128 × 2 B),
    priced apart."""
    if spec is not None and spec.quant_method == "mxfp4":
        return _MXFP4_LOAD
    return _REPACK if quantized else 1.0


def mxfp4_kernel_padding(spec: ModelSpec | None, sm: str | None) -> float:
    """Extra MXFP4 expert padding of the kernel vLLM picks on this GPU, relative to the calibrated load factor.

    vllm/model_executor/layers/quantization/mxfp4.py: `get_mxfp4_backend` takes FlashInfer's MXFP4 MoE by default
    only on compute capability 10.0 (`is_device_capability(100) and has_flashinfer()`); sm 9.0 takes the Triton
    kernels or Marlin, older GPUs Marlin. `Mxfp4MoEMethod.create_weights` pads each expert for its kernel: Marlin
    rounds the intermediate size up to 128, FlashInfer (sm 10.0) to 256 (both pad hidden to 256). The 1.086
    factor was calibrated on a Marlin-padded H100 load, so only the FlashInfer case needs more: the ratio of the
    two intermediate paddings (gpt-oss: 3072 / 2944)."""
    if spec is None or spec.quant_method != "mxfp4" or sm is None or sm.strip() != "10.0":
        return 1.0
    inter = spec.moe_intermediate_size or spec.intermediate_size
    if not inter:
        return 1.0
    return _round_up(inter, 256) / _round_up(inter, 128)


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def stage_weights_gib(spec: ModelSpec, knobs: Knobs, *, sm: str | None = None) -> list[float] | None:
    """GiB one rank loads per pipeline stage: the measured `--weights-gib` for every stage, else the
    weight bytes split by TP/PP (`sm`: the ranks' compute capability, which picks vLLM's MXFP4 kernel);
    None when neither is known (the pricers then answer `unknown`)."""
    if knobs.weights_gib is not None:
        return [knobs.weights_gib] * knobs.pp
    if knobs.weights_bytes is not None:
        padded = int(knobs.weights_bytes * mxfp4_kernel_padding(spec, sm))
        return rank_weights_gib(spec, padded, tp=knobs.tp, pp=knobs.pp, quantized=knobs.quantized)
    return None


def rank_weights_gib(spec: ModelSpec | None, total_bytes: int, *, tp: int, pp: int, quantized: bool = False) -> list[float]:
    """Per-stage GiB of one rank (list of `pp` values; every TP rank of a stage loads the same)."""
    total = total_bytes / GIB * load_factor(spec, quantized)
    if pp <= 1:
        per_stage = [total]
    else:
        # Embedding on the first stage, lm_head on the last; decoder layers split evenly.
        embed = 0.0
        head = 0.0
        if spec is not None:
            embed = spec.vocab_size * spec.hidden_size * dtype_bytes(spec.dtype) / GIB
            head = 0.0 if spec.tie_word_embeddings else embed
        body = max(0.0, total - embed - head)
        per_stage = [body / pp for _ in range(pp)]
        per_stage[0] += embed
        per_stage[-1] += head if head else embed
    extra = _TP_REPLICATED_GIB if tp > 1 else 0.0
    rope = (spec.rope_cache_bytes if spec is not None else 0) / GIB
    return [w / tp + extra + rope for w in per_stage]
