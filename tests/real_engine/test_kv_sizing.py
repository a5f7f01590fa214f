"""c3's KV arithmetic against the engine itself: the same KV pool must give the same token count.

vLLM's CPU build takes its KV pool from `VLLM_CPU_KVCACHE_SPACE` (GiB, exactly) instead of profiling a
GPU, so the pool size is known and the only unknowns are the ones c3 models: bytes per token, page and
block size, layer groups and blocks per request. The engine logs `CPU KV cache size: N tokens`
(= int(blocks / blocks-per-request × max_model_len), vLLM's `get_kv_cache_capacity`); c3 must give the
same N exactly from the model's config.json. Knobs are passed explicitly on both sides, as c3 does.

Families: dense GQA (Llama), sliding-window mix (Gemma 3 text: 5 sliding + 1 global), MoE (Qwen3-MoE),
MLA (DeepSeek-V2: one latent per token, not split by heads), the Gated-DeltaNet hybrid (Qwen3-Next:
3 GDN + 1 attention layer, state pages padded to the attention page) and the two Mamba hybrids:
`nemotron_h` (Nemotron-H by `hybrid_override_pattern`: 7 Mamba-2 + 2 attention + 7 MLP layers; the fp32
state page outgrows a 128-token page, so the engine enlarges the block to 256, and Mamba-2 holds a third,
prefill-checkpoint block per request) and `jamba` (Jamba by `attn_layer_period`/`attn_layer_offset`:
14 Mamba-1 + 2 attention layers, 8 groups). vLLM 0.32's CPU build runs all seven: it has CPU kernels for
Mamba-2 (`mamba_chunk_scan_fwd_cpu`, `selective_state_update_cpu`, `causal_conv1d_*_cpu` in
vllm/model_executor/layers/mamba/ops/cpu/), and the Nemotron-H tiny model also serves. Jamba is proven for KV
sizing only: the engine boots, logs its KV line and turns healthy, but its first prefill fails with
`IndexError: Dimension out of range (expected to be in range of [-2, 1], but got 2)` at mamba_mixer.py:289
(`self.conv1d.weight.view(...size(0), ...size(2))`), and Mamba-1's prefill kernel `selective_scan_fwd` is not in
the CPU build's `torch.ops._C` — so no test here sends Jamba a request.

Two of the CPU platform's overrides depend on the host's CPU (vllm/platforms/cpu.py
`check_and_update_config`), so what the engine logs, and what c3 must price, is read from the engine's
own torch with the very calls vLLM makes (`engine_cpu`):
- with AVX-512 BF16 (`torch.cpu._is_avx512_bf16_supported()`) it forces the SSM state to float32 for
  every non-GDN Mamba backend, logged "Reset SSM cache type to float32 …": Nemotron-H is float32 anyway
  (c3's own default, from vLLM's NemotronHForCausalLMConfig); Jamba is then priced with float32, and
  without it with the GPU default (`auto`, the model dtype). (The tiny Jamba's count is the same either
  way — its state pages are padded to the 128-token attention page — so only the log line tells. A cold
  CI run saw the count match and the line missing: the host decides, not timing.)
- without AMX tiles (`torch.cpu._is_amx_tile_supported()`) the reference MLA kernel runs only 16-token
  blocks and the platform overrides `--block-size`, saying so; with AMX the AMX MLA kernel keeps 128.
The log is read once, after the KV line (both lines come from the API server's config step, before the
EngineCore that prints the KV line starts; vLLM's StreamHandler flushes every record), and before the kill.
"""

from __future__ import annotations

import json
import signal
import subprocess
from dataclasses import dataclass

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
FAMILIES = ["dense", "sliding", "moe", "mla", "hybrid", "nemotron_h", "jamba"]
SSM_RESET = "Reset SSM cache type to float32 for accelerated GDN mamba backend 'jamba'"
"""Logged for Jamba when the host has AVX-512 BF16: the CPU engine then holds the SSM state in float32."""
MLA_OVERRIDE = "CPU MLA backend requires block_size=16, overriding user-specified block_size=128"
"""Logged for MLA when the host has no AMX tiles: the reference CPU MLA kernel runs only 16-token blocks."""


@dataclass(frozen=True)
class EngineCpu:
    """What the engine's torch says about this CPU, asked the way vllm/platforms/cpu.py asks."""

    avx512_bf16: bool
    amx_tile: bool


@pytest.fixture(scope="module")
def engine_cpu(real_engines) -> EngineCpu:
    code = ("import json, torch; print(json.dumps([torch.cpu._is_avx512_bf16_supported(), "
            "torch.cpu._is_amx_tile_supported()]))")
    out = subprocess.run([str(real_engines.vllm_python), "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, f"the engine's torch cannot say what this CPU has: {out.stderr[-2000:]}"
    bf16, amx = json.loads(out.stdout.strip().splitlines()[-1])
    return EngineCpu(avx512_bf16=bool(bf16), amx_tile=bool(amx))


def host_overrides(family: str, cpu: EngineCpu) -> tuple[int, str | None, dict[str, bool]]:
    """For `family` on this host: the block size and SSM dtype the engine really uses (c3 prices with
    those), and each host-dependent log line with whether the engine must print it."""
    block, ssm_dtype, lines = BLOCK, None, {}
    if family == "mla":
        lines[MLA_OVERRIDE] = not cpu.amx_tile
        block = BLOCK if cpu.amx_tile else 16
    if family == "jamba":
        lines[SSM_RESET] = cpu.avx512_bf16
        ssm_dtype = "float32" if cpu.avx512_bf16 else None
    return block, ssm_dtype, lines


def c3_kv_tokens(model_dir, kv_gib: int, block: int = BLOCK, ssm_dtype: str | None = None) -> int:
    """What c3 says the engine's `KV cache size` line will read for a pool of `kv_gib` GiB."""
    spec = load_config_file(model_dir / "config.json")
    layout = kv_layout(spec, tp=1, pp=1, kv_cache_dtype="auto", block_size=block, ssm_dtype=ssm_dtype)
    blocks = layout.num_blocks(kv_gib * GIB)
    need = layout.blocks_per_request(MAX_LEN, BATCHED)
    return int(blocks / need * MAX_LEN)


@pytest.mark.parametrize("family", FAMILIES)
def test_kv_cache_tokens_match_the_engine(real_engines, vllm_engine, engine_cpu, family):
    engine = vllm_engine(family, *KNOBS, kv_space_gib=1, max_model_len=MAX_LEN, in_process=True)
    logged = engine.wait_kv_tokens(timeout=300)
    log = engine.log()  # everything the config step said is written before the KV line (see above)
    engine.stop(signal.SIGKILL, timeout=15)  # only its log was needed; a booting vLLM ignores SIGTERM
    report = parse_boot_log(log)
    assert report.kv_cache_tokens == logged  # c3's boot-log reader reads the CPU line too
    block, ssm_dtype, lines = host_overrides(family, engine_cpu)
    for line, expected in lines.items():
        assert (line in log) == expected, (f"{family} on a CPU with {engine_cpu}: vLLM {'no longer says' if expected else 'now says'} "
                                           f"{line!r} — its CPU override changed: update host_overrides")
    tokens = c3_kv_tokens(real_engines.model(family), 1, block, ssm_dtype)
    assert tokens == logged, f"{family}: c3 {tokens:,} ≠ vLLM's CPU KV cache size {logged:,}"


def test_kv_pool_scales_with_the_space_given(real_engines, vllm_engine):
    """Twice the space, twice the tokens, on both sides (the pool really is VLLM_CPU_KVCACHE_SPACE)."""
    engine = vllm_engine("dense", *KNOBS, kv_space_gib=2, max_model_len=MAX_LEN, in_process=True)
    logged = engine.wait_kv_tokens(timeout=300)
    engine.stop(signal.SIGKILL, timeout=15)  # only its log was needed; a booting vLLM ignores SIGTERM
    assert logged == c3_kv_tokens(real_engines.model("dense"), 2) == 2 * c3_kv_tokens(real_engines.model("dense"), 1)
