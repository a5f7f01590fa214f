"""Turn a Hugging Face `config.json` into a `ModelSpec` the fit-check can price.

Multimodal checkpoints (Gemma 3, Mistral 3, Llama 4) nest the language model under `text_config`;
that block is read first and the top level fills only what it lacks. Layer kinds are normalised to
`full_attention`, `sliding_attention`, `chunked_attention` and `linear_attention`, derived where a
config says it another way:

- Gemma 3: `sliding_window_pattern` N (default 6) → layer i is global iff (i + 1) % N == 0.
- gpt-oss: `layer_types` as written.
- Qwen3-Next: `full_attention_interval` N → layer i is full attention iff (i + 1) % N == 0, the rest
  Gated DeltaNet (`linear_attention`).
- Llama 4: `attention_chunk_size` with every 4th layer global (`no_rope_layers` default).
- Qwen2/Qwen3 write `sliding_window` with `use_sliding_window: false`: no sliding layers.
- Gemma 2 without `layer_types`: sliding on even layers, global on odd (transformers' default).
- Nemotron-H: `hybrid_override_pattern` (`M` Mamba-2, `*` attention, `-`/`E` MLP → `mlp`, no cache);
  `layers_block_type` lists; Jamba: attention iff `i % attn_layer_period == attn_layer_offset`, the
  rest Mamba-1 (`mamba`).
- DeepSeek-V3.2 (`index_topk`) and parallel attention+SSM hybrids are marked `unpriced`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from backend import limits
from backend.errors import UsageError
from backend.models import ModelSpec, WeightsVariant
from backend.text import show
from backend.userfiles import load_json, read_text

# Gemma3TextConfig defaults (transformers); the official sparse config.json relies on them.
_GEMMA3_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262208,
    "head_dim": 256,
    "sliding_window_pattern": 6,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
    "num_key_value_heads": 4,
}


def _merged(raw: dict[str, Any]) -> dict[str, Any]:
    text = raw.get("text_config")
    if not isinstance(text, dict):
        return dict(raw)
    merged = {k: v for k, v in raw.items() if k not in ("text_config", "vision_config")}
    merged.update({k: v for k, v in text.items() if v is not None or k not in merged})
    merged["_has_vision"] = isinstance(raw.get("vision_config"), dict)
    merged["_top_architecture"] = (raw.get("architectures") or [""])[0]
    return merged


def _int(cfg: dict[str, Any], *keys: str, default: int | None = None) -> int | None:
    """The first of `keys` holding a number, in its range (backend.limits: ValueError otherwise, so
    1e308 hidden units or 10^18 layers never reach the arithmetic); other values count as absent."""
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) or isinstance(value, float) and (value.is_integer() or not math.isfinite(value)):
            return limits.config_int(key, value)
    return default


def _layer_types(cfg: dict[str, Any], model_type: str, layers: int) -> tuple[str, ...] | None:
    given = cfg.get("layer_types")
    if isinstance(given, list) and len(given) == layers:
        out = []
        for kind in given:
            kind = str(kind)
            if kind in ("sliding_attention", "full_attention", "linear_attention", "chunked_attention"):
                out.append(kind)
            elif kind in ("attention", "global"):
                out.append("full_attention")
            elif kind in ("local", "sliding"):
                out.append("sliding_attention")
            elif "mamba" in kind:
                out.append("mamba")
            elif kind in ("mlp", "moe"):
                out.append("mlp")
            else:
                out.append("linear_attention" if "linear" in kind else "full_attention")
        return tuple(out)
    blocks = cfg.get("layers_block_type")
    if isinstance(blocks, list) and len(blocks) == layers:
        # Nemotron-H / Granite-4 spelling: a list of mamba | attention | mlp | moe. transformers >= 5 saves
        # Nemotron-H's `M` layers as "linear_attention" (NemotronHConfig._pattern_to_list): Mamba-2, not GDN.
        kinds = dict(_BLOCK_KINDS, linear_attention="mamba") if model_type.startswith("nemotron_h") else _BLOCK_KINDS
        return tuple(kinds.get(str(kind).lower(), "full_attention") for kind in blocks)
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) == layers:
        # Nemotron-H: `M` Mamba-2, `*` attention, `-` MLP, `E` MoE (vLLM nemotron_h.py
        # ALL_DECODER_LAYER_TYPES); only `M` and `*` layers hold a cache.
        return tuple(_PATTERN_KINDS.get(ch, "full_attention") for ch in pattern)
    period = _int(cfg, "attn_layer_period")
    if period:
        # Jamba: layer i is attention iff i % attn_layer_period == attn_layer_offset, else Mamba-1
        # (transformers JambaConfig.layers_block_type).
        offset = _int(cfg, "attn_layer_offset", default=0) or 0
        return tuple("full_attention" if i % period == offset else "mamba" for i in range(layers))
    interval = _int(cfg, "full_attention_interval")
    if interval and (cfg.get("linear_num_value_heads") or model_type.startswith("qwen3_next")):
        return tuple("full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers))
    if model_type.startswith("gemma3") and cfg.get("sliding_window"):
        pattern = _int(cfg, "sliding_window_pattern", default=6) or 6
        return tuple("full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers))
    if model_type == "gemma2" and cfg.get("sliding_window"):
        # transformers Gemma2Config: layer_types default to sliding on even layers, global on odd
        # ("sliding_attention" if bool((i + 1) % 2)); vLLM gemma2.py reads the same list.
        return tuple("sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers))
    if model_type.startswith("llama4") and cfg.get("attention_chunk_size"):
        nope = cfg.get("no_rope_layers")
        if isinstance(nope, list) and len(nope) == layers:
            return tuple("chunked_attention" if flag else "full_attention" for flag in nope)
        return tuple("full_attention" if (i + 1) % 4 == 0 else "chunked_attention" for i in range(layers))
    if cfg.get("sliding_window") and cfg.get("use_sliding_window") is not False and not model_type.startswith("gemma3"):
        # Mistral-v0.1-style: every layer slides.
        return tuple("sliding_attention" for _ in range(layers))
    return None


_BLOCK_KINDS = {"mamba": "mamba", "attention": "full_attention", "full_attention": "full_attention", "mlp": "mlp", "moe": "mlp"}
_PATTERN_KINDS = {"M": "mamba", "*": "full_attention", "-": "mlp", "E": "mlp"}


def _mamba_fields(cfg: dict[str, Any], hidden: int, kinds: tuple[str, ...] | None) -> dict[str, Any]:
    """Mamba-1/2 state dimensions, under every spelling the shipped hybrids use."""
    if not kinds or "mamba" not in kinds:
        return {}
    heads = _int(cfg, "mamba_num_heads", "mamba_n_heads")
    head_dim = _int(cfg, "mamba_head_dim", "mamba_d_head")
    if heads and head_dim:
        version, inner = 2, heads * head_dim
    else:
        version, inner = 1, _int(cfg, "mamba_d_inner", default=None) or (_int(cfg, "mamba_expand", "expand", default=2) or 2) * hidden
    return {
        "mamba_version": version,
        "mamba_d_inner": inner,
        "mamba_num_heads": heads,
        "mamba_head_dim": head_dim,
        "mamba_n_groups": _int(cfg, "n_groups", "mamba_n_groups", default=1),
        "mamba_d_state": _int(cfg, "ssm_state_size", "mamba_d_state", "state_size", default=16),
        "mamba_d_conv": _int(cfg, "conv_kernel", "mamba_d_conv", default=4),
    }


def _rope_positions(scaling: Any, max_positions: int) -> int:
    """Rows of one rotary cos/sin cache. vLLM `rotary_embedding/`: linear and dynamic-NTK scaling build
    `max_position × factor` rows (`LinearScalingRotaryEmbedding._compute_cos_sin_cache`), YaRN and
    DeepSeek-YaRN `original_max_position_embeddings × factor`; default, llama3 and the rest `max_position`."""
    if not isinstance(scaling, dict):
        return max_positions
    kind = str(scaling.get("rope_type") or scaling.get("type") or "default")
    factor = limits.config_factor("rope_scaling.factor", float(scaling.get("factor") or 1.0))
    if kind in ("linear", "dynamic"):
        return int(max_positions * factor)
    if kind in ("yarn", "deepseek_yarn"):
        return int((_int(scaling, "original_max_position_embeddings") or max_positions) * factor)
    return max_positions


def _rope_cache_bytes(cfg: dict[str, Any], model_type: str, head_dim: int, max_positions: int, dtype_bytes: int) -> int:
    """Bytes of the rotary caches one rank builds while loading (a buffer of `positions × rotary_dim` in
    the model dtype per distinct rope; vLLM `RotaryEmbedding.__init__` registers `cos_sin_cache`).

    Llama 4 Scout's 10,485,760 positions × 128 × 2 B = 2.5 GiB per rank is why vLLM logs 53.12 GiB
    loaded at TP 4 for a 202.4 GiB checkpoint (llm-d-planner v0.19 log); Gemma 3's global rope with
    linear factor 8 builds 1,048,576 rows. Mamba hybrids without rope (Nemotron-H, Jamba) build none."""
    if model_type in ("nemotron_h", "jamba"):
        return 0
    rotary = _int(cfg, "qk_rope_head_dim") or int(head_dim * limits.config_factor("partial_rotary_factor", float(cfg.get("partial_rotary_factor") or 1.0)))
    total = _rope_positions(cfg.get("rope_scaling"), max_positions) * rotary * dtype_bytes
    if cfg.get("rope_local_base_freq") is not None:
        # Gemma 2/3 sliding layers: a second rope with the local base and no scaling.
        total += max_positions * rotary * dtype_bytes
    return total


def _tied(cfg: dict[str, Any], model_type: str) -> bool:
    """`tie_word_embeddings`, with the transformers default when the config omits it: True for the
    Gemma family (GemmaConfig/Gemma2Config/Gemma3TextConfig), False elsewhere."""
    value = cfg.get("tie_word_embeddings")
    if isinstance(value, bool):
        return value
    return model_type.startswith("gemma")


def _unpriced(cfg: dict[str, Any], model_type: str) -> str | None:
    """Architectures whose engine-side KV layout c3 does not model (priced `unknown`, never `fits`)."""
    if model_type == "deepseek_v32" or cfg.get("index_topk") is not None:
        # vLLM deepseek_v2.py DeepseekV32IndexerCache: a second, per-layer fp8 key cache for the
        # sparse-attention indexer (index_head_dim + its scales), and an fp8 MLA page of 656 B/token
        # (fp8_ds_mla) — neither is in c3's per-token arithmetic.
        return "DeepSeek-V3.2 sparse attention: vLLM adds an indexer key cache per layer and its own fp8 MLA page size, which c3 does not model"
    if cfg.get("hybrid_override_pattern") is not None or cfg.get("attn_layer_period") is not None:
        return None
    if any(k in cfg for k in ("mamba_d_state", "ssm_state_size")) and not cfg.get("layer_types") and not cfg.get("layers_block_type"):
        # Falcon-H1-style parallel hybrids (attention and SSM in every block) have no per-layer
        # kind list c3 could read.
        return "a Mamba hybrid without a per-layer layout c3 can read (parallel attention + SSM blocks)"
    return None


def _ssm_dtype(cfg: dict[str, Any], model_type: str) -> str | None:
    """The recurrent state's dtype when the config pins it. Nemotron-H without one gets float32: vLLM
    model_executor/models/config.py:712 `NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype` turns
    `auto` into the config's value or `DEFAULT_MAMBA_SSM_CACHE_DTYPE = "float32"` (2× the bf16 state)."""
    pinned = next((cfg[k] for k in ("mamba_ssm_dtype", "mamba_ssm_cache_dtype") if isinstance(cfg.get(k), str) and cfg[k] != "auto"), None)
    if pinned is None and model_type.startswith("nemotron_h"):
        return "float32"
    return pinned


def _quant_bits(quant: dict[str, Any] | None) -> int | None:
    if not quant:
        return None
    bits = _int(quant, "bits", "w_bit", "weight_bits")
    if bits:
        return bits
    if quant.get("load_in_4bit"):
        return 4
    if quant.get("load_in_8bit"):
        return 8
    groups = quant.get("config_groups")
    if isinstance(groups, dict):
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, dict) else None
            if isinstance(weights, dict) and isinstance(weights.get("num_bits"), int):
                return int(weights["num_bits"])
    return None


def spec_from_config(raw: dict[str, Any], *, repo: str = "", source: str = "") -> ModelSpec:
    """Build a `ModelSpec` from a parsed config.json (text_config first)."""
    if not isinstance(raw, dict):
        raise UsageError("config.json must hold a JSON object")
    cfg = _merged(raw)
    model_type = str(cfg.get("model_type") or raw.get("model_type") or "")
    if model_type.startswith("gemma3"):
        for key, value in _GEMMA3_DEFAULTS.items():
            cfg.setdefault(key, value)
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    if layers is None and isinstance(cfg.get("layers_block_type"), list):
        # transformers >= 5 NemotronHConfig saves no num_hidden_layers: it is the length of this list.
        layers = len(cfg["layers_block_type"])
    hidden = _int(cfg, "hidden_size", "n_embd", "d_model")
    heads = _int(cfg, "num_attention_heads", "n_head")
    vocab = _int(cfg, "vocab_size")
    missing = [n for n, v in (("num_hidden_layers", layers), ("hidden_size", hidden), ("num_attention_heads", heads), ("vocab_size", vocab)) if not v]
    if missing:
        raise UsageError(f"config.json lacks {', '.join(missing)}", hint="point --config at the model's own config.json")
    assert layers and hidden and heads and vocab
    kv_heads = _int(cfg, "num_key_value_heads", "n_head_kv", default=heads) or heads
    if cfg.get("multi_query") is True:
        kv_heads = 1
    head_dim = _int(cfg, "head_dim", default=None) or hidden // heads
    architectures = raw.get("architectures") or cfg.get("architectures") or [""]
    quant = cfg.get("quantization_config") if isinstance(cfg.get("quantization_config"), dict) else None
    experts = _int(cfg, "num_experts", "num_local_experts", "n_routed_experts")
    sliding = _int(cfg, "sliding_window")
    layer_types = _layer_types(cfg, model_type, layers)
    if not layer_types or "sliding_attention" not in layer_types:
        sliding = None
    spec = ModelSpec(
        repo=repo or str(cfg.get("_name_or_path") or ""),
        architecture=str(architectures[0] if architectures else ""),
        model_type=model_type,
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        vocab_size=vocab,
        max_position_embeddings=_int(cfg, "max_position_embeddings", "n_positions", default=4096) or 4096,
        dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or raw.get("torch_dtype") or "bfloat16"),
        layer_types=layer_types,
        sliding_window=sliding,
        kv_lora_rank=_int(cfg, "kv_lora_rank"),
        qk_rope_head_dim=_int(cfg, "qk_rope_head_dim"),
        qk_nope_head_dim=_int(cfg, "qk_nope_head_dim"),
        v_head_dim=_int(cfg, "v_head_dim"),
        q_lora_rank=_int(cfg, "q_lora_rank"),
        linear_num_key_heads=_int(cfg, "linear_num_key_heads"),
        linear_num_value_heads=_int(cfg, "linear_num_value_heads"),
        linear_key_head_dim=_int(cfg, "linear_key_head_dim"),
        linear_value_head_dim=_int(cfg, "linear_value_head_dim"),
        linear_conv_kernel_dim=_int(cfg, "linear_conv_kernel_dim"),
        num_experts=experts,
        num_experts_per_tok=_int(cfg, "num_experts_per_tok", "experts_per_token"),
        intermediate_size=_int(cfg, "intermediate_size"),
        moe_intermediate_size=_int(cfg, "moe_intermediate_size"),
        shared_expert_intermediate_size=_int(cfg, "shared_expert_intermediate_size"),
        num_shared_experts=_int(cfg, "n_shared_experts"),
        first_k_dense_replace=_int(cfg, "first_k_dense_replace"),
        tie_word_embeddings=_tied(cfg, model_type),
        attention_chunk_size=_int(cfg, "attention_chunk_size"),
        mamba_ssm_dtype=_ssm_dtype(cfg, model_type),
        quant_method=str(quant.get("quant_method")) if quant and quant.get("quant_method") else None,
        quant_bits=_quant_bits(quant),
        has_vision=bool(cfg.get("_has_vision")),
        source=source,
        unpriced=_unpriced(cfg, model_type),
        **_mamba_fields(cfg, hidden, layer_types),
    )
    from backend.catalog.params import count_params, count_vision_params, served_dtype_bytes

    vision = raw.get("vision_config") if isinstance(raw.get("vision_config"), dict) else None
    rope = _rope_cache_bytes(cfg, model_type, head_dim, spec.max_position_embeddings, served_dtype_bytes(spec.dtype))
    return spec.model_copy(update={
        "param_count": count_params(spec, cfg),
        "vision_param_count": count_vision_params(vision, spec, raw) if vision else None,
        "rope_cache_bytes": rope,
    })


def load_config_file(path: str | Path, *, repo: str = "") -> ModelSpec:
    """Read a config.json from disk; a missing or malformed file is a usage error naming it."""
    file = Path(path)
    text = read_text(file, what="model config", missing_ok=True)
    if text is None:
        raise UsageError(f"{file}: no such file")
    raw = load_json(text, source=file, what="model config")
    if not isinstance(raw, dict):
        raise UsageError(f"{file}: a config.json must hold a JSON object")
    try:
        return spec_from_config(raw, repo=repo, source=str(file))
    except UsageError as error:
        raise UsageError(f"{file}: {error.message}", hint=error.hint) from None
    except (TypeError, ValueError) as error:
        raise UsageError(f"{file}: unusable config ({show(str(error), 120)})") from None


def with_weights(spec: ModelSpec, variants: tuple[WeightsVariant, ...]) -> ModelSpec:
    """The same spec with its known weight variants attached."""
    return spec.model_copy(update={"weights": variants})
