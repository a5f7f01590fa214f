"""vLLM's own memory algorithm, replayed (research-fitcheck.md "(i) Recommended estimator").

Per rank r: `budget_r = total_r × util`; `K_r = budget_r − weights_r − non_torch − activation −
cudagraph`; `blocks_r = K_r // block_bytes`. Every rank is shrunk to `min_r blocks_r` (that is how a
heterogeneous TP set ends up limited by its smallest card). One request of `max_model_len` needs
`D(L)` blocks (kvspec); `max_concurrency = blocks / D(L)`; `kv_cache_tokens = ⌊max_concurrency × L⌋`
(the newer vLLM log line); `max_model_len_fits` is the largest L with `D(L) ≤ blocks`.
"""

from __future__ import annotations

from backend.fit.compat import hardware_problems
from backend.fit.kvspec import STATE_KINDS, KvLayout, kv_layout
from backend.fit.llamacpp import CUDA_CONTEXT_GIB
from backend.fit.overhead import assumed_nvswitch, non_torch_gib, overheads, priced_engine_version, profile_counted_twice
from backend.fit.plan import GIB, Knobs, Rank, arg_value, sm_tuple
from backend.fit.weights import stage_weights_gib
from backend.models import FitReport, GpuFit, ModelSpec

# Margin for "tight": the estimated (non-KV) terms are within about this much of what vLLM measures.
TIGHT_MARGIN_GIB = 0.75
# Physical headroom outside the budget that unprofiled runtime peaks need on a discrete card.
MIN_HEADROOM_GIB = 1.0
# A unified-memory GB10 had 102–110 GiB free at boot in public reports.
UNIFIED_FREE_GIB = 102.0


HYBRID_MANAGER_FROM = (0, 10)
"""vLLM's hybrid KV-cache manager (per-kind groups) shipped in v0.10; before it, mixed sliding/chunked
stacks were unified to full attention (every layer keeps every token)."""
CHUNKED_HYBRID_DEFAULT_FROM = (0, 19)
"""VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaulted to off when it was added (vllm#21761,
v0.10) and was later flipped on (vllm#29627); v0.19 logs show it on. Versions in between are priced
with it off (the pessimistic reading)."""


LARGEST_DEFAULTS_FROM = (0, 28)
"""vllm/engine/arg_utils.py:2582 at v0.28.0: `device_memory >= 160 * GiB_bytes` ("GPUs like B200/B300") → 1024/16384
for the API server; v0.27.1 has no such tier."""


def default_batching(nvml_total_gib: float, gpu_name: str | None, version: tuple[int, int] | None = None) -> tuple[int, int, str | None]:
    """`vllm serve` defaults (max_num_seqs, max_num_batched_tokens, caveat). vllm/engine/arg_utils.py
    `_set_default_args`: from v0.28 `device_memory >= 160 GiB` → 1024/16384; `device_memory >= 70 GiB and "a100" not
    in device_name` → 1024/8192, else 256/2048; `device_memory` is `get_device_total_memory()`, the NVML total. Without
    a device name a ≥ 70 GiB card is priced with the larger (costlier) defaults and says so; without a version a
    ≥ 160 GiB card gets v0.28's 16384 (the costlier side), with a caveat."""
    if nvml_total_gib >= 160:
        if version is None:
            return 1024, 16384, "vLLM version unknown: priced with v0.28+'s ≥ 160 GiB defaults (1024/16384); older releases use 8192 tokens"
        if version >= LARGEST_DEFAULTS_FROM:
            return 1024, 16384, None
    if nvml_total_gib < 70:
        return 256, 2048, None
    if gpu_name is None:
        return 1024, 8192, "GPU name unknown: priced with vLLM's ≥ 70 GiB defaults (an A100 would get 256/2048)"
    if "a100" in gpu_name.lower():
        return 256, 2048, None
    return 1024, 8192, None


def hybrid_manager_on(spec: ModelSpec, knobs: Knobs) -> tuple[bool, str | None]:
    """Whether vLLM keeps per-kind KV groups, and why not. vllm/config/vllm.py turns the hybrid
    manager off for chunked local attention (Llama 4: "There is a latency regression when using
    chunked local attention with the hybrid KV cache manager") unless
    VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE is set — its default changed between
    versions — and for KV connectors that do not support it; `unify_hybrid_kv_cache_specs` then
    turns every sliding/chunked layer into a full-attention one."""
    kinds = set(spec.layer_types or ())
    if not kinds & {"sliding_attention", "chunked_attention"}:
        return True, None
    if knobs.version is not None and knobs.version < HYBRID_MANAGER_FROM:
        return False, f"vLLM {knobs.version[0]}.{knobs.version[1]} predates the hybrid KV manager: sliding/chunked layers priced as full attention"
    if any(a.startswith("--kv-transfer-config") for a in knobs.extra_args):
        return False, "a KV connector is configured: vLLM turns the hybrid KV manager off for connectors without support for it, so every layer is priced as full attention"
    if "chunked_attention" in kinds:
        env = knobs.hybrid_kv_env
        default_on = knobs.version is not None and knobs.version >= CHUNKED_HYBRID_DEFAULT_FROM
        if env is False or (env is None and not default_on):
            why = "off" if knobs.version is not None or env is False else "default unknown without an engine version"
            return False, f"chunked local attention: VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE {why}, so vLLM may run without the hybrid KV manager: every layer is priced as full attention"
    return True, None


NULL_BLOCK_RESERVED_FROM = (0, 28)
"""vLLM keeps one block of the pool as BlockPool's null block, and from vllm#47272 (merged 2026-08-20; in v0.28.1 and
v0.29, not in v0.28.0) plans against the rest: vllm/v1/core/kv_cache_utils.py `get_kv_cache_configs` checks and
auto-fits `max_model_len` against `check_memory = avail_mem − _pool_bytes_per_block(groups)`, i.e. one request may
hold `num_blocks − 1` blocks, while the pool and `get_max_concurrency_for_kv_cache_config` still count all
`num_blocks`. c3's version is major.minor only: 0.28 (and an unknown version) is priced with the reserve, the
costlier side."""


def usable_blocks(blocks: int, version: tuple[int, int] | None) -> int:
    """Blocks one request may hold out of a pool of `blocks`: all of them before vLLM reserved the null block."""
    if version is not None and version < NULL_BLOCK_RESERVED_FROM:
        return blocks
    return max(0, blocks - 1)


def explicit_kv_bytes(knobs: Knobs) -> int | None:
    """vLLM's `--kv-cache-memory-bytes` (per rank): the knob, else the slug's own flag (a plain byte count or vLLM's
    human-readable form, `2G`/`512M`: arg_utils.py `human_readable_int`, decimal units, binary with `i`); None when
    neither sets it or the value cannot be read."""
    if knobs.kv_cache_memory_bytes is not None:
        return knobs.kv_cache_memory_bytes
    text = arg_value(knobs.extra_args, "--kv-cache-memory-bytes", "--kv_cache_memory_bytes")
    if text is None:
        return None
    units = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40}
    number, suffix = text.strip(), ""
    while number and number[-1].isalpha():
        number, suffix = number[:-1], number[-1] + suffix
    try:
        value = float(number) * units[suffix.lower()] if suffix else float(number)
    except (KeyError, ValueError):
        return None
    return int(value) if value > 0 else None


def largest_fitting_len(layout: KvLayout, blocks: int, batched: int, cap: int) -> int:
    """Largest L ≤ cap with D(L) ≤ blocks (0 when not even one token fits); `blocks` are those one request may hold."""
    if blocks <= 0 or layout.blocks_per_request(1, batched) > blocks:
        return 0
    low, high = 1, max(1, cap)
    if layout.blocks_per_request(high, batched) <= blocks:
        return high
    while low < high:
        mid = (low + high + 1) // 2
        if layout.blocks_per_request(mid, batched) <= blocks:
            low = mid
        else:
            high = mid - 1
    return low


def shard_problem(spec: ModelSpec, tp: int) -> str | None:
    """Why the engine cannot split this model's heads over `tp` ranks, or None."""
    if tp <= 1:
        return None
    if spec.num_attention_heads % tp:
        return f"{spec.num_attention_heads} attention heads do not divide over tp {tp}"
    kv = spec.num_kv_heads
    if not spec.kv_lora_rank and kv % tp and tp % kv:
        return f"{kv} KV heads neither divide over tp {tp} nor replicate evenly onto it"
    return None


MARLIN_FORMATS = ("awq", "gptq")
MARLIN_NOTE = (
    "AWQ/GPTQ checkpoint (repacked for Marlin at load unless vLLM's own AWQ kernel runs): the weights term is the checkpoint's "
    "size, and Marlin zero-pads tile-misaligned shapes at load (marlin_utils.py `marlin_padded_nk`), which c3 does not price; "
    "pass --weights-gib (vLLM's `Model loading took`) for a firm verdict"
)
COUNTED_TWICE_NOTE = (
    "vLLM {v}: its profile run's transient can be counted twice — as peak activation and, when a later allocation pins the freed "
    "block's segment, in 'weights + non-torch' (mem_utils.py `total_consumed` from free memory; the split limit that prevents "
    "it came in v0.31): priced at that bound ({gib:.2f} GiB in non-torch), so the KV estimate can come out low"
)
# A cold torch.compile runs inside vLLM's memory profile: the first forward of profile_run is where the AOT compile
# happens (v1/worker/gpu_worker.py:678-693 and compilation/decorators.py:686-702 at v0.32.0), and Inductor
# benchmarks candidate kernels with real buffers, so the compile's peak lands in the activation vLLM measures. The
# only cold/warm pair on record (RTX 4090, Qwen3-8B, v0.27.1: bench/RESULTS.md "a cold torch.compile in the profile")
# differs by 0.99 GiB of activation. Its size is not derivable from the source read so far, so it is a band on the
# verdict, not a term of the estimate: from v0.31 (before that the counted-twice bound covers it) a first boot
# without a compile cache can have up to this much less KV memory than predicted.
COLD_COMPILE_BAND_GIB = 1.0
COLD_COMPILE_FROM = (0, 31)
COLD_COMPILE_NOTE = (
    "vLLM {v} compiles the model inside its memory profile on a first boot (no torch.compile cache yet): one measured cold boot "
    "had {gib:.2f} GiB less KV memory than its warm reboot, so a first boot can come out that much under this estimate"
)
AWQ_CONVERSION_FROM = (0, 19)
AWQ_CONVERSION_PRICED_FROM = (0, 27)
AWQ_CONVERSION_UNKNOWN = (
    "AWQ on Marlin in vLLM {v}: this version converts AWQ with `_convert_awq_to_standard_format` before the Marlin kernel "
    "(awq_marlin.py, v0.19–v0.26), and a public boot of it (A10G, v0.19.1, Qwen2.5-14B-AWQ) left 0.44 GiB of activation + "
    "non-torch that nothing in that source accounts for; c3 cannot price this setup (the figures shown are its estimate "
    "without that gap)"
)


def marlin_repacked(spec: ModelSpec, knobs: Knobs) -> bool:
    """Whether vLLM converts the checkpoint to Marlin's layout at load (awq → awq_marlin, gptq → gptq_marlin)."""
    fmt = (knobs.quant_format or spec.quant_method or "").lower()
    return any(name in fmt for name in MARLIN_FORMATS)


AWQ_GEMM_NOTE = (
    "AWQ runs vLLM's own AWQ GEMM kernel here (forced `--quantization awq`, or a GPU below Marlin's compute "
    "capability 8.0): at 256 tokens or more it dequantizes each weight to fp16 before the matmul, priced in the activation peak"
)
MARLIN_MIN_SM = (8, 0)


def awq_gemm_kernel(spec: ModelSpec, knobs: Knobs, sms: list[tuple[int, int] | None]) -> bool:
    """Whether an AWQ checkpoint runs vLLM's AWQ GEMM kernel rather than awq_marlin: the user forced
    `quantization=awq` (awq_marlin.py `AWQMarlinConfig.override_quantization_method` honours it) or a rank is
    below Marlin's compute capability 8.0 (`check_marlin_supported`; AWQ's own kernel runs from 7.5)."""
    fmt = (knobs.quant_format or spec.quant_method or "").lower()
    if "awq" not in fmt:
        return False
    forced = arg_value(knobs.extra_args, "--quantization", "-q")
    if forced is not None:
        return forced.lower() == "awq"
    return any(sm is not None and sm < MARLIN_MIN_SM for sm in sms)


def price_vllm(spec: ModelSpec, ranks: list[Rank], knobs: Knobs) -> FitReport:
    """Price a vLLM launch of `spec` on `ranks` (len(ranks) == tp × pp)."""
    notes = list(knobs.extra_notes)
    reasons, hw_notes = hardware_problems(ranks, knobs)
    notes += hw_notes
    hybrid, why_not = hybrid_manager_on(spec, knobs)
    if why_not:
        notes.append(why_not)
    # A slug's `--mamba-ssm-cache-dtype float32` doubles a Jamba state that `auto` prices in bf16 (mamba_utils.py).
    ssm_dtype = arg_value(knobs.extra_args, "--mamba-ssm-cache-dtype", "--mamba_ssm_cache_dtype")
    layout = kv_layout(spec, tp=knobs.tp, pp=knobs.pp, kv_cache_dtype=knobs.kv_cache_dtype, block_size=knobs.block_size, hybrid_manager=hybrid,
                       ssm_dtype=ssm_dtype)
    known = [r for r in ranks if r.total_gib is not None]
    smallest = min((r.total_gib or 0.0 for r in known), default=0.0)
    first = known[0] if known else None
    nvml_total = min((r.nvml_total_gib or r.total_gib or 0.0 for r in known), default=0.0)
    seqs_default, batched_default, caveat = default_batching(nvml_total, first.nvml_name if first else None, knobs.version)
    seqs = knobs.max_num_seqs or seqs_default
    batched = knobs.max_num_batched_tokens or batched_default
    if knobs.max_num_seqs is None or knobs.max_num_batched_tokens is None:
        notes.append(f"priced with vLLM's defaults for this GPU class: max_num_seqs {seqs}, max_num_batched_tokens {batched} (pass them explicitly)")
        if caveat:
            notes.append(caveat)
    length = knobs.max_model_len or spec.max_position_embeddings
    base = dict(
        engine="vllm",
        kv_bytes_per_token=layout.bytes_per_token,
        max_model_len=length,
        kv_block_bytes=layout.block_bytes,
        block_size=layout.block_size,
        kv_groups=len(layout.groups),
        kv_padding_layers=layout.padding_layers,
        state_bytes_per_request=layout.state_bytes_per_layer * sum(layout.kinds.get(k, 0) for k in STATE_KINDS),
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        gpu_memory_utilization=knobs.util,
    )
    if reasons:
        return FitReport(verdict="incompatible-hw", reasons=reasons, notes=notes, **base)
    if spec.unpriced:
        return FitReport(verdict="unknown", reasons=[spec.unpriced], notes=notes, **base)
    if (problem := shard_problem(spec, knobs.tp)) is not None:
        return FitReport(verdict="wont-fit", reasons=[f"vLLM cannot shard this model: {problem}"], notes=notes, **base)
    if len(known) < len(ranks):
        missing = ", ".join(str(r.index if r.index is not None else r.card) for r in ranks if r.total_gib is None)
        return FitReport(verdict="unknown", reasons=[f"no usable memory total for GPU {missing}"], notes=notes, **base)
    # vLLM picks the MXFP4 MoE kernel per compute capability; a mixed set is priced at its costliest rank.
    candidates = [w for sm in {r.sm for r in ranks} if (w := stage_weights_gib(spec, knobs, sm=sm)) is not None]
    stage_weights = max(candidates, key=sum) if candidates else None
    if stage_weights is None:
        return FitReport(verdict="unknown", reasons=["weight size unknown"], notes=notes, **base)
    fabric = {r.nvswitch for r in ranks}
    nvswitch = True if True in fabric else (False if fabric == {False} else None)
    priced_version, engine_note = priced_engine_version(knobs.version, [sm_tuple(r.sm) for r in ranks])
    if engine_note:
        notes.append(engine_note)
    # On unified memory the non-torch term carries host allocations c3 cannot price (see the note below), so
    # the costlier V1-runner terms are kept there as margin even where Model Runner V2 profiles leaner.
    unified = any(r.unified for r in ranks)
    quantized = knobs.quantized or spec.quant_method is not None
    sms = [sm_tuple(r.sm) for r in ranks]
    awq_gemm = awq_gemm_kernel(spec, knobs, sms)
    if awq_gemm:
        notes.append(AWQ_GEMM_NOTE)
    over = overheads(spec, tp=knobs.tp, pp=knobs.pp, max_num_batched_tokens=batched, max_num_seqs=seqs, enforce_eager=knobs.enforce_eager,
                     version=priced_version, max_model_len=length, nvswitch=nvswitch, total_gib=smallest, mrv2=False if unified else None,
                     quantized=quantized, awq_gemm=awq_gemm, sms=sms)
    if marlin_repacked(spec, knobs) and knobs.weights_gib is None:
        notes.append(MARLIN_NOTE)
    pinned = 0.0
    if profile_counted_twice(priced_version):
        v = "(version unknown)" if priced_version is None else f"{priced_version[0]}.{priced_version[1]}"
        pinned = over.non_torch_gib - non_torch_gib(tp=knobs.tp, pp=knobs.pp, nvswitch=nvswitch, total_gib=smallest, version=priced_version,
                                                    sms=sms, enforce_eager=knobs.enforce_eager)
        notes.append(COUNTED_TWICE_NOTE.format(v=v, gib=pinned))
    cold_compile = 0.0
    if (priced_version is not None and priced_version >= COLD_COMPILE_FROM and not knobs.enforce_eager
            and knobs.measured_kv_gib is None and explicit_kv_bytes(knobs) is None):
        cold_compile = COLD_COMPILE_BAND_GIB
        notes.append(COLD_COMPILE_NOTE.format(v=f"{priced_version[0]}.{priced_version[1]}", gib=cold_compile))
    unpriced_awq = None
    fmt = (knobs.quant_format or spec.quant_method or "").lower()
    if "awq" in fmt and not awq_gemm and priced_version is not None and AWQ_CONVERSION_FROM <= priced_version < AWQ_CONVERSION_PRICED_FROM:
        unpriced_awq = AWQ_CONVERSION_UNKNOWN.format(v=f"{priced_version[0]}.{priced_version[1]}")
        # A refusal stands (the unexplained memory only lowers the KV pool further); anything else is `unknown`.
        notes.append(unpriced_awq)
    if knobs.tp * knobs.pp > 1 and nvswitch is None:
        kind = "NVSwitch (HGX/SXM)" if assumed_nvswitch(smallest) else "PCIe"
        notes.append(f"interconnect unknown: non-torch memory priced for a {kind} board ({over.non_torch_gib:.2f} GiB per rank)")
    explicit = explicit_kv_bytes(knobs)
    if explicit is not None:
        notes.append(f"KV memory set outright (--kv-cache-memory-bytes {explicit:,} per rank): vLLM skips profiling it and ignores "
                     "gpu_memory_utilization; the weights and overheads must fit beside it on the card")
    gpus: list[GpuFit] = []
    rank_blocks: list[int] = []
    overflow: list[str] = []
    for position, rank in enumerate(ranks):
        assert rank.total_gib is not None
        budget = rank.total_gib * knobs.util
        weights = stage_weights[min(position // max(1, knobs.tp), knobs.pp - 1)]
        available = budget - weights - over.non_torch_gib - over.activation_gib - over.cudagraph_gib
        if explicit is not None:
            # vllm/v1/worker/gpu_worker.py `determine_available_memory` (cpu_worker.py alike) returns the bytes as given.
            # What the engine will hold is then weights + overheads + that KV; the rest of the card is the headroom.
            available = explicit / GIB
            budget = weights + over.non_torch_gib + over.activation_gib + over.cudagraph_gib + available
            if budget > rank.total_gib:
                overflow.append(f"GPU {rank.index if rank.index is not None else position}: --kv-cache-memory-bytes "
                                f"({available:.2f} GiB) plus weights and overheads exceed its {rank.total_gib:.2f} GiB")
        elif knobs.measured_kv_gib is not None:
            available = knobs.measured_kv_gib  # what the engine logged on this rig for this setup (learned.py)
        blocks = layout.num_blocks(explicit if explicit is not None else available * GIB)
        rank_blocks.append(blocks)
        gpus.append(
            GpuFit(
                index=rank.index,
                card=rank.card,
                total_gib=round(rank.total_gib, 3),
                budget_gib=round(budget, 3),
                weights_gib=round(weights, 3),
                activation_gib=round(over.activation_gib, 3),
                non_torch_gib=round(over.non_torch_gib, 3),
                cudagraph_gib=round(over.cudagraph_gib, 3),
                available_kv_gib=round(available, 3),
                kv_blocks=blocks,
            )
        )
        headroom = rank.total_gib - budget
        if rank.unified and position == 0:
            # On unified memory vLLM's profiler counts what else the host allocates while it profiles as
            # non-torch memory: Qwen3-0.6B on a GB10 (vLLM 0.27.1) logged 3.35 GiB "weights + non-torch"
            # for 1.12 GiB of weights, where discrete cards log 0.1-0.3 (bench/data v1-gb10-*); page-cache
            # growth during a cold load lands there too (NVIDIA/xr-ai#462). The term cannot be priced.
            notes.append("unified-memory GPU: vLLM counts host allocations made while it profiles as non-torch memory (2.2 GiB on a GB10 boot against 0.25 priced); the KV budget can come out lower")
        if rank.unified and budget > UNIFIED_FREE_GIB:
            notes.append(f"{rank.card or 'GB10'}: budget {budget:.1f} GiB exceeds the ~{UNIFIED_FREE_GIB:.0f} GiB a unified-memory GB10 usually has free at boot")
        elif not rank.unified and headroom < MIN_HEADROOM_GIB:
            notes.append(f"GPU {rank.index if rank.index is not None else position}: only {headroom:.2f} GiB outside the budget for unprofiled peaks (util {knobs.util})")
    blocks = min(rank_blocks)
    usable = usable_blocks(blocks, priced_version)
    available_min = min(g.available_kv_gib for g in gpus)
    need = layout.blocks_per_request(length, batched)
    concurrency = blocks / need if need else 0.0
    cap = max(spec.max_position_embeddings, length)
    fits_len = largest_fitting_len(layout, usable, batched, cap)
    report = dict(
        base,
        kv_cache_tokens=int(concurrency * length),
        kv_cache_tokens_legacy=blocks // max(1, len(layout.groups)) * layout.block_size,
        max_concurrency=round(concurrency, 2),
        max_model_len_fits=fits_len,
        available_kv_gib=round(available_min, 3),
        kv_blocks=blocks,
        gpus=gpus,
    )
    if length > spec.max_position_embeddings:
        notes.append(f"max_model_len {length:,} exceeds the model's max_position_embeddings {spec.max_position_embeddings:,}: vLLM refuses it without an override")
    if overflow:
        return FitReport(verdict="wont-fit", reasons=overflow, notes=notes, **report)
    if pinned and (available_min <= 0 or usable < need):
        # The double count is a bound: the segment may not get pinned. Refuse only what fails without it.
        unpinned = usable_blocks(min(layout.num_blocks((g.available_kv_gib + pinned) * GIB) for g in gpus), priced_version)
        if available_min + pinned > 0 and unpinned >= need:
            reason = (f"fits only if vLLM does not count its profile transient twice: {available_min:.2f} GiB of KV with it priced, "
                      f"{available_min + pinned:.2f} GiB without (which one happens depends on the allocator)")
            return FitReport(verdict="tight", reasons=[reason], notes=notes, **report)
    if available_min <= 0:
        worst = min(gpus, key=lambda g: g.available_kv_gib)
        where = f"GPU {worst.index}" if worst.index is not None else (worst.card or "a rank")
        return FitReport(
            verdict="wont-fit",
            reasons=[f"{where}: no memory left for the KV cache ({worst.available_kv_gib:.2f} GiB after weights {worst.weights_gib:.2f} GiB and overheads)"],
            notes=notes,
            **report,
        )
    if usable < need:
        held = f"{blocks}" if usable == blocks else f"{blocks}, one of them vLLM's null block"
        return FitReport(
            verdict="wont-fit",
            reasons=[f"one request of {length:,} tokens needs {need} KV blocks; the pool holds {held} (largest context that fits: {fits_len:,})"],
            notes=notes,
            **report,
        )
    if unpriced_awq:
        return FitReport(verdict="unknown", reasons=[unpriced_awq], notes=[n for n in notes if n != unpriced_awq], **report)
    # An explicit KV size is exact: the estimate's error band then lies in the weights and overheads beside it, not in the pool.
    band = TIGHT_MARGIN_GIB + cold_compile
    margin_blocks = usable if explicit is not None else usable_blocks(
        min(layout.num_blocks((g.available_kv_gib - band) * GIB) for g in gpus), priced_version)
    why = " (with a first boot's torch.compile in the profile)" if cold_compile else ""
    tight = [f"within the estimate's error band{why}: {band:g} GiB less KV memory would not hold one {length:,}-token request"] if margin_blocks < need else []
    tight += [n for n in notes if "outside the budget" in n or "unified-memory" in n or n == MARLIN_NOTE]
    if tight:
        return FitReport(verdict="tight", reasons=tight, notes=[n for n in notes if n not in tight], **report)
    return FitReport(verdict="fits", notes=notes, **report)


def sleeping_gib(rank: GpuFit) -> float:
    """What a vLLM rank still holds on its GPU at sleep level 1 (the gateway's "sleep instead of stop").

    Level 1 moves the weights to CPU RAM and drops the KV cache (both live in vLLM's sleep-mode memory pool,
    tags `weights` and `kv_cache`) and empties torch's cache, so the activation peak goes too. What stays, in
    this fit's own terms: the CUDA context (`CUDA_CONTEXT_GIB`, the term the llama.cpp fit prices it with: vLLM's
    profiler never logs it), the non-torch memory (`non_torch_gib`: cuBLAS/NCCL workspaces, allocated outside
    the pool) and the CUDA-graph pool (`cudagraph_gib`: graphs are captured outside the pool and kept, so they
    can be replayed after waking). Priced, never measured: the CPU build that runs here frees nothing.
    """
    return CUDA_CONTEXT_GIB + rank.non_torch_gib + rank.cudagraph_gib
