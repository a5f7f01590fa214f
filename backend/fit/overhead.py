"""The non-KV terms of vLLM's budget: activation peak, non-torch memory, CUDA-graph pool.

vLLM measures these at boot (research-fitcheck.md §1.1); c3 has to predict them before boot, so
this is the one estimated part of the fit-check. The model is explicit and deliberately a little
pessimistic: underestimating them makes the prediction optimistic, which is the failure that matters.

Activation peak (`torch peak memory increase` of the profile run). The V1 profile run does one
forward pass over `B = max_num_batched_tokens` tokens, then a dummy sampler pass over
`S = max_num_seqs` rows of `V = vocab` logits. The peak is the larger of the two:
- forward: the residual stream and norms `B × 4·hidden × 2 B`, plus the MLP transient: dense
  `B × 3·I/TP × 2 B`; MoE the fused-MoE caches `B × top_k × (3·I_expert/TP + hidden) × 2 B`;
- sampler: `S × V × b` bytes, the same at every TP size (vllm/v1/worker/gpu_model_runner.py
  `_dummy_sampler_run` samples the gathered, full-vocabulary logits on every rank): the logits,
  their fp32 copy, the top-k/top-p sort, softmax/cumsum, the scatter back. `b` is 38 B/logit up
  to v0.16 (gpt-oss-120b on H100, vllm#23278/#27508; Qwen3-14B on H100 v0.15/v0.16: 5.64 GiB at
  S = 1024, V = 151,936) and 15 B/logit from v0.17 (the same Qwen3-14B: 2.23 GiB on v0.17/v0.18;
  Llama-3.1-8B on v0.19: 1.89 GiB, i.e. 14.2 B + the floor; +5 % margin) — llm-d-planner
  accuracy/results version-sweep and v0.19.0 runs; an unknown version is priced at 38 B;
- Gated-DeltaNet hybrids add the chunked-prefill scratch of the linear layers,
  `B × (2·kh·kd + 2·vh·vd)/TP × 8 B` (a 2× RTX 5090 log of a 27B GDN hybrid shows 1.59 GiB of peak
  activation at B = 8192 where the dense terms alone give 0.7: club-3090#1087);
- multimodal checkpoints (vision tower loaded): the encoder profile run, taken as 0.5 GiB inside the
  max(), plus the encoder cache of 16,384 tokens × hidden × 2 B held through the profile;
- MoE from v0.12: the fused-MoE scratch is no longer freed after the forward pass. The modular kernel
  takes it from the process-wide `WorkspaceManager` (vllm/v1/worker/workspace.py: one buffer that only
  grows and lives as long as the worker; `modular_kernel.py` `_allocate_buffers` →
  `current_workspace_manager().get_simultaneous(...)`, introduced by vllm#27532, merged Dec 2025), so
  it is still held while the sampler runs: `B × top_k × (max(2·I/TP, hidden) + I/TP) × 2 B` on top of
  the sampler term (Qwen3-30B-A3B at B = 8192: 0.34 GiB; DeepSeek-V2-Lite: 0.39 GiB). An unknown
  version is priced with it (the safe side);
plus a 0.15 GiB floor (attention metadata, torch.compile scratch). At the 24 GB-card defaults
(S = 256) the sampler term is 1.2–1.9 GiB for 128–200 K vocabularies.

Legacy V0 (< v0.8, and v0.8–v0.9 on GPUs below compute capability 8.0, which V1 refused:
vllm/engine/arg_utils.py `_is_v1_supported_oracle` → `_raise_or_fallback(feature_name="Compute
Capability < 8.0")`, so a V100 on v0.8.5 still runs V0): no chunked prefill up to 32 K context, so the
forward pass covers `B = max_model_len` tokens (the activation grew with max_model_len: vllm#10517);
beyond 32 K V0 turned chunked prefill on with small batches (B = 512). The sampler term is the same
38 B/logit as early V1: V0's `profile_run` (vllm/worker/model_runner.py) samples all `max_num_seqs`
dummy rows with `SamplingParams(top_p=0.99, top_k=vocab_size - 1)`, so `_apply_top_k_top_p`
(vllm/model_executor/layers/sampler.py) sorts the full fp32 vocabulary (values + int64 indices,
softmax, cumsum, masks) — the code V1's first sampler was ported from. (c3 priced V0 at 6 B/logit
before; calibration row llama3-8b-h100-v0-tp1 logs 1.26 GiB where 6 B gave 1.06, 38 B gives 1.31.)

Model Runner V2 (dense text models from v0.27; vllm/v1/worker/gpu/model_runner.py): `profile_run` runs
`_dummy_run(max_num_batched_tokens)` over `min(B, max_num_seqs)` dummy requests and then
`_dummy_sampler_run`, whose sampler skips top-k/top-p/logprobs during profiling ("NOTE(woosuk): During
the initial memory profiling, the sampler may skip top_k, top_p, and logprobs"): only the logits are held,
`S × V × 2 B`. Its `profile_cudagraph_memory` returns 0, so the graph pool is not taken out of the KV
budget (it comes out of the headroom outside it). A v0.27.1 RTX 4090 boot logs GPUModelRunnerV2 in its
traceback, 0.08 GiB of activation and KV = budget − consumed − activation (bench/data v1-4090-wsl-*).
Dense multimodal checkpoints take it too (v0.27/v0.28 `_is_default_v2_model_runner_model` has no multimodal test;
MRv2's profile_run profiles the encoder, keeps its outputs in the encoder cache, then runs the dummy forward and
the lean sampler), so the encoder terms below stay and the full-vocabulary sort goes. MoE and hybrid (Mamba/GDN)
models keep the V1-runner terms: MRv2 became the default for dense models first (vllm#44443), and the costlier
terms are the safe side where c3 has not re-derived the MRv2 profile.

Non-torch memory (`non-torch forward increase`): cuBLAS/attention workspaces and, with TP > 1, NCCL
and custom all-reduce buffers. It moved with vLLM's profiler, so it is priced per version and fabric:
- TP = 1 (and pipeline-only sets, whose stages only send activations: 0.07 logged at PP 2/4):
  0.15 GiB up to v0.17 (0.13 logged on H100 up to v0.17, llm-d-planner version sweep), 0.25 from
  v0.18 (0.24–0.27 logged on v0.18/v0.19); on V0 0.35 on consumer cards (vllm#10517) but 1.8 on
  HGX boards (1.79 for Llama-3-8B on H100, vllm#10511).
- TP > 1 on NVSwitch boards (HGX A100/H100/H200/B200): what lands in the increase depends on when vLLM takes
  its baseline snapshot and on one compilation pass (read from each release's source, PyPI wheels 0.9.2-0.19.0):
  - v0.8-v0.10: `Worker.init_device` (vllm/v1/worker/gpu_worker.py) takes `MemorySnapshot()` before
    `init_worker_distributed_environment`, so every communicator's NCCL (NVLS) and custom all-reduce buffers
    are in the increase: 2.2 GiB (2.04 at TP 4 on H200 v0.9.2, vllm#21429) — for pipeline stages too.
  - from v0.11 the snapshot follows it ("Initialize the distributed environment BEFORE taking memory
    snapshot"), so those buffers sit outside the budget: 0.6 GiB (0.55 at TP 2 on H100, llm-d-benchmark;
    that log's free memory at start-up is 77.64 GiB against 78.57 at TP 1 — the buffers, taken before).
  - from v0.17 optimization level O2, the default, turns on `fuse_allreduce_rms` for TP > 1 on compute
    capability 9.0 / 10.x with FlashInfer (vllm/config/vllm.py `enable_allreduce_rms_fusion`); the pass
    creates FlashInfer's all-reduce workspace while the profile run compiles
    (vllm/compilation/passes/fusion/allreduce_rms_fusion.py), after the snapshot: 2.2 GiB again (2.06-2.21
    at TP 2/4 on H100 v0.19, llm-d-planner). `--enforce-eager` sets the compilation mode to NONE (no pass).
  An unknown version or compute capability takes the costlier branch. 3.6 GiB on V0 (3.58 at TP 2 on H100,
  vllm#10511).
- TP > 1 on PCIe cards: 0.75 GiB (2× RTX 5090, TP 2, v0.26: "15.03 GiB for consumed memory (weights +
  non-torch)" in club-3090#1087 with 14.28 GiB of weights per GPU for the same checkpoint in
  vllm-project/recipes#810 leaves 0.75; V0 on 2× RTX 4090 logged 0.25, vllm#13061).
A TP set whose fabric is unknown is priced as NVSwitch when its cards hold ≥ 38 GiB (an SXM
A100-40GB is the smallest such board), else as PCIe — except CUDA totals of 42–48 GiB, which only
PCIe/workstation cards have (shared/data/cards.csv: L40S 44.52, A40/L40 44.3–44.4, RTX A6000 44.55
with ECC, RTX 6000 Ada ~47.5; the SXM boards sit at 39.4 and ≥ 79). The same guess picks V0's TP = 1
term (a 44.39 GiB card logged 0.08 GiB, where the HGX value would be 1.8).

Profile transient counted twice (v0.27.0–v0.30.x): from v0.27.0 "consumed memory (weights + non-torch)" is the
drop in device free memory across load and profile run (vllm/utils/mem_utils.py:317 at v0.28.0, `total_consumed =
before_create.free_memory − after_profile.free_memory`, after `empty_cache()`), while the peak activation is the
allocated peak above what stays allocated (mem_utils.py:323). A freed profile-run block that a later small
allocation pins keeps its whole allocator segment reserved, so it is counted in both; v0.28.0 limits block splitting
(`max_split_size_mb:20`) around `load_model` only (gpu_worker.py:455), and v0.31.0 adds the limit around the profile
run (gpu_worker.py:613–624, whose comment describes this double count). Up to v0.26 the sum was
`non_torch_increase + torch_peak_increase + weights` (mem_utils.py:311 at v0.26.0), where a pinned segment is
torch-reserved memory and counted nowhere. Whether a segment gets pinned depends on allocation order, so c3 prices
the bound: the activation transient once more in the non-torch term (RTX 5090, v0.28.0: Qwen3-32B-AWQ logged 0.33
GiB activation and weights + 0.43 consumed at util 0.70, 1.46 and weights + 1.85 at 0.85: bench/data v1-5090-*).
An unknown version is priced with it (the costlier side).

CUDA graphs (budgeted from v0.21; earlier versions carve graph memory after the KV pool, so the term
is 0 there and the physical headroom check covers it): `0.2 GiB + 0.012 GiB × layers_on_rank`, ×1.5
for MoE, ×2 more for Gated-DeltaNet hybrids (since v0.26 the estimate includes a GDN profiling
transient that grows with max_num_batched_tokens: vllm#50780); 0 with `--enforce-eager`. Published estimates: 0.09–0.17 GiB on 3090/5090 TP sets
(club-3090#127, #1087), 0.36 GiB on L40S TP=2 (gpustack/runner#251), 1.3 GiB on an H100 MoE
(vllm#50722); the formula stays at or above them for the same layer counts.

Calibration: the constants above were fitted on `bench/data/bootlogs-calibration.yaml` only (each
row names what it fitted); `bench/data/bootlogs-validation.yaml` holds out-of-sample boot logs no
constant was fitted to, and `bench/fit_accuracy.py` reports the two splits apart (bench/RESULTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.models import ModelSpec

GIB = 1024**3
ACTIVATION_FLOOR_GIB = 0.15
SAMPLER_BYTES_PER_LOGIT = 38
SAMPLER_V017_BYTES_PER_LOGIT = 15
SMALL_SAMPLER_FROM = (0, 17)
V0_SAMPLER_BYTES_PER_LOGIT = 38
V1_FROM = (0, 8)
V0_CHUNKED_PREFILL_ABOVE = 32768
"""V0 turned chunked prefill on (small batches) above this max_model_len: its activation peak drops there."""
V1_ON_PRE_AMPERE_FROM = (0, 10)
GDN_PREFILL_BYTES = 8
MOE_WORKSPACE_PERSISTS_FROM = (0, 12)
ENCODER_PEAK_GIB = 0.5
ENCODER_CACHE_TOKENS = 16384
NON_TORCH_TP1_GIB = 0.25
NON_TORCH_TP1_OLD_GIB = 0.15
NON_TORCH_TP1_GREW_FROM = (0, 18)
NON_TORCH_V0_TP1_GIB = 0.35
NON_TORCH_V0_HGX_TP1_GIB = 1.8
NON_TORCH_PCIE_TP_GIB = 0.75
NON_TORCH_NVSWITCH_TP_GIB = 2.2
NON_TORCH_NVSWITCH_AFTER_NCCL_GIB = 0.6
# vllm/v1/worker/gpu_worker.py `init_device`: the baseline snapshot follows the distributed init from v0.11
NCCL_BEFORE_SNAPSHOT_FROM = (0, 11)
# vllm/config/vllm.py OPTIMIZATION_LEVEL_02 `"fuse_allreduce_rms": enable_allreduce_rms_fusion` from v0.17
AR_FUSION_DEFAULT_FROM = (0, 17)
NON_TORCH_NVSWITCH_V0_GIB = 3.6
NVSWITCH_ASSUMED_FROM_GIB = 38.0
PCIE_ONLY_GIB = (42.0, 48.0)
GRAPH_BASE_GIB = 0.2
GRAPH_PER_LAYER_GIB = 0.012
GRAPH_MOE_FACTOR = 1.5
GRAPH_GDN_FACTOR = 2.0
CUDAGRAPH_BUDGETED_FROM = (0, 21)
# awq.py `AWQLinearMethod.apply`: `FP16_MATMUL_HEURISTIC_CONDITION = x.shape[:-1].numel() >= 256`
AWQ_DEQUANT_FROM_TOKENS = 256
MRV2_DENSE_FROM = (0, 27)
MRV2_LOGIT_BYTES = 2
PROFILE_COUNTED_TWICE_FROM = (0, 27)
PROFILE_COUNTED_TWICE_FIXED_IN = (0, 31)


def priced_engine_version(version: tuple[int, int] | None, sms: list[tuple[int, int] | None]) -> tuple[tuple[int, int] | None, str | None]:
    """The version whose profiler the pricing follows: v0.8–v0.9 fall back to the V0 engine on a GPU
    below compute capability 8.0 (arg_utils.py `_is_v1_supported_oracle`); from v0.10 V1 serves them
    (a T4 log on v0.10.2 shows the V1 FlexAttention backend). Returns (version to price, note)."""
    if version is None or not (V1_FROM <= version < V1_ON_PRE_AMPERE_FROM):
        return version, None
    if any(sm is not None and sm < (8, 0) for sm in sms):
        return (0, 7), f"vLLM {version[0]}.{version[1]} runs its V0 engine on compute capability < 8.0: priced with V0's profiler"
    return version, None


@dataclass(frozen=True)
class Overheads:
    """The three non-KV terms of one rank, GiB."""

    activation_gib: float
    non_torch_gib: float
    cudagraph_gib: float


def _transient_width(spec: ModelSpec, tp: int) -> float:
    """Elements per token of the largest MLP transient on one rank."""
    if spec.num_experts:
        width = spec.moe_intermediate_size or spec.intermediate_size or spec.hidden_size
        return (spec.num_experts_per_tok or 1) * (3 * width / tp + spec.hidden_size)
    return 3 * (spec.intermediate_size or 4 * spec.hidden_size) / tp


def moe_workspace_bytes(spec: ModelSpec, *, tp: int, tokens: int) -> int:
    """The fused-MoE workspace the `WorkspaceManager` keeps after the profile forward (one rank):
    `TritonExperts.workspace_shapes` — workspace13 `(M, top_k, max(N, K))` shared with the output,
    workspace2 `(M, top_k, N // 2)` — with `N = 2·I/TP`, `K = hidden`, `M = tokens`, 2 B each."""
    if not spec.num_experts:
        return 0
    width = (spec.moe_intermediate_size or spec.intermediate_size or spec.hidden_size) // tp
    return tokens * (spec.num_experts_per_tok or 1) * (max(2 * width, spec.hidden_size) + width) * 2


def awq_dequant_bytes(spec: ModelSpec, *, tp: int, tokens: int) -> int:
    """The fp16 weight vLLM's AWQ GEMM kernel materialises during the profile forward (one rank).

    vllm/model_executor/layers/quantization/awq.py `AWQLinearMethod.apply`: at `x.shape[:-1].numel() >= 256`
    tokens it runs `ops.awq_dequantize` on the whole weight and then `torch.matmul`, so the peak holds the
    largest dequantized linear of the rank on top of the activations (Marlin multiplies the packed weight in
    place). Dense models only: AWQ MoE layers run fused Marlin MoE."""
    if spec.num_experts or tokens < AWQ_DEQUANT_FROM_TOKENS:
        return 0
    inter = spec.intermediate_size or 4 * spec.hidden_size
    qkv = (spec.num_attention_heads + 2 * spec.num_kv_heads) * spec.head_dim
    # the widest is the merged gate_up or qkv projection (column-parallel: its output shards over TP); down and
    # o_proj are never wider
    widest = max(2 * inter, qkv) // tp
    return spec.hidden_size * widest * 2


def model_runner_v2(spec: ModelSpec, version: tuple[int, int] | None, *, quantized: bool = False) -> bool | None:
    """Which profile vLLM runs: True Model Runner V2's lean one (dense text models from v0.27), False the V1
    runner's, None when c3 cannot tell (a quantized dense model: the terms of the costliest known profile apply)."""
    if version is None or version < MRV2_DENSE_FROM:
        return False
    hybrid = bool(spec.mamba_version) or bool(spec.layer_types and any(t not in ("full_attention", "sliding_attention", "chunked_attention") for t in spec.layer_types))
    # vllm/config/vllm.py `_is_default_v2_model_runner_model` (v0.27.0, v0.28.0): `is_default_v2_architecture or not
    # model_config.is_moe`, hybrids and attention-free models excepted — no multimodal test, so a dense vision checkpoint
    # runs MRv2 too (its profile_run runs the encoder profile, then the lean sampler). From v0.29 every model class
    # defaults to MRv2; MoE and hybrids keep the V1-runner terms here all the same (the costlier side, not re-derived).
    if spec.num_experts or hybrid:
        return False
    if spec.has_vision and quantized:
        return False  # as before this rule: no quantized vision boot seen, so its V1-runner pricing is not moved
    # MRv2's oracle went model class by model class (its first cut keyed on `is_quantized`, vllm#42665), and the
    # RTX 5090 boots of Qwen3-14B/32B-AWQ on v0.28.0 log 1.46 GiB of activation for both: a full-vocabulary sampler,
    # not MRv2's logits-only profile (bench/data v1-5090-*).
    return None if quantized else True


def activation_gib(
    spec: ModelSpec,
    *,
    tp: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    version: tuple[int, int] | None = None,
    max_model_len: int | None = None,
    mrv2: bool | None = None,
    quantized: bool = False,
    awq_gemm: bool = False,
) -> float:
    """Predicted torch activation peak of vLLM's profile run on one rank (`mrv2`: force the runner; None = by
    model, version and `quantized`; `awq_gemm`: AWQ runs vLLM's own GEMM kernel, not Marlin)."""
    tokens = max_num_batched_tokens
    # Every TP rank samples the full (gathered) vocabulary: the dummy sampler run is the same at any TP.
    # An unknown version is priced with the older, larger warm-up (the safe side).
    per_logit = SAMPLER_V017_BYTES_PER_LOGIT if version is not None and version >= SMALL_SAMPLER_FROM else SAMPLER_BYTES_PER_LOGIT
    width_tp = tp
    if version is not None and version < V1_FROM:
        length = max_model_len or tokens
        tokens = length if length <= V0_CHUNKED_PREFILL_ABOVE else 512
        per_logit = V0_SAMPLER_BYTES_PER_LOGIT
        # V0's peak did not shrink with TP (1.26 GiB at TP 1 and TP 2 for Llama-3-8B, vllm#10511).
        width_tp = 1
    forward = tokens * 2 * (4 * spec.hidden_size + _transient_width(spec, width_tp))
    if spec.layer_types and "linear_attention" in spec.layer_types:
        kh, vh = spec.linear_num_key_heads or 0, spec.linear_num_value_heads or 0
        kd, vd = spec.linear_key_head_dim or 0, spec.linear_value_head_dim or 0
        forward += tokens * (2 * kh * kd + 2 * vh * vd) / tp * GDN_PREFILL_BYTES
    if awq_gemm:
        forward += awq_dequant_bytes(spec, tp=tp, tokens=tokens)
    runner = model_runner_v2(spec, version, quantized=quantized) if mrv2 is None else mrv2
    if runner:
        per_logit = MRV2_LOGIT_BYTES  # the profiling sampler skips top-k/top-p: only the logits are held
    elif runner is None:
        per_logit = SAMPLER_BYTES_PER_LOGIT  # either runner: the full-vocabulary sort, the costliest known profile
    sampler = min(max_num_seqs, tokens) * spec.vocab_size * per_logit
    if version is None or version >= MOE_WORKSPACE_PERSISTS_FROM:
        sampler += moe_workspace_bytes(spec, tp=tp, tokens=tokens)
    peak = max(forward, sampler, ENCODER_PEAK_GIB * GIB if spec.has_vision else 0.0)
    encoder_cache = ENCODER_CACHE_TOKENS * spec.hidden_size * 2 if spec.has_vision else 0
    return ACTIVATION_FLOOR_GIB + (peak + encoder_cache) / GIB


def profile_counted_twice(version: tuple[int, int] | None) -> bool:
    """Whether vLLM's profiler can count the profile run's transient both as peak activation and as consumed
    memory (v0.27.0–v0.30.x; an unknown version is priced as if it could: the costlier side)."""
    return version is None or PROFILE_COUNTED_TWICE_FROM <= version < PROFILE_COUNTED_TWICE_FIXED_IN


def assumed_nvswitch(total_gib: float) -> bool:
    """The board guess for a card whose profile is unknown: NVSwitch from 38 GiB, but never in the
    42–48 GiB band no SXM board occupies."""
    return total_gib >= NVSWITCH_ASSUMED_FROM_GIB and not (PCIE_ONLY_GIB[0] <= total_gib < PCIE_ONLY_GIB[1])


def allreduce_fusion_workspace(*, tp: int, version: tuple[int, int] | None, sms: list[tuple[int, int] | None] | None = None,
                                enforce_eager: bool = False) -> bool:
    """Whether vLLM's default `fuse_allreduce_rms` pass builds FlashInfer's all-reduce workspace during the profile run
    (vllm/config/vllm.py `enable_allreduce_rms_fusion`: TP > 1 on compute capability 9.0 or 10.x, from v0.17; an
    unknown version or capability counts as yes, the costlier side)."""
    if tp <= 1 or enforce_eager:
        return False
    if version is not None and version < AR_FUSION_DEFAULT_FROM:
        return False
    known = [sm for sm in (sms or [None]) if sm is not None]
    return len(known) < len(sms or [None]) or any(sm == (9, 0) or sm[0] == 10 for sm in known)


def non_torch_gib(*, tp: int, pp: int, nvswitch: bool | None = None, total_gib: float = 0.0, version: tuple[int, int] | None = None,
                  sms: list[tuple[int, int] | None] | None = None, enforce_eager: bool = False) -> float:
    """Non-torch memory growth (NCCL, custom all-reduce, workspaces) on one rank, without the pinned profile
    transient (`overheads` adds that where the version can count it twice)."""
    if nvswitch is None:
        nvswitch = assumed_nvswitch(total_gib)
    v0 = version is not None and version < V1_FROM
    # v0.8-v0.10 snapshot before any communicator exists, so a pipeline group's NCCL buffers count as well
    nccl_counted = not v0 and (version is None or version < NCCL_BEFORE_SNAPSHOT_FROM)
    if tp == 1:
        if v0:
            return NON_TORCH_V0_HGX_TP1_GIB if nvswitch else NON_TORCH_V0_TP1_GIB
        if pp > 1 and nvswitch and nccl_counted:
            return NON_TORCH_NVSWITCH_TP_GIB
        return NON_TORCH_TP1_OLD_GIB if version is not None and version < NON_TORCH_TP1_GREW_FROM else NON_TORCH_TP1_GIB
    if v0:
        return NON_TORCH_NVSWITCH_V0_GIB if nvswitch else NON_TORCH_PCIE_TP_GIB
    fusion = allreduce_fusion_workspace(tp=tp, version=version, sms=sms, enforce_eager=enforce_eager)
    if nvswitch:
        return NON_TORCH_NVSWITCH_TP_GIB if nccl_counted or fusion else NON_TORCH_NVSWITCH_AFTER_NCCL_GIB
    # A PCIe board: consumer and workstation cards (8.x, 12.x) never take the pass; a PCIe H100/B200 pair may build the
    # workspace over P2P (FlashInfer only gives up without multicast on some backends), so a known 9.0/10.x prices it.
    hopper_or_blackwell = any(sm is not None and (sm == (9, 0) or sm[0] == 10) for sm in (sms or []))
    return NON_TORCH_NVSWITCH_TP_GIB if fusion and hopper_or_blackwell else NON_TORCH_PCIE_TP_GIB


def cudagraph_gib(
    spec: ModelSpec, *, pp: int, enforce_eager: bool, version: tuple[int, int] | None, mrv2: bool | None = None, quantized: bool = False
) -> float:
    """CUDA-graph memory vLLM subtracts from the KV budget (0 before v0.21 or when eager)."""
    if enforce_eager:
        return 0.0
    if version is not None and version < CUDAGRAPH_BUDGETED_FROM:
        return 0.0
    if model_runner_v2(spec, version, quantized=quantized) if mrv2 is None else mrv2:
        return 0.0  # MRv2's profile_cudagraph_memory() returns 0: the pool is not in the KV budget
    layers = -(-spec.num_layers // max(1, pp))
    graph = GRAPH_BASE_GIB + GRAPH_PER_LAYER_GIB * layers
    graph *= GRAPH_MOE_FACTOR if spec.num_experts else 1.0
    if spec.layer_types and "linear_attention" in spec.layer_types:
        # v0.26+ charges a profiling transient of the GDN kernels to the graph estimate (vllm#50780).
        graph *= GRAPH_GDN_FACTOR
    return graph


def overheads(
    spec: ModelSpec,
    *,
    tp: int,
    pp: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    enforce_eager: bool = False,
    version: tuple[int, int] | None = None,
    max_model_len: int | None = None,
    nvswitch: bool | None = None,
    total_gib: float = 0.0,
    mrv2: bool | None = None,
    quantized: bool = False,
    awq_gemm: bool = False,
    sms: list[tuple[int, int] | None] | None = None,
) -> Overheads:
    """All three terms for one rank; on versions that can count the profile transient twice the non-torch term
    carries it once more (`mrv2` forced for margin, e.g. on unified memory, does not inflate that second copy:
    it is the transient of the runner vLLM picks by rule)."""
    def activation(runner: bool | None) -> float:
        return activation_gib(
            spec, tp=tp, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs, version=version, max_model_len=max_model_len,
            mrv2=runner, quantized=quantized, awq_gemm=awq_gemm,
        )

    peak = activation(mrv2)
    non_torch = non_torch_gib(tp=tp, pp=pp, nvswitch=nvswitch, total_gib=total_gib, version=version, sms=sms, enforce_eager=enforce_eager)
    if profile_counted_twice(version):
        non_torch += peak if mrv2 is None else activation(None)
    return Overheads(
        activation_gib=peak,
        non_torch_gib=non_torch,
        cudagraph_gib=cudagraph_gib(spec, pp=pp, enforce_eager=enforce_eager, version=version, mrv2=mrv2, quantized=quantized),
    )
