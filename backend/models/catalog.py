"""The catalog (slugs), the card profiles and the model specs the fit-check prices."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Engine = Literal["vllm", "llamacpp", "sglang", "custom"]
SlugStatus = Literal["production", "caveats", "experimental", "deprecated"]


class CardProfile(BaseModel):
    """What c3 knows about a GPU model, used to label a measured card and to check plausibility.

    A measurement always wins over a profile: the fit-check prices the card's measured memory.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    """Short stable key, e.g. `rtx-3090`."""
    name: str
    """Human-readable name."""
    nvml_names: tuple[str, ...]
    """Exact NVML names this profile matches (whole-string or longest match, never a substring)."""
    total_mib: int | None
    """Typical NVML total in the default ECC state; None for unified memory (GB10)."""
    cuda_total_gib: float | None = None
    """CUDA-visible total from a public log, when one was found."""
    sm: str
    """Compute capability, `major.minor`."""
    arch: str
    """Architecture family (Ampere, Ada Lovelace, Hopper, Blackwell)."""
    safe_memory_fraction: float = 0.92
    """A gpu_memory_utilization that leaves the runtime headroom this card needs."""
    kv_dtypes: tuple[str, ...] = ("auto", "bf16", "fp16", "fp8", "fp8_e5m2", "fp8_e4m3")
    """KV-cache dtypes the card's kernels support."""
    unified_memory: bool = False
    """Memory shared with the CPU (GB10 / DGX Spark): NVML reports none."""
    source: str = ""
    """Where the numbers come from."""


class WeightsVariant(BaseModel):
    """One downloadable form of a model's weights."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Variant key, e.g. `bf16`, `awq-int4`, `gguf-q4_k_m`, `mxfp4`."""
    format: str
    """Weight format (bf16, fp8, awq, gptq, mxfp4, gguf…)."""
    repo: str
    """Hugging Face repo holding this variant."""
    bytes: int
    """Total weight bytes (safetensors total_size or GGUF file size)."""
    source: str = ""
    """Where the size comes from."""


class ModelSpec(BaseModel):
    """The config.json fields that decide memory, plus weight bytes per variant."""

    model_config = ConfigDict(frozen=True)

    repo: str
    """HF repo id, e.g. `Qwen/Qwen3-8B`."""
    architecture: str = ""
    """`architectures[0]` from config.json."""
    num_layers: int
    """`num_hidden_layers` (of the text model)."""
    hidden_size: int
    """`hidden_size`."""
    num_attention_heads: int
    """`num_attention_heads`."""
    num_kv_heads: int
    """`num_key_value_heads` (defaults to attention heads when absent)."""
    head_dim: int
    """`head_dim`, else hidden / heads."""
    vocab_size: int
    """`vocab_size`."""
    max_position_embeddings: int
    """Default maximum context."""
    dtype: str = "bfloat16"
    """`torch_dtype` / `dtype`."""
    layer_types: tuple[str, ...] | None = None
    """Per-layer kind: `full_attention`, `sliding_attention`, `chunked_attention`, `linear_attention`
    (Gated DeltaNet), `mamba` (Mamba-1/2 state) or `mlp` (no cache: Nemotron-H `-`/`E` layers)."""
    sliding_window: int | None = None
    """Window of sliding-attention layers, tokens."""
    kv_lora_rank: int | None = None
    """MLA latent rank (DeepSeek V2/V3)."""
    qk_rope_head_dim: int | None = None
    """MLA rope part of the key."""
    linear_num_key_heads: int | None = None
    """Gated-DeltaNet key heads (Qwen3-Next)."""
    linear_num_value_heads: int | None = None
    """Gated-DeltaNet value heads."""
    linear_key_head_dim: int | None = None
    """Gated-DeltaNet key head dim."""
    linear_value_head_dim: int | None = None
    """Gated-DeltaNet value head dim."""
    linear_conv_kernel_dim: int | None = None
    """Gated-DeltaNet short-conv kernel width."""
    num_experts: int | None = None
    """Routed experts (MoE)."""
    num_experts_per_tok: int | None = None
    """Experts per token (MoE)."""
    weights: tuple[WeightsVariant, ...] = ()
    """Known weight variants and their sizes."""
    source: str = ""
    """Where the config numbers come from."""
    model_type: str = ""
    """`model_type` of the text model (`llama`, `qwen3`, `gemma3_text`, `gpt_oss`, `qwen3_next`…)."""
    intermediate_size: int | None = None
    """Dense MLP width."""
    moe_intermediate_size: int | None = None
    """Per-expert MLP width (MoE)."""
    shared_expert_intermediate_size: int | None = None
    """Shared-expert MLP width (Qwen3-Next; DeepSeek uses `n_shared_experts × moe_intermediate_size`)."""
    num_shared_experts: int | None = None
    """DeepSeek `n_shared_experts`."""
    first_k_dense_replace: int | None = None
    """DeepSeek: the first k layers use a dense MLP."""
    tie_word_embeddings: bool = False
    """lm_head shares the embedding matrix."""
    q_lora_rank: int | None = None
    """MLA query low-rank (None: full q projection)."""
    qk_nope_head_dim: int | None = None
    """MLA non-rope part of the query/key head."""
    v_head_dim: int | None = None
    """MLA value head dim."""
    attention_chunk_size: int | None = None
    """Llama 4 chunked local attention window."""
    mamba_ssm_dtype: str | None = None
    """Dtype of the recurrent (SSM / GDN) state, when the config pins it; else the model dtype."""
    quant_method: str | None = None
    """`quantization_config.quant_method` (mxfp4, fp8, awq, gptq, compressed-tensors…)."""
    quant_bits: int | None = None
    """Weight bits from `quantization_config` (`bits`, or `num_bits` of compressed-tensors), when stated."""
    has_vision: bool = False
    """Checkpoint ships a vision tower (loaded unless disabled)."""
    param_count: int | None = None
    """Parameters of the language model computed from the config's shapes (no vision tower)."""
    vision_param_count: int | None = None
    """Vision tower + projector parameters estimated from `vision_config` (loaded unless disabled)."""
    rope_cache_bytes: int = 0
    """Bytes of the rotary cos/sin cache(s) every rank builds at load: positions × rotary dim × dtype
    per distinct rope (vLLM `RotaryEmbedding._compute_cos_sin_cache`); 2.5 GiB for Llama 4's 10 M positions."""
    mamba_version: int | None = None
    """1 (Jamba: `mamba_expand`) or 2 (Nemotron-H, Bamba: heads × head_dim) for layers of kind `mamba`."""
    mamba_d_inner: int | None = None
    """Mamba inner width (Mamba-1 `mamba_expand × hidden`, Mamba-2 `mamba_num_heads × mamba_head_dim`)."""
    mamba_num_heads: int | None = None
    """Mamba-2 heads (`mamba_num_heads`)."""
    mamba_head_dim: int | None = None
    """Mamba-2 head dim (`mamba_head_dim`)."""
    mamba_n_groups: int | None = None
    """Mamba-2 B/C groups (`n_groups`)."""
    mamba_d_state: int | None = None
    """SSM state size (`ssm_state_size` / `mamba_d_state`)."""
    mamba_d_conv: int | None = None
    """Short-conv kernel (`conv_kernel` / `mamba_d_conv`)."""
    unpriced: str | None = None
    """Why the engine's KV layout for this architecture is not modelled (the verdict is then `unknown`)."""


class CatalogEntry(BaseModel):
    """A slug: one way to serve one model with one engine at one parallelism."""

    model_config = ConfigDict(frozen=True)

    slug: str
    """`engine/name`, e.g. `vllm/qwen3-8b`."""
    engine: Engine
    """vllm | llamacpp | sglang | custom."""
    image: str
    """Container image tag."""
    image_digest: str | None = None
    """`sha256:…` when known; pins the image."""
    model: str = ""
    """HF repo id of the model (empty for custom)."""
    revision: str | None = None
    """HF revision to pin, when known."""
    base_model: str | None = None
    """HF repo whose config.json prices this entry when `model` is a derivative (AWQ, GGUF…)."""
    config_path: str | None = None
    """A config.json to price this entry from (user entries; relative to the catalog.d file)."""
    weights_bytes: int | None = None
    """Checkpoint bytes when no weights variant is known (user entries)."""
    weights: str | None = None
    """Weights variant key in the model spec."""
    tp: int = Field(default=1, ge=1)
    """Tensor-parallel size."""
    pp: int = Field(default=1, ge=1)
    """Pipeline-parallel size."""
    default_port: int = 8000
    """Host port proposed when the user names none."""
    max_model_len: int | None = None
    """Context length the engine is started with."""
    max_num_seqs: int | None = None
    """Concurrent sequences."""
    max_num_batched_tokens: int | None = None
    """Tokens per scheduler step (drives vLLM's activation peak)."""
    gpu_memory_utilization: float = 0.90
    """vLLM's fraction of the card's total; SGLang's mem_fraction_static."""
    kv_cache_dtype: str = "auto"
    """KV-cache dtype passed to the engine."""
    required_sm: str | None = None
    """Minimum compute capability the fast path needs."""
    fallback_sm: str | None = None
    """Lower capability on which a slower path still works (priced, annotated)."""
    requires_homogeneous_arch: bool = False
    """Refuse TP across cards of different compute capability."""
    status: SlugStatus = "production"
    """production | caveats boot freely; experimental | deprecated need --force."""
    status_note: str = ""
    """Why the status is what it is."""
    extra_args: tuple[str, ...] = ()
    """Extra engine arguments, appended verbatim."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra container environment (never secrets: HF_TOKEN comes from the caller's environment)."""
    command: tuple[str, ...] | None = None
    """custom engine only: the full command line."""
    container_port: int | None = None
    """Port inside the container (engine default when None)."""
    health_path: str = "/v1/models"
    """Readiness path."""
    block_size: int | None = None
    """KV block size in tokens (vLLM default 16; hybrids with Mamba/GDN layers enlarge it)."""
    enforce_eager: bool = False
    """No CUDA graphs (vLLM `--enforce-eager`): no graph memory is priced."""
    engine_version: str | None = None
    """Engine version the numbers assume (parsed from the image tag when absent)."""
    source: str = ""
    """Where the entry's numbers come from."""
    user: bool = False
    """Came from `$C3_HOME/catalog.d/` rather than the built-in catalog."""

    @property
    def gpu_count(self) -> int:
        """GPUs a pod of this slug needs: TP × PP."""
        return self.tp * self.pp
