"""The fit-check's answer: a verdict and the per-rank memory breakdown behind it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, computed_field, model_serializer

FitVerdict = Literal["fits", "tight", "wont-fit", "incompatible-hw", "unknown"]


class GpuFit(BaseModel):
    """The memory plan of one rank (one GPU), in GiB. JSON field names are a stable contract."""

    model_config = ConfigDict(frozen=True)

    index: int | None = None
    """Host GPU index, when the fit was for real GPUs."""
    card: str | None = None
    """Card profile id, or a description of an unprofiled card."""
    total_gib: float
    """CUDA-visible total."""
    budget_gib: float
    """total × gpu_memory_utilization (vLLM) or the engine's own cap."""
    weights_gib: float
    """Weights this rank loads."""
    activation_gib: float
    """Activation peak of the profile run."""
    non_torch_gib: float
    """NCCL, cuBLAS workspaces, CUDA context."""
    cudagraph_gib: float
    """CUDA-graph pool estimate."""
    available_kv_gib: float
    """What is left for the KV cache on this rank (may be negative)."""
    kv_blocks: int | None = None
    """KV blocks this rank's budget holds, before the min over ranks."""


class LearnedMark(BaseModel):
    """How a fit used this rig's own boots (backend/fit/learned.py); `learned` in `c3 fit --json`."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    boots: int
    """Boots of this setup on record that were believed."""
    last: str
    """Date (UTC, YYYY-MM-DD) of the latest."""
    off_by_gib: float | None = None
    """The latest boot's KV memory minus what c3 had predicted for it (+: c3 was pessimistic); None when not both known."""
    flagged: bool = False
    """That boot landed more than `OFF_LIMIT_GIB` (0.5 GiB) from the prediction."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def summary(self) -> str:
        """`learned from N boots on DATE`: derived from `boots` and `last`, so it cannot disagree with them."""
        return f"learned from {self.boots} boot{'s' if self.boots != 1 else ''} on {self.last}"

    @model_serializer(mode="wrap")
    def _summary_third(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # `c3 fit --json` lists boots, last, summary, off_by_gib, flagged (docs/DESIGN.md); pydantic puts a computed field last.
        data = handler(self)
        head = {key: data[key] for key in ("boots", "last", "summary") if key in data}
        return {**head, **{key: value for key, value in data.items() if key not in head}}


FitSource = Literal["predicted", "learned"]


class FitReport(BaseModel):
    """Whether a model fits a GPU set, and why. `c3 fit --json` prints this."""

    model_config = ConfigDict(frozen=True)

    verdict: FitVerdict
    """fits | tight | wont-fit | incompatible-hw | unknown."""
    engine: str = "vllm"
    """Engine whose rules priced it."""
    kv_bytes_per_token: int | None = None
    """Per rank, all layers, at the chosen KV dtype."""
    kv_cache_tokens: int | None = None
    """Tokens the KV pool holds (vLLM's new definition: max_concurrency × max_model_len)."""
    max_concurrency: float | None = None
    """Requests of max_model_len the pool holds at once."""
    max_model_len: int | None = None
    """The context length that was priced."""
    max_model_len_fits: int | None = None
    """The largest context for which one request still fits."""
    available_kv_gib: float | None = None
    """Minimum over ranks."""
    gpus: list[GpuFit] = Field(default_factory=list)
    """Per-rank breakdown."""
    reasons: list[str] = Field(default_factory=list)
    """Why the verdict is not `fits` (or what was assumed)."""
    notes: list[str] = Field(default_factory=list)
    """Advice that does not change the verdict."""
    kv_cache_tokens_legacy: int | None = None
    """The older vLLM token line: `num_blocks // kv_groups × block_size` (under-reports hybrids)."""
    kv_blocks: int | None = None
    """KV blocks in the pool (minimum over ranks)."""
    kv_block_bytes: int | None = None
    """What one block costs across its group's layers, per rank."""
    block_size: int | None = None
    """Tokens per KV block (16, or enlarged for Mamba/GDN hybrids)."""
    kv_groups: int | None = None
    """KV-cache groups of vLLM's hybrid allocator (1 for a plain model)."""
    kv_padding_layers: int | None = None
    """Padding layers the grouping adds ("Add N padding layers")."""
    state_bytes_per_request: int | None = None
    """Fixed Mamba/GDN state per sequence per rank (hybrid models), bytes."""
    max_num_seqs: int | None = None
    """Concurrent sequences priced (drives the sampler warm-up)."""
    max_num_batched_tokens: int | None = None
    """Tokens per step priced (drives the activation peak)."""
    gpu_memory_utilization: float | None = None
    """The fraction priced (vLLM util / SGLang mem_fraction_static)."""
    source: FitSource = "predicted"
    """`learned` when this rig's recorded boots of the same setup supplied the measured terms, else `predicted`."""
    learned: LearnedMark | None = None
    """Which boots, when `source` is `learned`."""


ContextBound = Literal["memory", "model"]


class MaxContext(BaseModel):
    """`c3 fit … --max-context`: the largest context one request can have on these ranks, and what bounds it.
    Its `model_dump(mode="json")` is the `max_context` object of `c3 fit --max-context --json`."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    tokens: int
    """The largest context that fits: vLLM's max_model_len, llama.cpp's --ctx-size."""
    bound: ContextBound
    """What stopped it: `memory` (one more step of KV does not fit) or `model` (the model's own maximum)."""
    model_max: int
    """The model's own maximum context (config.json max_position_embeddings)."""
    granularity: int
    """Tokens per step of KV memory: vLLM's block size, llama.cpp's 256-cell padding (× streams with -np > 1)."""
    kv_bytes_per_token: int
    """KV bytes per token per rank (all its layers) the context was priced with."""
    kv_budget_gib: float
    """KV memory left on the binding rank after weights and overheads."""
    kv_blocks: int | None = None
    """vLLM: KV blocks in the pool (the minimum over ranks)."""
    per_request_tokens: int
    """Tokens one request can hold at that context (llama.cpp with -np N > 1 splits --ctx-size over N streams)."""
    binding_rank: int
    """Position of the binding rank in the GPU list (tp rank = position % tp, pp stage = position // tp)."""
    binding_gpu: int | None = None
    """Host GPU index of the binding rank (None when priced on card profiles)."""
    binding_card: str | None = None
    """Card profile (or description) of the binding rank."""
    ranks_alike: int
    """How many ranks are as tight as the binding one (all of them on a homogeneous set)."""
