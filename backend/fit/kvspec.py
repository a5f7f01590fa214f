"""vLLM's KV-cache arithmetic, per rank: bytes per token, layer groups, block geometry, demand.

This is the exact part of the fit-check (research-fitcheck.md §1.4), mirroring vLLM V1's
`kv_cache_interface.py` / `kv_cache_utils.py`:

- Attention layer, per token per rank: `2 × max(1, Hkv // TP) × head_dim × e` (KV heads are
  replicated when there are fewer than TP ranks). MLA: one latent of `kv_lora_rank + qk_rope_head_dim`
  values, `× e`, the same on every rank (not split by TP).
- Gated DeltaNet (Qwen3-Next) state per layer per sequence, per rank: conv
  `(2·kh·kd + vh·vd)/TP × (kernel − 1)` in the model dtype plus recurrent `vh/TP × vd × kd` in the
  SSM dtype. The attention block size is enlarged to `16 × cdiv(mamba_page, 16 × attn_bytes_1_token)`
  so one attention page holds a state page; the state page is padded up to it.
- Layers of one kind form groups of `group_size` layers: with a single kind all layers are one group;
  otherwise `group_size = min(layers per kind)`, or the max when max < 1.5 × min; kinds with more
  layers split into several groups, the last padded ("Add N padding layers"). All groups share one
  block pool: a block costs `page × group_size`.
- Per request of length L, in blocks: full `cdiv(L, bs)`; sliding window
  `cdiv(min(W − 1 + B, L), bs) + 1`; chunked local `cdiv(min(chunk + B, L), bs)`; a state group 2
  with prefix caching ("align" mode), else 1 — and 3 for Mamba-2 in align mode (vLLM 0.32
  mamba_mixer2.py:1098 `get_kv_cache_spec` adds `num_prefill_checkpoint_blocks=1`, and
  kv_cache_interface.py:1076 `MambaSpec.max_memory_usage_bytes` counts `2 + spec + checkpoint` pages).
- The hybrid block size is aligned to `max(16, --block-size)`, not to 16: vLLM 0.32
  platforms/interface.py:1060 `kernel_block_alignment_size = max(min kernel block, block_size)`, then
  `attn_block_size = alignment × cdiv(mamba_page, alignment × attn_page_1_token)` (:1085).
  Older engines aligned to 16 only; the larger alignment is never cheaper, so it is priced for all.

Checked exactly against a real vLLM 0.32 CPU build (tests/real_engine/test_kv_sizing.py) for a
Nemotron-H-shaped Mamba-2 hybrid (block 128 → 256, 5 groups, 3 state blocks per request) and a
Jamba-shaped Mamba-1 hybrid (8 groups, 2 state blocks per request).

Checked against public logs of a Qwen3.6-27B-shaped hybrid (16 attention + 48 GDN layers, fp8 KV,
fp32 SSM state): block size 1568 at TP 1 ("Setting attention block size to 1568 tokens … Padding
mamba page size by 0.13%", club-3090#1047) and at TP 2, and 2.31× concurrency at 131,072 tokens
from 4.99 GiB per rank with prefix caching (mitchross/talos-argocd-proxmox#1995).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.catalog.params import dtype_bytes, served_dtype_bytes
from backend.errors import UsageError
from backend.models import ModelSpec

KV_DTYPES = ("auto", "bf16", "bfloat16", "fp16", "float16", "half", "fp8", "fp8_e4m3", "fp8_e5m2", "float32")
_KV_BYTES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float32": 4}
SSM_DTYPES = ("auto", "float32", "float16", "bfloat16")
"""vLLM's `--mamba-ssm-cache-dtype` choices (config/cache.py `MambaDType`)."""
DEFAULT_BLOCK = 16
_ALIGN = 16


def cdiv(a: int, b: int) -> int:
    """Ceiling division."""
    return -(-a // b)


def kv_dtype_bytes(kv_cache_dtype: str, model_dtype: str) -> int:
    """Bytes per KV element for vLLM's `--kv-cache-dtype` (`auto` follows the model dtype)."""
    name = (kv_cache_dtype or "auto").strip().lower()
    if name == "auto":
        return served_dtype_bytes(model_dtype)
    if name not in _KV_BYTES:
        raise UsageError(f"unknown KV-cache dtype `{kv_cache_dtype}`", hint="use one of auto, bf16, fp16, fp8, fp8_e4m3, fp8_e5m2")
    return _KV_BYTES[name]


@dataclass(frozen=True)
class KvGroup:
    """One KV-cache group: `layers` layers of one kind (+ padding) sharing block ids."""

    kind: str
    layers: int
    padding: int


@dataclass(frozen=True)
class KvLayout:
    """The KV-cache geometry of one rank."""

    block_size: int
    page_bytes: int
    group_size: int
    groups: tuple[KvGroup, ...]
    bytes_per_token: int
    """Attention layers only, all of them (full + sliding + chunked), unpadded, per rank."""
    state_bytes_per_layer: int = 0
    """Mamba/GDN state page per layer per sequence (unpadded)."""
    window: int | None = None
    chunk: int | None = None
    kinds: dict[str, int] = field(default_factory=dict)
    state_blocks: int = 2
    """Blocks a state (Mamba/GDN) group holds per request: 2 in vLLM's "align" mode (prefix caching
    on hybrids, the recent default), 3 for Mamba-2 in that mode (a prefill checkpoint block), 1 with
    prefix caching off."""

    @property
    def block_bytes(self) -> int:
        """What one block id costs across the group's tensors."""
        return self.page_bytes * self.group_size

    @property
    def padding_layers(self) -> int:
        return sum(group.padding for group in self.groups)

    def blocks_per_request(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """Blocks one request of `max_model_len` tokens holds at its peak (vLLM's admission bound)."""
        total = 0
        bs = self.block_size
        for group in self.groups:
            if group.kind == "full_attention":
                total += cdiv(max_model_len, bs)
            elif group.kind == "sliding_attention":
                total += cdiv(min((self.window or max_model_len) - 1 + max_num_batched_tokens, max_model_len), bs) + 1
            elif group.kind == "chunked_attention":
                total += cdiv(min((self.chunk or max_model_len) + max_num_batched_tokens, max_model_len), bs)
            else:
                total += self.state_blocks
        return total

    def num_blocks(self, available_bytes: float) -> int:
        """Blocks a rank's KV budget holds."""
        if available_bytes <= 0:
            return 0
        return int(int(available_bytes) // self.page_bytes // self.group_size)


STATE_KINDS = ("linear_attention", "mamba")
"""Layer kinds that hold a fixed per-sequence state instead of per-token KV."""


def _layer_kinds(spec: ModelSpec) -> list[str]:
    """Cache-holding layer kinds in order (`mlp` layers of Nemotron-H hold no cache and are dropped)."""
    return [k for k in (spec.layer_types or ["full_attention"] * spec.num_layers) if k != "mlp"]


def _ssm_bytes(spec: ModelSpec, ssm_dtype: str | None = None) -> int:
    """Bytes per recurrent-state element: `--mamba-ssm-cache-dtype` when given, else what the config
    pins, else the model dtype (vLLM mamba_utils.py `_mamba_state_dtype`: `auto` follows the conv state)."""
    if ssm_dtype is not None and ssm_dtype not in SSM_DTYPES:
        raise UsageError(f"unknown Mamba SSM cache dtype `{ssm_dtype}`", hint="use one of " + ", ".join(SSM_DTYPES) + " (vLLM's MambaDType)")
    name = ssm_dtype if ssm_dtype and ssm_dtype != "auto" else spec.mamba_ssm_dtype
    return dtype_bytes(name) if name else served_dtype_bytes(spec.dtype)


def _mamba_state_bytes(spec: ModelSpec, tp: int, ssm_dtype: str | None = None) -> int:
    """vLLM mamba_utils.py MambaStateShapeCalculator: Mamba-1 conv `(d_inner/TP, d_conv − 1)` +
    temporal `(d_inner/TP, d_state)`; Mamba-2 conv `((d_inner + 2·G·d_state)/TP, d_conv − 1)` with G
    padded to a multiple of TP (`extra_groups_for_head_shards`) + temporal `(heads/TP, head_dim,
    d_state)`. Conv in the model dtype, temporal in the SSM-cache dtype."""
    inner, d_state, d_conv = spec.mamba_d_inner or 0, spec.mamba_d_state or 16, spec.mamba_d_conv or 4
    e = served_dtype_bytes(spec.dtype)
    if spec.mamba_version == 2:
        groups = spec.mamba_n_groups or 1
        groups += 0 if groups % tp == 0 else tp - groups
        conv = (inner + 2 * groups * d_state) // tp * (d_conv - 1) * e
        temporal = (spec.mamba_num_heads or 0) // tp * (spec.mamba_head_dim or 0) * d_state * _ssm_bytes(spec, ssm_dtype)
        return conv + temporal
    return inner // tp * (d_conv - 1) * e + inner // tp * d_state * _ssm_bytes(spec, ssm_dtype)


def state_bytes_per_layer(spec: ModelSpec, tp: int, kinds: dict[str, int], ssm_dtype: str | None = None) -> int:
    """The state page of one recurrent layer (Gated DeltaNet or Mamba), per sequence, per rank."""
    if kinds.get("linear_attention"):
        return _gdn_state_bytes(spec, tp, ssm_dtype)
    if kinds.get("mamba"):
        return _mamba_state_bytes(spec, tp, ssm_dtype)
    return 0


def _gdn_state_bytes(spec: ModelSpec, tp: int, ssm_dtype: str | None = None) -> int:
    kh, vh = spec.linear_num_key_heads or 0, spec.linear_num_value_heads or 0
    kd, vd = spec.linear_key_head_dim or 0, spec.linear_value_head_dim or 0
    conv_dim = 2 * kh * kd + vh * vd
    conv = (conv_dim // tp) * ((spec.linear_conv_kernel_dim or 4) - 1) * served_dtype_bytes(spec.dtype)
    ssm = (vh // tp) * vd * kd * _ssm_bytes(spec, ssm_dtype)
    return conv + ssm


def attention_bytes_per_token_layer(spec: ModelSpec, tp: int, kv_cache_dtype: str) -> int:
    """Per token, per attention layer, per rank."""
    e = kv_dtype_bytes(kv_cache_dtype, spec.dtype)
    if spec.kv_lora_rank:
        return (spec.kv_lora_rank + (spec.qk_rope_head_dim or 0)) * e
    heads_rank = max(1, spec.num_kv_heads // max(1, tp))
    return 2 * heads_rank * spec.head_dim * e


def _group_size(counts: list[int]) -> int:
    if len(counts) == 1:
        return counts[0]
    low, high = min(counts), max(counts)
    return high if high < low * 1.5 else low


def kv_layout(
    spec: ModelSpec,
    *,
    tp: int = 1,
    pp: int = 1,
    kv_cache_dtype: str = "auto",
    block_size: int | None = None,
    hybrid_manager: bool = True,
    prefix_caching: bool = True,
    ssm_dtype: str | None = None,
) -> KvLayout:
    """The KV geometry of the busiest rank (the first PP stage holds `cdiv(layers, pp)` layers).
    `ssm_dtype` is vLLM's `--mamba-ssm-cache-dtype` (None/`auto`: what the config or model dtype says)."""
    kinds = _layer_kinds(spec)
    if pp > 1:
        kinds = kinds[: cdiv(len(kinds), pp)]
    if not hybrid_manager:
        kinds = ["full_attention" if k in ("sliding_attention", "chunked_attention") else k for k in kinds]
    attn_tok = attention_bytes_per_token_layer(spec, tp, kv_cache_dtype)
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    attention_layers = sum(n for k, n in counts.items() if k not in STATE_KINDS)
    state = state_bytes_per_layer(spec, tp, counts, ssm_dtype)
    bs = block_size or DEFAULT_BLOCK
    if state:
        align = max(_ALIGN, block_size or 0)
        needed = align * cdiv(state, align * attn_tok)
        if block_size is None or block_size < needed:
            bs = needed
    page = bs * attn_tok
    if attention_layers == 0:
        page = state
    gsize = _group_size(list(counts.values()))
    groups = []
    for kind, n in counts.items():
        count = cdiv(n, gsize)
        for i in range(count):
            members = len(range(i, n, count))
            groups.append(KvGroup(kind=kind, layers=members, padding=gsize - members))
    return KvLayout(
        block_size=bs,
        page_bytes=page,
        group_size=gsize,
        groups=tuple(groups),
        bytes_per_token=attention_layers * attn_tok,
        state_bytes_per_layer=state,
        window=spec.sliding_window,
        chunk=spec.attention_chunk_size,
        kinds=counts,
        state_blocks=(3 if counts.get("mamba") and spec.mamba_version == 2 else 2) if prefix_caching else 1,
    )
