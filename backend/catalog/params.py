"""Parameter counts and weight bytes from a config's shapes, for a model priced without a weights row.

The count covers the language model (embeddings, attention, MLP/experts, norms, lm_head unless tied);
a vision tower is not counted. It reproduces the Hugging Face parameter count exactly for the
shipped Llama, Qwen3, Qwen3-MoE, gpt-oss and DeepSeek-V2 configs (tests/fit/test_configs.py).
"""

from __future__ import annotations

from typing import Any

from backend.models import ModelSpec

_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "fp8": 1, "float8_e4m3fn": 1}


def dtype_bytes(name: str | None) -> int:
    """Bytes per element of a torch dtype name (bf16 when unknown)."""
    return _DTYPE_BYTES.get((name or "bfloat16").replace("torch.", "").lower(), 2)


def served_dtype_bytes(name: str | None) -> int:
    """Bytes per element vLLM serves a checkpoint in with `--dtype auto`: fp32 checkpoints run in fp16."""
    return min(2, dtype_bytes(name))


def _attention_params(spec: ModelSpec, cfg: dict[str, Any], kind: str) -> int:
    h, hd, nq, nkv = spec.hidden_size, spec.head_dim, spec.num_attention_heads, spec.num_kv_heads
    if kind == "linear_attention":
        kh, vh = spec.linear_num_key_heads or 0, spec.linear_num_value_heads or 0
        kd, vd = spec.linear_key_head_dim or 0, spec.linear_value_head_dim or 0
        conv_dim = 2 * kh * kd + vh * vd
        return (
            h * (2 * kh * kd + 2 * vh * vd)  # in_proj_qkvz
            + h * 2 * vh  # in_proj_ba
            + conv_dim * (spec.linear_conv_kernel_dim or 4)
            + 2 * vh  # dt_bias, A_log
            + vd  # gated norm
            + vh * vd * h  # out_proj
        )
    if spec.kv_lora_rank:
        rope, nope = spec.qk_rope_head_dim or 0, spec.qk_nope_head_dim or 0
        v = spec.v_head_dim or hd
        q = (h * spec.q_lora_rank + spec.q_lora_rank + spec.q_lora_rank * nq * (nope + rope)) if spec.q_lora_rank else h * nq * (nope + rope)
        return q + h * (spec.kv_lora_rank + rope) + spec.kv_lora_rank + spec.kv_lora_rank * nq * (nope + v) + nq * v * h
    gated = spec.model_type.startswith("qwen3_next")
    q = h * nq * hd * (2 if gated else 1)
    total = q + 2 * h * nkv * hd + nq * hd * h
    if cfg.get("attention_bias"):
        total += nq * hd + 2 * nkv * hd + h
    elif spec.model_type.startswith("qwen2"):
        total += nq * hd + 2 * nkv * hd
    if spec.model_type.startswith(("qwen3", "gemma3")):
        total += 2 * hd  # q_norm, k_norm
    if spec.model_type.startswith("gpt_oss"):
        total += nq  # attention sinks
    return total


def _mlp_params(spec: ModelSpec, cfg: dict[str, Any], layer: int) -> tuple[int, int]:
    """(total MLP params of one layer, of which routed-expert params)."""
    h = spec.hidden_size
    experts = spec.num_experts or 0
    dense_layer = experts == 0 or (spec.first_k_dense_replace is not None and layer < spec.first_k_dense_replace)
    if dense_layer:
        return 3 * h * (spec.intermediate_size or 4 * h), 0
    width = spec.moe_intermediate_size or spec.intermediate_size or 0
    routed = experts * 3 * h * width
    if spec.model_type.startswith("gpt_oss"):
        routed += experts * (2 * width + h)  # expert biases
        return routed + h * experts + experts, routed
    shared = 0
    if spec.shared_expert_intermediate_size:
        shared = 3 * h * spec.shared_expert_intermediate_size + h
    elif spec.num_shared_experts:
        shared = spec.num_shared_experts * 3 * h * width
    elif spec.model_type.startswith("llama4"):
        # transformers Llama4TextMoe: one shared expert of `intermediate_size` beside the routed ones.
        shared = 3 * h * (spec.intermediate_size or width)
    return routed + shared + h * experts, routed


def _mamba_params(spec: ModelSpec, cfg: dict[str, Any]) -> int:
    """One Mamba mixer: Mamba-2 (in_proj to z, x, B, C, dt; conv; A, D, dt_bias; gated norm; out_proj)
    or Mamba-1 (in_proj, conv, x_proj, dt_proj, A, D, out_proj)."""
    h, inner, n, k = spec.hidden_size, spec.mamba_d_inner or 0, spec.mamba_d_state or 16, spec.mamba_d_conv or 4
    if spec.mamba_version == 2:
        heads, groups = spec.mamba_num_heads or 0, spec.mamba_n_groups or 1
        conv_dim = inner + 2 * groups * n
        return h * (2 * inner + 2 * groups * n + heads) + conv_dim * (k + 1) + 3 * heads + inner + inner * h
    dt_rank = int(cfg.get("mamba_dt_rank") or -(-h // 16))
    return h * 2 * inner + inner * (k + 1) + inner * (dt_rank + 2 * n) + dt_rank * inner + inner + inner * n + inner + inner * h


def _layer_params(spec: ModelSpec, cfg: dict[str, Any], layer: int, kind: str) -> int:
    h = spec.hidden_size
    if spec.model_type == "nemotron_h":
        # One block per layer: a Mamba-2 mixer, an attention mixer, or a squared-ReLU MLP (2 matrices).
        if kind == "mlp":
            return 2 * h * (spec.intermediate_size or 4 * h) + h
        mixer = _mamba_params(spec, cfg) if kind == "mamba" else _attention_params(spec, cfg, kind)
        return mixer + h
    mixer = _mamba_params(spec, cfg) if kind == "mamba" else _attention_params(spec, cfg, kind)
    period = cfg.get("expert_layer_period")
    if isinstance(period, int) and period > 0 and layer % period != int(cfg.get("expert_layer_offset") or 0):
        mlp = 3 * h * (spec.intermediate_size or 4 * h)  # Jamba: dense MLP between the MoE layers
    else:
        mlp, _ = _mlp_params(spec, cfg, layer)
    norms = 4 * h if spec.model_type.startswith("gemma3") else 2 * h
    return mixer + mlp + norms


def count_params(spec: ModelSpec, cfg: dict[str, Any] | None = None) -> int:
    """Language-model parameters from the config's shapes."""
    cfg = cfg or {}
    h = spec.hidden_size
    total = spec.vocab_size * h * (1 if spec.tie_word_embeddings else 2) + h
    kinds = spec.layer_types or tuple("full_attention" for _ in range(spec.num_layers))
    for layer, kind in enumerate(kinds):
        total += _layer_params(spec, cfg, layer, kind)
    return total


def count_vision_params(vision: dict[str, Any], spec: ModelSpec, raw: dict[str, Any]) -> int:
    """Vision tower + projector, from `vision_config` (SigLIP / Pixtral-style ViTs).

    Within 1 % of the stated counts: SigLIP in Gemma 3 416.9 M, Pixtral in Mistral Small 3.1 403.3 M
    (+ 35.7 M projector) (shared data README)."""
    if vision.get("model_type") == "llama4_vision_model":
        return _llama4_vision_params(vision, spec)
    h = int(vision.get("hidden_size") or 1024)
    width = int(vision.get("intermediate_size") or 4 * h)
    layers = int(vision.get("num_hidden_layers") or 24)
    patch = int(vision.get("patch_size") or 14)
    image = int(vision.get("image_size") or 224)
    gated = str(vision.get("hidden_act", "")).lower() in ("silu", "swiglu") or vision.get("model_type") == "pixtral"
    per_layer = 4 * h * h + (3 if gated else 2) * h * width + 4 * h
    positions = (image // patch) ** 2 * h if vision.get("model_type", "").startswith("siglip") else 0
    patch_embed = int(vision.get("num_channels") or 3) * patch * patch * h
    text = spec.hidden_size
    projector = h * text
    if raw.get("model_type") == "mistral3":
        merge = int(raw.get("spatial_merge_size") or 2)
        projector = h * h * merge * merge + h * text + text * text
    return layers * per_layer + positions + patch_embed + projector


def _llama4_vision_params(vision: dict[str, Any], spec: ModelSpec) -> int:
    """Llama 4's ViT (transformers `Llama4VisionModel`): biased q/k/v/o and fc1/fc2 (GELU, not gated),
    two biased LayerNorms per layer, an unfold patch linear without bias, class and (patches + 1)
    position embeddings, pre/post LayerNorms, the pixel-shuffle adapter MLP
    (`intermediate_size` → `projector_input_dim` → `projector_output_dim`, biased only with
    `multi_modal_projector_bias`) and the projector to the text width. Scout: 871,932,416, so that
    with its 107,769,861,120 text parameters the total is the hub's 108,641,793,536."""
    h = int(vision.get("hidden_size") or 1408)
    width = int(vision.get("intermediate_size") or 4 * h)
    layers = int(vision.get("num_hidden_layers") or 34)
    patch = int(vision.get("patch_size") or 14)
    image = int(vision.get("image_size") or 336)
    adapter_in = int(vision.get("projector_input_dim") or 4096)
    adapter_out = int(vision.get("projector_output_dim") or 4096)
    out_dim = int(vision.get("vision_output_dim") or adapter_out)
    per_layer = 4 * (h * h + h) + (h * width + width) + (width * h + h) + 4 * h
    embeddings = h + ((image // patch) ** 2 + 1) * h + int(vision.get("num_channels") or 3) * patch * patch * h + 4 * h
    adapter = width * adapter_in + adapter_in * adapter_out
    if vision.get("multi_modal_projector_bias"):
        adapter += adapter_in + adapter_out
    return layers * per_layer + embeddings + adapter + out_dim * spec.hidden_size


def expert_params(spec: ModelSpec) -> int:
    """Routed-expert parameters (what MXFP4/expert-only quantisation applies to)."""
    return sum(_mlp_params(spec, {}, layer)[1] for layer in range(spec.num_layers))


def estimated_weight_bytes(spec: ModelSpec) -> int:
    """Checkpoint bytes when no weights row is known: params × dtype, MXFP4 experts at 4.25 bits."""
    params = spec.param_count or count_params(spec)
    vision_bytes = (spec.vision_param_count or 0) * 2  # vision towers stay 16-bit in quantised checkpoints
    return _language_bytes(spec, params) + vision_bytes


def _language_bytes(spec: ModelSpec, params: int) -> int:
    embeddings = spec.vocab_size * spec.hidden_size * (1 if spec.tie_word_embeddings else 2)
    if spec.quant_method == "mxfp4":
        experts = expert_params(spec)
        return int(experts * 4.25 / 8) + (params - experts) * 2
    if spec.quant_method in ("fp8", "fbgemm_fp8", "modelopt") or (spec.quant_method and spec.quant_bits == 8):
        # Linear weights at 1 byte (+ scales), embeddings and lm_head stay 16-bit.
        return (params - embeddings) + embeddings * 2
    if spec.quant_method:
        # 4-bit families (awq, gptq, compressed-tensors W4A16, bitsandbytes): packed weights plus
        # group scales/zeros ≈ 0.52 B/param; when the bit width is unknown assume 8 (the safe side).
        per_param = 0.52 if (spec.quant_bits or 8) <= 4 else 1.02
        return int((params - embeddings) * per_param) + embeddings * 2
    return params * served_dtype_bytes(spec.dtype)
