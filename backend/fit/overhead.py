"""The non-KV terms of vLLM's budget: activation peak, non-torch memory, CUDA-graph pool.

vLLM measures these at boot (research-fitcheck.md §1.1); c3 has to predict them before boot, so
this is the one estimated part of the fit-check. The model is explicit and deliberately a little
pessimistic: underestimating them makes the prediction optimistic, which is the failure that matters.

Activation peak (`torch peak memory increase` of the profile run). The profile run does one
forward pass over `B = max_num_batched_tokens` tokens, then a dummy sampler pass over
`S = max_num_seqs` rows of `V = vocab` logits. The peak is the larger of the two:
- forward: `B × 2 B × (4·hidden + 3·I_rank)` where `I_rank` is the dense MLP width / TP, or for MoE
  `top_k × 3 × expert_width / TP` (the fused-MoE intermediate caches) — the residual stream, the
  gate/up output and the activation;
- sampler: `S × V × 26 B`: the logits in the model dtype (2), their fp32 copy (4), the sort for
  top-k/top-p (values 4 + int64 indices 8), softmax and cumsum (4 + 4);
plus a 0.15 GiB floor (attention metadata, torch.compile scratch). At the 24 GB-card defaults
(B = 2048, S = 256) this gives 0.6–1.0 GiB; at the ≥ 70 GiB defaults (8192, 1024) 2–4.5 GiB for
150–200 K vocabularies, inside the 2–7.5 GiB total non-KV overhead measured on an H100 (§1.5).

Non-torch memory (`non-torch forward increase`): cuBLAS/attention workspaces and, with TP > 1, NCCL
and custom all-reduce buffers: 0.25 GiB at TP = 1, 0.75 GiB at TP ≥ 2 (the §1.5 H100 data show about
0.1–0.2 and 0.5; rounded up).

CUDA graphs (budgeted from v0.21; earlier versions carve graph memory after the KV pool, so the term
is 0 there and the physical headroom check covers it): `0.2 GiB + 0.012 GiB × layers_on_rank`, ×1.5
for MoE (more kernels per layer); 0 with `--enforce-eager`. The published estimates are 0.1–2 GiB on a
single card (0.58 GiB estimated for a 3090 in one report).

Calibration: `bench/fit_accuracy.py` replays every public boot log collected in
`bench/data/bootlogs.yaml` and prints predicted vs logged available KV memory; the constants above
were set so that no point is optimistic by more than 1 GiB (see that script's output in the docs).
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.models import ModelSpec

GIB = 1024**3
ACTIVATION_FLOOR_GIB = 0.15
SAMPLER_BYTES_PER_LOGIT = 26
NON_TORCH_TP1_GIB = 0.25
NON_TORCH_TP_GIB = 0.75
GRAPH_BASE_GIB = 0.2
GRAPH_PER_LAYER_GIB = 0.012
GRAPH_MOE_FACTOR = 1.5
CUDAGRAPH_BUDGETED_FROM = (0, 21)


@dataclass(frozen=True)
class Overheads:
    """The three non-KV terms of one rank, GiB."""

    activation_gib: float
    non_torch_gib: float
    cudagraph_gib: float


def _mlp_width_rank(spec: ModelSpec, tp: int) -> float:
    if spec.num_experts:
        width = spec.moe_intermediate_size or spec.intermediate_size or spec.hidden_size
        return (spec.num_experts_per_tok or 1) * 3 * width / tp
    return 3 * (spec.intermediate_size or 4 * spec.hidden_size) / tp


def activation_gib(spec: ModelSpec, *, tp: int, max_num_batched_tokens: int, max_num_seqs: int) -> float:
    """Predicted torch activation peak of vLLM's profile run on one rank."""
    forward = max_num_batched_tokens * 2 * (4 * spec.hidden_size + _mlp_width_rank(spec, tp))
    sampler = min(max_num_seqs, max_num_batched_tokens) * spec.vocab_size * SAMPLER_BYTES_PER_LOGIT
    return ACTIVATION_FLOOR_GIB + max(forward, sampler) / GIB


def non_torch_gib(*, tp: int, pp: int) -> float:
    """Non-torch memory growth (NCCL, custom all-reduce, workspaces) on one rank."""
    return NON_TORCH_TP1_GIB if tp * pp == 1 else NON_TORCH_TP_GIB


def cudagraph_gib(spec: ModelSpec, *, pp: int, enforce_eager: bool, version: tuple[int, int] | None) -> float:
    """CUDA-graph memory vLLM subtracts from the KV budget (0 before v0.21 or when eager)."""
    if enforce_eager:
        return 0.0
    if version is not None and version < CUDAGRAPH_BUDGETED_FROM:
        return 0.0
    layers = -(-spec.num_layers // max(1, pp))
    graph = GRAPH_BASE_GIB + GRAPH_PER_LAYER_GIB * layers
    return graph * (GRAPH_MOE_FACTOR if spec.num_experts else 1.0)


def overheads(
    spec: ModelSpec,
    *,
    tp: int,
    pp: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    enforce_eager: bool = False,
    version: tuple[int, int] | None = None,
) -> Overheads:
    """All three terms for one rank."""
    return Overheads(
        activation_gib=activation_gib(spec, tp=tp, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs),
        non_torch_gib=non_torch_gib(tp=tp, pp=pp),
        cudagraph_gib=cudagraph_gib(spec, pp=pp, enforce_eager=enforce_eager, version=version),
    )
