"""c3's KV arithmetic against the engine itself: the same KV pool must give the same token count.

vLLM's CPU build takes its KV pool from `VLLM_CPU_KVCACHE_SPACE` (GiB, exactly) instead of profiling a
GPU, so the pool size is known and the only unknowns are the ones c3 models: bytes per token, page and
block size, layer groups and blocks per request. The engine logs `CPU KV cache size: N tokens`
(= int(blocks / blocks-per-request × max_model_len), vLLM's `get_kv_cache_capacity`); c3 must give the
same N exactly from the model's config.json. Knobs are passed explicitly on both sides, as c3 does.

Families: dense GQA (Llama), sliding-window mix (Gemma 3 text: 5 sliding + 1 global), MoE (Qwen3-MoE),
MLA (DeepSeek-V2: one latent per token, not split by heads) and the Gated-DeltaNet hybrid (Qwen3-Next:
3 GDN + 1 attention layer, state pages padded to the attention page). vLLM 0.32's CPU build runs all five.
"""

from __future__ import annotations

import signal

import pytest

from backend.catalog.configs import load_config_file
from backend.fit.bootlog import parse_boot_log
from backend.fit.kvspec import kv_layout

pytestmark = pytest.mark.real_engine

GIB = 1 << 30
BLOCK = 128  # vLLM CPU's default block size, passed explicitly
MAX_LEN = 2048
BATCHED = 2048
KNOBS = ("--block-size", str(BLOCK), "--max-num-batched-tokens", str(BATCHED), "--max-num-seqs", "8")
FAMILIES = ["dense", "sliding", "moe", "mla", "hybrid"]
#: vLLM's CPU MLA kernel only runs 16-token blocks: vllm/platforms/cpu.py overrides any --block-size for MLA
#: models (without AMX) and says so in its log. c3 prices with the block size the engine really uses.
OVERRIDES = {"mla": (16, "CPU MLA backend requires block_size=16, overriding user-specified block_size=128")}


def c3_kv_tokens(model_dir, kv_gib: int, block: int = BLOCK) -> int:
    """What c3 says the engine's `KV cache size` line will read for a pool of `kv_gib` GiB."""
    spec = load_config_file(model_dir / "config.json")
    layout = kv_layout(spec, tp=1, pp=1, kv_cache_dtype="auto", block_size=block)
    blocks = layout.num_blocks(kv_gib * GIB)
    need = layout.blocks_per_request(MAX_LEN, BATCHED)
    return int(blocks / need * MAX_LEN)


@pytest.mark.parametrize("family", FAMILIES)
def test_kv_cache_tokens_match_the_engine(real_engines, vllm_engine, family):
    engine = vllm_engine(family, *KNOBS, kv_space_gib=1, max_model_len=MAX_LEN)
    logged = engine.wait_kv_tokens(timeout=300)
    engine.stop(signal.SIGKILL, timeout=15)  # only its log was needed; a booting vLLM ignores SIGTERM
    report = parse_boot_log(engine.log())
    assert report.kv_cache_tokens == logged  # c3's boot-log reader reads the CPU line too
    block, warning = OVERRIDES.get(family, (BLOCK, None))
    if warning:
        assert warning in engine.log(), f"vLLM no longer overrides the block size for {family}: drop OVERRIDES[{family!r}]"
    assert c3_kv_tokens(real_engines.model(family), 1, block) == logged, f"{family}: c3 ≠ vLLM's CPU KV cache size {logged:,}"


def test_kv_pool_scales_with_the_space_given(real_engines, vllm_engine):
    """Twice the space, twice the tokens, on both sides (the pool really is VLLM_CPU_KVCACHE_SPACE)."""
    engine = vllm_engine("dense", *KNOBS, kv_space_gib=2, max_model_len=MAX_LEN)
    logged = engine.wait_kv_tokens(timeout=300)
    engine.stop(signal.SIGKILL, timeout=15)  # only its log was needed; a booting vLLM ignores SIGTERM
    assert logged == c3_kv_tokens(real_engines.model("dense"), 2) == 2 * c3_kv_tokens(real_engines.model("dense"), 1)
