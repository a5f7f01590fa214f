"""Issue 15, second pass: what vLLM holds per rank beyond the checkpoint, priced from the engine's
source — the rotary cos/sin cache built at load, the vision tower Llama 4 ships, and the fused-MoE
workspace that outlives the profile forward. Each test names the source and a logged number."""

from __future__ import annotations

from pathlib import Path

from backend.catalog.specs import shipped_spec
from backend.fit.overhead import activation_gib, moe_workspace_bytes
from backend.fit.weights import rank_weights_gib
from tests.fit.rows import boot_row

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3
SCOUT = "meta-llama/Llama-4-Scout-17B-16E-Instruct"


def _logged(point_id: str) -> dict:
    return boot_row(point_id)["logged"]


def _weights(repo: str, variant: str = "bf16"):
    return next(v for v in shipped_spec(repo).weights if v.name == variant)


# -- vllm/model_executor/layers/rotary_embedding/base.py `RotaryEmbedding.__init__` registers
#    `cos_sin_cache` = `_compute_cos_sin_cache()`: `arange(max_position_embeddings)` × rotary_dim,
#    cast to the model dtype; llama4.py passes `max_position=config.max_position_embeddings`.
def test_rope_cache_is_positions_times_rotary_dim_in_the_model_dtype():
    assert shipped_spec(SCOUT).rope_cache_bytes == 10_485_760 * 128 * 2  # 2.5 GiB on every rank
    assert shipped_spec("meta-llama/Llama-3.1-8B-Instruct").rope_cache_bytes == 131_072 * 128 * 2


# -- `LinearScalingRotaryEmbedding._compute_cos_sin_cache`: `max_len = max_position × factor`;
#    Gemma 3 builds it for the global layers (factor 8) and a plain one for the sliding layers
#    (`rope_local_base_freq`). YaRN (`YaRNScalingRotaryEmbedding`): original × factor rows.
def test_scaled_ropes_build_more_rows():
    gemma = shipped_spec("google/gemma-3-12b-it")
    assert gemma.rope_cache_bytes == (131_072 * 8 + 131_072) * 256 * 2
    oss = shipped_spec("openai/gpt-oss-20b")
    assert oss.rope_cache_bytes == 4096 * 32 * 64 * 2


def test_the_rope_cache_is_what_bf16_checkpoints_load_beyond_their_bytes():
    # Llama-3.1-8B, RTX 3090 (vllm#10517): "Loading model weights took 14.9888 GB" for a
    # 16,060,522,496-byte checkpoint; Gemma-3-12B on H100 v0.19 (llm-d-planner): 23.31 GiB.
    llama = rank_weights_gib(shipped_spec("meta-llama/Llama-3.1-8B-Instruct"), _weights("meta-llama/Llama-3.1-8B-Instruct").bytes, tp=1, pp=1)[0]
    assert abs(llama - _logged("llama31-8b-3090-v0-20k")["weights_gib"]) < 0.005
    gemma = rank_weights_gib(shipped_spec("google/gemma-3-12b-it"), _weights("google/gemma-3-12b-it").bytes, tp=1, pp=1)[0]
    assert abs(gemma - _logged("planner-google-gemma-3-12b-it-h100-tp1--8192")["weights_gib"]) < 0.1


# -- transformers Llama4VisionModel / vllm mllama4.py: the checkpoint carries a 34-layer ViT, its
#    pixel-shuffle adapter and the projector (TP-sharded by default: `mm_encoder_tp_mode` weights).
def test_llama4_scout_counts_the_hub_parameters():
    spec = shipped_spec(SCOUT)
    assert spec.has_vision
    assert spec.vision_param_count == 871_932_416
    assert spec.param_count + spec.vision_param_count == 108_641_793_536  # HF safetensors BF16 count
    assert _weights(SCOUT).bytes == 108_641_793_536 * 2


def test_llama4_scout_rank_weights_match_the_log():
    # llm-d-planner v0.19.0, 4× H100, TP 4: "Model loading took 53.12 GiB memory" per rank —
    # 202.4 GiB / 4 + the 2.5 GiB rotary cache every rank builds for 10,485,760 positions.
    per_rank = rank_weights_gib(shipped_spec(SCOUT), _weights(SCOUT).bytes, tp=4, pp=1)[0]
    assert abs(per_rank - _logged("planner-meta-llama-llama-4-scout-h100-tp4--8192")["weights_gib"]) < 0.1


# -- vllm/v1/worker/workspace.py `WorkspaceManager`: one scratch buffer that only grows and lives as
#    long as the worker; modular_kernel.py `_allocate_buffers` takes the fused-MoE workspace13/2 from
#    it (vllm#27532), so the MoE scratch of the profile forward is still held when the sampler runs.
def test_moe_workspace_outlives_the_forward_from_v0_12():
    spec = shipped_spec("Qwen/Qwen3-30B-A3B")
    # TritonExperts.workspace_shapes at M = 8192: (M, 8, max(1536, 2048)) + (M, 8, 768), bf16.
    assert moe_workspace_bytes(spec, tp=1, tokens=8192) == 8192 * 8 * (2048 + 768) * 2
    def peak(version):
        return activation_gib(spec, tp=1, max_num_batched_tokens=8192, max_num_seqs=1024, version=version)

    # llm-d-planner v0.19.0, H100: "torch peak memory increase: 2.68GiB".
    logged = _logged("planner-qwen-qwen3-30b-a3b-h100-tp1--8192")["activation_gib"]
    assert logged - 0.05 <= peak((0, 19)) <= logged + 0.15
    # v0.11 freed the scratch after the forward; an unknown version is priced with it (safe side).
    assert abs(peak((0, 12)) - peak((0, 11)) - 8192 * 8 * (2048 + 768) * 2 / GIB) < 1e-9
    assert peak(None) >= peak((0, 12))
    dense = shipped_spec("Qwen/Qwen3-8B")
    assert moe_workspace_bytes(dense, tp=1, tokens=8192) == 0


def test_mla_moe_workspace_matches_deepseek_v2_lite():
    # llm-d-planner v0.19.0, H100: DeepSeek-V2-Lite "torch peak memory increase: 1.93GiB".
    spec = shipped_spec("deepseek-ai/DeepSeek-V2-Lite-Chat")
    predicted = activation_gib(spec, tp=1, max_num_batched_tokens=8192, max_num_seqs=1024, version=(0, 19))
    logged = _logged("planner-deepseek-ai-deepseek-v2--h100-tp1--8192")["activation_gib"]
    assert logged <= predicted <= logged + 0.15
