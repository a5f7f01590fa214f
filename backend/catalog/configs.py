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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
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
            else:
                out.append("linear_attention" if "linear" in kind or "mamba" in kind else "full_attention")
        return tuple(out)
    interval = _int(cfg, "full_attention_interval")
    if interval and (cfg.get("linear_num_value_heads") or model_type.startswith("qwen3_next")):
        return tuple("full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers))
    if model_type.startswith("gemma3") and cfg.get("sliding_window"):
        pattern = _int(cfg, "sliding_window_pattern", default=6) or 6
        return tuple("full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers))
    if model_type.startswith("llama4") and cfg.get("attention_chunk_size"):
        nope = cfg.get("no_rope_layers")
        if isinstance(nope, list) and len(nope) == layers:
            return tuple("chunked_attention" if flag else "full_attention" for flag in nope)
        return tuple("full_attention" if (i + 1) % 4 == 0 else "chunked_attention" for i in range(layers))
    if cfg.get("sliding_window") and cfg.get("use_sliding_window") is not False and not model_type.startswith("gemma3"):
        # Mistral-v0.1-style: every layer slides.
        return tuple("sliding_attention" for _ in range(layers))
    return None


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
                return weights["num_bits"]
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
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        attention_chunk_size=_int(cfg, "attention_chunk_size"),
        mamba_ssm_dtype=cfg.get("mamba_ssm_dtype") if isinstance(cfg.get("mamba_ssm_dtype"), str) else None,
        quant_method=str(quant.get("quant_method")) if quant and quant.get("quant_method") else None,
        quant_bits=_quant_bits(quant),
        has_vision=bool(cfg.get("_has_vision")),
        source=source,
    )
    from backend.catalog.params import count_params, count_vision_params

    vision = raw.get("vision_config") if isinstance(raw.get("vision_config"), dict) else None
    return spec.model_copy(update={"param_count": count_params(spec, cfg), "vision_param_count": count_vision_params(vision, spec, raw) if vision else None})


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
