"""Issue 15: each place where c3 priced differently from the engine's own source, pinned by a test
that names the engine file/function and a small (or real) config that shows the case."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from backend.catalog import load_catalog
from backend.catalog.configs import load_config_file, spec_from_config
from backend.catalog.specs import shipped_spec
from backend.errors import UsageError
from backend.fit import fit_config, fit_on_cards, knobs_for
from backend.fit.kvspec import cdiv, kv_layout
from backend.fit.llamacpp import _kv_gib, server_slots
from backend.fit.overhead import activation_gib, non_torch_gib
from backend.fit.plan import Knobs
from backend.fit.vllm import default_batching

CONFIGS = Path(__file__).resolve().parents[2] / "bench" / "data" / "configs"
GIB = 1024**3


def config(name: str):
    return load_config_file(CONFIGS / f"{name}.config.json")


# -- vllm/v1/worker/gpu_model_runner.py `_dummy_sampler_run`: the sampler sees the gathered,
#    full-vocabulary logits on every rank, so its warm-up does not grow with TP.
def test_sampler_peak_does_not_grow_with_tp():
    spec = shipped_spec("meta-llama/Llama-3.1-8B-Instruct")
    one = activation_gib(spec, tp=1, max_num_batched_tokens=2048, max_num_seqs=256)
    two = activation_gib(spec, tp=2, max_num_batched_tokens=2048, max_num_seqs=256)
    assert two <= one


def test_activation_and_non_torch_match_the_logged_breakdowns():
    # vllm#21429 (Qwen3-235B-A22B-FP8, TP 4, H200, defaults 1024/8192, v0.9.2 era):
    # "torch peak memory increase: 5.62GiB; non-torch forward increase memory: 2.04GiB".
    spec = shipped_spec("Qwen/Qwen3-235B-A22B")
    act = activation_gib(spec, tp=4, max_num_batched_tokens=8192, max_num_seqs=1024, version=(0, 9))
    assert abs(act - 5.62) <= 0.1
    assert non_torch_gib(tp=4, pp=1, nvswitch=True, version=(0, 9)) >= 2.04
    # llm-d-planner version sweep, Qwen3-14B on H100 (1024/8192): the sampler warm-up shrank in
    # v0.17 (5.64 → 2.23 GiB); non-torch at TP 1 grew in v0.18 (0.13 → 0.25).
    qwen = shipped_spec("Qwen/Qwen3-14B")
    for version, logged in (((0, 16), 5.64), ((0, 17), 2.23)):
        predicted = activation_gib(qwen, tp=1, max_num_batched_tokens=8192, max_num_seqs=1024, version=version)
        assert logged <= predicted <= logged + 0.2, (version, predicted)
    assert non_torch_gib(tp=1, pp=1, version=(0, 17)) >= 0.13
    assert non_torch_gib(tp=1, pp=1, version=(0, 18)) >= 0.25
    # Pipeline-only sets send activations, not all-reduces (0.07 logged at PP 2 and 4 on v0.19; before v0.11 the
    # pipeline group's NCCL buffers were inside the snapshot, and an unknown version is priced that way).
    assert non_torch_gib(tp=1, pp=4, nvswitch=True, version=(0, 19)) == non_torch_gib(tp=1, pp=1, version=(0, 19))
    # NVSwitch TP 2/4 on v0.19: 2.07/2.13 logged (Llama-3.1-8B, H100).
    assert non_torch_gib(tp=4, pp=1, nvswitch=True, version=(0, 19)) >= 2.13


# -- transformers Gemma2Config: without `layer_types` the layers alternate sliding (even i) and
#    global (odd i); vLLM gemma2.py reads the same list. All-sliding would be optimistic.
def test_gemma2_without_layer_types_alternates_sliding_and_global():
    spec = config("google__gemma-2-9b-it")
    assert spec.layer_types[:4] == ("sliding_attention", "full_attention", "sliding_attention", "full_attention")
    assert spec.layer_types.count("full_attention") == 21 and spec.sliding_window == 4096
    layout = kv_layout(spec, tp=1)
    # Two groups of 21 layers; a 8,192-token request holds the full group's cdiv(L, 16) blocks.
    assert len(layout.groups) == 2
    assert layout.blocks_per_request(8192, 2048) >= cdiv(8192, 16)


# -- vllm/config/vllm.py: chunked local attention (Llama 4) runs without the hybrid KV manager unless
#    VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE is on; it defaulted off from vllm#21761
#    (v0.10) until vllm#29627 flipped it (on in v0.19 logs); KV connectors turn the manager off too.
def test_llama4_chunked_attention_and_the_hybrid_manager_by_version():
    spec = shipped_spec("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    base = dict(tp=4, max_model_len=131072, max_num_seqs=256, max_num_batched_tokens=8192, weights_gib=50.0)
    old = fit_config(spec, [79.2] * 4, Knobs(**base, version=(0, 11)))
    assert old.kv_groups == 1
    assert any("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE" in n for n in old.notes)
    old_env = fit_config(spec, [79.2] * 4, Knobs(**base, version=(0, 11), hybrid_kv_env=True))
    assert old_env.kv_groups > 1 and old_env.max_concurrency > old.max_concurrency
    new = fit_config(spec, [79.2] * 4, Knobs(**base, version=(0, 19)))
    assert new.kv_groups > 1
    assert fit_config(spec, [79.2] * 4, Knobs(**base, version=(0, 19), hybrid_kv_env=False)).kv_groups == 1
    connector = Knobs(**base, version=(0, 27), extra_args=("--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1"}'))
    assert fit_config(spec, [79.2] * 4, connector).kv_groups == 1
    # Before the hybrid manager (v0.10) sliding layers were unified too.
    gemma = shipped_spec("google/gemma-3-12b-it")
    assert fit_config(gemma, [23.56], Knobs(max_model_len=8192, weights_gib=10.0, version=(0, 9))).kv_groups == 1


# -- vllm deepseek_v2.py DeepseekV32IndexerCache + the fp8_ds_mla page: not modelled → unknown.
def test_deepseek_v32_is_unknown_not_priced():
    spec = config("deepseek-ai__DeepSeek-V3.2-Exp")
    report = fit_config(spec, [139.8] * 8, Knobs(tp=8, max_model_len=32768, weights_gib=80.0))
    assert report.verdict == "unknown"
    assert "indexer" in report.reasons[0]


# -- vllm mamba_utils.py MambaStateShapeCalculator.mamba2_state_shape / mamba1_state_shape;
#    nemotron_h.py reads `hybrid_override_pattern`, transformers JambaConfig `attn_layer_period`;
#    vLLM 0.32 model_executor/models/config.py:712 NemotronHForCausalLMConfig: an `auto` SSM cache dtype becomes the
#    config's `mamba_ssm_cache_dtype` or float32 (the temporal state in fp32, conv state in the model dtype).
def test_nemotron_h_prices_four_attention_layers_and_mamba2_state():
    spec = config("nvidia__NVIDIA-Nemotron-Nano-9B-v2")
    assert (spec.layer_types.count("full_attention"), spec.layer_types.count("mamba"), spec.layer_types.count("mlp")) == (4, 27, 25)
    assert spec.mamba_ssm_dtype == "float32"  # the config pins none
    layout = kv_layout(spec, tp=1)
    assert layout.bytes_per_token == 4 * 8 * 128 * 2 * 2
    conv = (128 * 80 + 2 * 8 * 128) * (4 - 1) * 2
    temporal = 128 * 80 * 128 * 4
    assert layout.state_bytes_per_layer == conv + temporal
    # TP 2: 8 groups divide, heads halve.
    assert kv_layout(spec, tp=2).state_bytes_per_layer == (128 * 80 + 2 * 8 * 128) // 2 * 3 * 2 + 64 * 80 * 128 * 4
    # `--mamba-ssm-cache-dtype bfloat16` halves the temporal state.
    assert kv_layout(spec, tp=1, ssm_dtype="bfloat16").state_bytes_per_layer == conv + temporal // 2


def test_nemotron_h_keeps_the_ssm_dtype_its_config_pins():
    raw = json.loads((CONFIGS / "nvidia__NVIDIA-Nemotron-Nano-9B-v2.config.json").read_text())
    assert spec_from_config({**raw, "mamba_ssm_cache_dtype": "bfloat16"}).mamba_ssm_dtype == "bfloat16"
    jamba = config("ai21labs__AI21-Jamba-Mini-1.7")
    assert jamba.mamba_ssm_dtype is None  # Jamba has no such default: `auto` follows the model dtype


# -- vLLM 0.32 platforms/interface.py:1060-1092 _align_hybrid_block_size: the block is aligned to
#    max(smallest kernel block, --block-size), not to 16; mamba_mixer2.py:1098 get_kv_cache_spec gives Mamba-2 a
#    prefill checkpoint block, so kv_cache_interface.py:1076 MambaSpec.max_memory_usage_bytes counts 2 + 1 pages in
#    align mode (Mamba-1 and GDN: 2; prefix caching off: 1). Both seen against the real engine in
#    tests/real_engine/test_kv_sizing.py (nemotron_h: block 128 → 256, 838,860 tokens).
def test_hybrid_block_aligns_to_the_given_block_size():
    spec = config("nvidia__NVIDIA-Nemotron-Nano-9B-v2")
    state, attn = kv_layout(spec).state_bytes_per_layer, 2 * 8 * 128 * 2  # K and V of one token, one layer
    assert kv_layout(spec).block_size == 16 * -(-state // (16 * attn)) == 1312
    assert kv_layout(spec, block_size=128).block_size == 128 * -(-state // (128 * attn)) == 1408
    assert kv_layout(spec, block_size=2048).block_size == 2048  # already covers the state page


def test_mamba2_holds_a_prefill_checkpoint_block_in_align_mode():
    nemotron, jamba = config("nvidia__NVIDIA-Nemotron-Nano-9B-v2"), config("ai21labs__AI21-Jamba-Mini-1.7")
    assert kv_layout(nemotron).state_blocks == 3
    assert kv_layout(nemotron, prefix_caching=False).state_blocks == 1
    assert kv_layout(jamba).state_blocks == 2
    layout = kv_layout(nemotron)
    full = -(-8192 // layout.block_size)
    state_groups = sum(1 for g in layout.groups if g.kind == "mamba")
    assert layout.blocks_per_request(8192, 2048) == full + 3 * state_groups


def test_jamba_prices_four_attention_layers_and_mamba1_state():
    spec = config("ai21labs__AI21-Jamba-Mini-1.7")
    assert [i for i, k in enumerate(spec.layer_types) if k == "full_attention"] == [4, 12, 20, 28]
    layout = kv_layout(spec, tp=1)
    assert layout.bytes_per_token == 4 * 8 * 128 * 2 * 2
    inner = 2 * 4096
    assert layout.state_bytes_per_layer == inner * 3 * 2 + inner * 16 * 2


def test_hybrids_are_no_longer_priced_as_full_attention_stacks():
    spec = config("nvidia__NVIDIA-Nemotron-Nano-9B-v2")
    report = fit_config(spec, [23.56], Knobs(max_model_len=131072, max_num_seqs=64, max_num_batched_tokens=2048, weights_gib=16.6))
    # 4 attention layers × 131,072 tokens × 4 KiB = 2 GiB per request, plus 27 state pages: fits on 24 GB.
    assert report.verdict in ("fits", "tight") and report.max_concurrency >= 1


# -- llama.cpp tools/server/server.cpp: -np left at 1 (or unset) → 4 slots, unified KV;
#    src/llama-kv-cache-iswa.cpp: SWA cells = pad(min(size, n_swa·(unified ? n_seq : 1) + n_ubatch), 256).
def test_llamacpp_server_slot_defaults():
    assert server_slots(None) == (4, True)
    assert server_slots(1) == (4, True)
    assert server_slots(2) == (2, False)
    assert server_slots(2, ("-kvu",)) == (2, True)
    assert server_slots(1, ("-md", "draft.gguf")) == (1, False)


def test_llamacpp_swa_cells_follow_iswa_for_unified_and_split_streams():
    spec = shipped_spec("google/gemma-3-27b-it")
    window, n_ctx, per_layer = spec.sliding_window, 32768, 2 * spec.num_kv_heads * spec.head_dim * 2
    full = spec.layer_types.count("full_attention")
    swa = spec.layer_types.count("sliding_attention")
    unified = _kv_gib(spec, n_ctx, 4, "f16", unified=True)[0]
    expected = (full * n_ctx + swa * min(n_ctx, cdiv(window * 4 + 512, 256) * 256)) * per_layer / GIB
    assert unified == pytest.approx(expected)
    split = _kv_gib(spec, n_ctx, 4, "f16", unified=False)[0]
    per_stream = n_ctx // 4
    expected_split = 4 * (full * per_stream + swa * min(per_stream, cdiv(window + 512, 256) * 256)) * per_layer / GIB
    assert split == pytest.approx(expected_split)


def test_llamacpp_slug_with_one_slot_is_priced_as_four():
    catalog = load_catalog()
    entry = catalog.get("llamacpp/gemma-3-27b-q4km")
    assert entry.max_num_seqs == 1
    report = fit_on_cards(entry, ["rtx-3090"], catalog=catalog)
    assert report.max_num_seqs == 4
    assert any("4 slots over a unified KV pool" in n for n in report.notes)


# -- vllm/engine/arg_utils.py `_set_default_args`: ≥ 70 GiB NVML total and "a100" not in the device
#    name → 1024/8192; keyed on the name, not on sm 8.0 (an A800 is sm 8.0 and gets 1024/8192).
def test_batch_defaults_key_on_nvml_total_and_device_name():
    assert default_batching(80.0, "NVIDIA A800-SXM4-80GB")[:2] == (1024, 8192)
    assert default_batching(80.0, "NVIDIA A100-SXM4-80GB")[:2] == (256, 2048)
    assert default_batching(47.5, "NVIDIA L40S")[:2] == (256, 2048)
    seqs, batched, caveat = default_batching(80.0, None)
    assert (seqs, batched) == (1024, 8192) and caveat
    spec = shipped_spec("meta-llama/Llama-3.1-8B-Instruct")
    a800 = fit_config(spec, [79.2], Knobs(max_model_len=8192, weights_gib=15.0), gpu_name="NVIDIA A800-SXM4-80GB")
    a100 = fit_config(spec, [79.2], Knobs(max_model_len=8192, weights_gib=15.0), gpu_name="NVIDIA A100-SXM4-80GB")
    assert (a800.max_num_seqs, a100.max_num_seqs) == (1024, 256)


# -- The engine version comes from the slug's pinned image tag (graph memory is budgeted from v0.21).
def test_slug_version_comes_from_its_image_tag():
    catalog = load_catalog()
    entry = catalog.get("vllm/llama-3.1-8b")
    spec = catalog.model_for(entry)
    assert knobs_for(entry, spec).version == tuple(int(x) for x in entry.image.rsplit(":v", 1)[1].split(".")[:2])
    old = entry.model_copy(update={"image": "vllm/vllm-openai:v0.10.1"})
    v021 = entry.model_copy(update={"image": "vllm/vllm-openai:v0.21.0"})
    old_report = fit_on_cards(old, ["rtx-3090"], catalog=catalog)
    v021_report = fit_on_cards(v021, ["rtx-3090"], catalog=catalog)
    # v0.21 budgets the graph pool; v0.10 carved it after the KV pool; Model Runner V2 (dense models from
    # v0.27, the pinned image) does not profile it (`profile_cudagraph_memory` returns 0).
    assert v021_report.gpus[0].cudagraph_gib > 0 and old_report.gpus[0].cudagraph_gib == 0
    if knobs_for(entry, spec).version >= (0, 27):
        assert fit_on_cards(entry, ["rtx-3090"], catalog=catalog).gpus[0].cudagraph_gib == 0


def test_hybrid_parameter_counts_match_the_published_sizes():
    # Nemotron-Nano-9B-v2 "8.89B" (model card); Jamba Mini "52B total" (AI21): counted per block kind.
    assert abs(config("nvidia__NVIDIA-Nemotron-Nano-9B-v2").param_count / 1e9 - 8.89) < 0.05
    assert abs(config("ai21labs__AI21-Jamba-Mini-1.7").param_count / 1e9 - 52) < 1.0


def test_llamacpp_concurrency_counts_full_length_requests_not_slots():
    """A unified pool of --ctx-size tokens holds --ctx-size / request-length full requests whatever the slot
    count (server.cpp: the slots share one llama_kv_cache); separate streams each hold n_ctx / n_seq."""
    catalog = load_catalog()
    entry = catalog.get("llamacpp/gemma-3-27b-q4km")
    unified = fit_on_cards(entry, ["rtx-3090"], catalog=catalog)
    assert unified.max_num_seqs == 4
    assert unified.max_concurrency == pytest.approx(unified.kv_cache_tokens / unified.max_model_len, abs=0.01)
    assert unified.max_concurrency <= unified.kv_cache_tokens / unified.max_model_len + 0.01
    split = fit_on_cards(entry.model_copy(update={"max_num_seqs": 2}), ["rtx-3090"], catalog=catalog)
    n_ctx = unified.max_model_len
    assert split.max_model_len == n_ctx // 2  # what one request can hold with two separate streams
    assert split.max_concurrency == pytest.approx(split.kv_cache_tokens / n_ctx * 2, abs=0.01)


# -- v0.28.0 vllm/engine/arg_utils.py:2582 added a tier above the H100 one: `device_memory >= 160 * GiB_bytes`
#    ("for GPUs like B200/B300 with >= 160GB memory, use the largest defaults") → 1024 seqs / 16384 batched tokens for
#    the API server. v0.27.1 has no such tier (8192). A B200 (NVML ~179 GiB) priced at 8192 on v0.28+ under-prices the
#    forward transient: optimistic. An unknown version takes the larger (costlier) batch, with a caveat.
def test_v028_batch_defaults_have_a_160_gib_tier():
    assert default_batching(179.0, "NVIDIA B200", (0, 28))[:2] == (1024, 16384)
    assert default_batching(179.0, "NVIDIA B200", (0, 27))[:2] == (1024, 8192)
    assert default_batching(140.0, "NVIDIA H200", (0, 28))[:2] == (1024, 8192)
    seqs, batched, caveat = default_batching(179.0, "NVIDIA B200", None)
    assert (seqs, batched) == (1024, 16384) and caveat
    spec = shipped_spec("meta-llama/Llama-3.1-8B-Instruct")
    b200 = fit_config(spec, [178.35], Knobs(max_model_len=8192, weights_gib=15.0, version=(0, 28)), gpu_name="NVIDIA B200")
    older = fit_config(spec, [178.35], Knobs(max_model_len=8192, weights_gib=15.0, version=(0, 27)), gpu_name="NVIDIA B200")
    assert b200.max_num_batched_tokens == 16384 and older.max_num_batched_tokens == 8192
    assert b200.available_kv_gib < older.available_kv_gib


# -- vLLM mamba_utils.py _mamba_state_dtype: `--mamba-ssm-cache-dtype` sets the temporal state's dtype; `auto` follows
#    the model dtype for Jamba (no per-model default), so a slug that pins float32 doubles the state c3 must price.
def test_a_slug_pinning_the_ssm_dtype_is_priced_with_it():
    spec = config("ai21labs__AI21-Jamba-Mini-1.7")
    knobs = Knobs(max_model_len=65536, max_num_seqs=16, max_num_batched_tokens=2048, weights_gib=50.0, tp=2, version=(0, 32))
    auto = fit_config(spec, [79.2, 79.2], knobs)
    pinned = fit_config(spec, [79.2, 79.2], replace(knobs, extra_args=("--mamba-ssm-cache-dtype", "float32")))
    inner = 2 * 4096 // 2
    assert pinned.state_bytes_per_request - auto.state_bytes_per_request == 28 * inner * 16 * 2
    assert pinned.kv_cache_tokens < auto.kv_cache_tokens
    with pytest.raises(UsageError, match="unknown Mamba SSM cache dtype"):
        fit_config(spec, [79.2, 79.2], replace(knobs, extra_args=("--mamba-ssm-cache-dtype=fp64",)))


# -- transformers >= 5 NemotronHConfig saves `layers_block_type` (configuration_nemotron_h.py `_pattern_to_list`:
#    M → "linear_attention", * → "full_attention", - → "mlp", E → "moe") and no `num_hidden_layers` (a property of the
#    list's length). vLLM reads it back through `hybrid_override_pattern`, so the Mamba-2 layers must stay Mamba-2.
def test_nemotron_h_saved_by_transformers_5_is_read_as_mamba2():
    raw = json.loads((CONFIGS / "nvidia__NVIDIA-Nemotron-Nano-9B-v2.config.json").read_text())
    names = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
    saved = {k: v for k, v in raw.items() if k not in ("hybrid_override_pattern", "num_hidden_layers")}
    saved["layers_block_type"] = [names[ch] for ch in raw["hybrid_override_pattern"]]
    spec, hub = spec_from_config(saved), config("nvidia__NVIDIA-Nemotron-Nano-9B-v2")
    assert spec.layer_types == hub.layer_types and spec.num_layers == 56
    assert kv_layout(spec).state_bytes_per_layer == kv_layout(hub).state_bytes_per_layer > 0
