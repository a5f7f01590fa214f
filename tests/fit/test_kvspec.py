"""KV bytes per token and vLLM's block geometry, derived from the real config.json files."""

from __future__ import annotations

import json

import pytest

from backend.catalog.configs import spec_from_config
from backend.catalog.specs import MODELS_DIR, shipped_spec
from backend.fit.kvspec import cdiv, kv_layout


def raw(name: str) -> dict:
    return json.loads((MODELS_DIR / f"{name}.config.json").read_text())


def per_token_from_config(cfg: dict, tp: int, dtype_bytes: int = 2) -> int:
    """The GQA formula written out independently of the code under test."""
    layers = cfg["num_hidden_layers"]
    kv_heads = cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return layers * max(1, kv_heads // tp) * head_dim * 2 * dtype_bytes


def test_llama_3_1_8b_bf16_tp1_is_131072_bytes_per_token():
    cfg = raw("meta-llama__Llama-3.1-8B-Instruct")
    assert per_token_from_config(cfg, 1) == 32 * 8 * 128 * 2 * 2 == 131072
    layout = kv_layout(spec_from_config(cfg), tp=1)
    assert layout.bytes_per_token == 131072
    assert layout.block_size == 16 and len(layout.groups) == 1 and layout.group_size == 32


def test_qwen3_32b_bf16_tp2_uses_explicit_head_dim():
    cfg = raw("Qwen__Qwen3-32B")
    expected = per_token_from_config(cfg, 2)
    assert expected == 64 * 4 * 128 * 2 * 2  # head_dim 128, not 5120/64 = 80
    assert kv_layout(spec_from_config(cfg), tp=2).bytes_per_token == expected


def test_kv_heads_are_replicated_when_tp_exceeds_them():
    spec = shipped_spec("Qwen/Qwen3-30B-A3B")  # 4 KV heads
    per_tp = {tp: kv_layout(spec, tp=tp).bytes_per_token for tp in (1, 2, 4, 8)}
    assert per_tp[1] == 48 * 4 * 128 * 2 * 2
    assert per_tp[2] == per_tp[1] // 2
    assert per_tp[4] == per_tp[8] == 48 * 1 * 128 * 2 * 2  # one head per rank, never fewer


def test_mla_latent_is_not_split_by_tp():
    spec = shipped_spec("deepseek-ai/DeepSeek-V2-Lite-Chat")
    for tp in (1, 2, 4):
        assert kv_layout(spec, tp=tp).bytes_per_token == 27 * 576 * 2
    # vllm#15871: one 32,768-token request needs 0.95 GiB.
    assert round(27 * 576 * 2 * 32768 / 2**30, 2) == 0.95


@pytest.mark.parametrize("kv, per_elem", [("auto", 2), ("bf16", 2), ("fp16", 2), ("fp8", 1), ("fp8_e4m3", 1), ("fp8_e5m2", 1)])
def test_every_kv_dtype(kv, per_elem):
    spec = shipped_spec("meta-llama/Llama-3.1-8B-Instruct")
    assert kv_layout(spec, tp=1, kv_cache_dtype=kv).bytes_per_token == 32 * 8 * 128 * 2 * per_elem


def test_gpt_oss_sliding_and_full_layers_form_two_groups():
    spec = shipped_spec("openai/gpt-oss-20b")
    layout = kv_layout(spec, tp=1)
    assert layout.kinds == {"sliding_attention": 12, "full_attention": 12}
    assert layout.group_size == 12 and len(layout.groups) == 2 and layout.padding_layers == 0
    assert layout.bytes_per_token == 24 * 2 * 8 * 64 * 2
    assert layout.block_bytes == 16 * 2 * 8 * 64 * 2 * 12
    # Per request: full layers hold the whole context, the window only W - 1 + B tokens.
    assert layout.blocks_per_request(131072, 8192) == 131072 // 16 + cdiv(128 - 1 + 8192, 16) + 1


def test_gemma3_five_to_one_grouping_pads_the_sliding_groups():
    spec = shipped_spec("google/gemma-3-27b-it")
    assert spec.layer_types.count("full_attention") == 10 and spec.sliding_window == 1024
    layout = kv_layout(spec, tp=2)
    assert layout.group_size == 10
    kinds = [g.kind for g in layout.groups]
    assert kinds.count("full_attention") == 1 and kinds.count("sliding_attention") == 6
    assert layout.padding_layers == 8  # "Add 8 padding layers"
    assert layout.bytes_per_token == 62 * 2 * 8 * 128 * 2
    assert layout.blocks_per_request(32768, 2048) == 2048 + 6 * (cdiv(1024 - 1 + 2048, 16) + 1)


def test_gemma3_12b_defaults_and_grouping():
    spec = shipped_spec("google/gemma-3-12b-it")
    layout = kv_layout(spec, tp=1)
    assert layout.group_size == 8 and len(layout.groups) == 6 and layout.padding_layers == 0


@pytest.mark.parametrize("tp, kv_heads_rank", [(1, 2), (2, 1), (4, 1)])
def test_qwen3_next_gdn_state_enlarges_the_attention_block(tp, kv_heads_rank):
    spec = shipped_spec("Qwen/Qwen3-Next-80B-A3B-Instruct")
    layout = kv_layout(spec, tp=tp)
    attn_token = 2 * kv_heads_rank * 256 * 2
    conv = (128 * 16 * 2 + 128 * 32) // tp * (4 - 1) * 2
    ssm = (32 // tp) * 128 * 128 * 2
    state = conv + ssm
    assert layout.state_bytes_per_layer == state
    assert layout.block_size == 16 * cdiv(state, 16 * attn_token)
    assert layout.block_size * attn_token >= state
    assert layout.page_bytes == layout.block_size * attn_token
    assert layout.bytes_per_token == 12 * attn_token
    # 12 full-attention layers set the group size: one attention group and three state groups.
    assert layout.group_size == 12 and [g.kind for g in layout.groups].count("linear_attention") == 3
    assert layout.blocks_per_request(65536, 8192) == cdiv(65536, layout.block_size) + 3 * 2  # "align" mode


def test_qwen3_next_tp1_block_is_544_tokens():
    layout = kv_layout(shipped_spec("Qwen/Qwen3-Next-80B-A3B-Instruct"), tp=1)
    assert layout.block_size == 544


def test_num_blocks_is_floor_of_budget_over_block_bytes():
    layout = kv_layout(shipped_spec("meta-llama/Llama-3.1-8B-Instruct"), tp=1)
    assert layout.block_bytes == 16 * 131072 // 32 * 32 * 1 and layout.page_bytes == 16 * 4096
    assert layout.num_blocks(1952 * 16 * 131072) == 1952  # vllm#10517: 3.81 GiB, 1952 blocks
    assert layout.num_blocks(-1) == 0


def test_gdn_hybrid_matches_public_qwen36_27b_logs():
    """club-3090#1047 (TP 1) and mitchross/talos-argocd-proxmox#1995 (TP 2): fp8 KV, fp32 SSM state."""
    from pathlib import Path

    from backend.catalog.configs import load_config_file

    path = Path(__file__).resolve().parents[2] / "bench" / "data" / "configs" / "qwen3.6-27b-shape.config.json"
    spec = load_config_file(path)
    one = kv_layout(spec, tp=1, kv_cache_dtype="fp8")
    assert one.block_size == 1568  # "Setting attention block size to 1568 tokens"
    assert round((one.page_bytes / one.state_bytes_per_layer - 1) * 100, 2) == 0.13  # "Padding mamba page size by 0.13%"
    two = kv_layout(spec, tp=2, kv_cache_dtype="fp8")
    assert two.block_size == 1568 and two.bytes_per_token == 16 * 2 * 2 * 256
    blocks = two.num_blocks(4.99 * 2**30)
    assert round(blocks / two.blocks_per_request(131072, 8192), 2) == 2.31  # "Maximum concurrency … 2.31x"
