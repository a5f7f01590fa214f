"""vLLM's `--kv-cache-memory-bytes` (the KV pool per rank, set outright) and its null block, priced as the engine does
(issue 27; the same rules are checked against a real vLLM 0.32 in tests/real_engine/test_fit_oracle.py)."""

from __future__ import annotations

import json

from backend.catalog.configs import load_config_file
from backend.catalog.specs import MODELS_DIR
from backend.fit import fit_config
from backend.fit.plan import Knobs
from backend.fit.vllm import explicit_kv_bytes
from tests.fit.test_cli import LLAMA, run

BLOCK = 16 * 131072
"""Llama-3.1-8B: 131,072 KV bytes per token, 16-token blocks."""
KNOBS = dict(engine="vllm", tp=1, max_num_seqs=8, max_num_batched_tokens=2048, weights_gib=14.99)


def _fit(version: tuple[int, int] | None, kv_bytes: int, length: int | None = None):
    spec = load_config_file(MODELS_DIR / "meta-llama__Llama-3.1-8B-Instruct.config.json")
    return fit_config(spec, [79.2], Knobs(**KNOBS, version=version, kv_cache_memory_bytes=kv_bytes, max_model_len=length))


def test_the_pool_is_the_bytes_given_whatever_the_card():
    report = _fit((0, 32), 100 * BLOCK + BLOCK // 2)
    assert report.kv_blocks == 100 and report.gpus[0].kv_blocks == 100
    # gpu_memory_utilization no longer decides it: the same bytes on a larger card give the same pool.
    spec = load_config_file(MODELS_DIR / "meta-llama__Llama-3.1-8B-Instruct.config.json")
    larger = fit_config(spec, [139.8], Knobs(**KNOBS, version=(0, 32), kv_cache_memory_bytes=100 * BLOCK + BLOCK // 2))
    assert larger.kv_blocks == 100


def test_one_block_is_the_null_block_from_0_28():
    # vllm/v1/core/kv_cache_utils.py (vllm#47272, v0.28.1/v0.29): one request may hold num_blocks − 1 blocks.
    assert _fit((0, 32), 100 * BLOCK).max_model_len_fits == 99 * 16
    assert _fit(None, 100 * BLOCK).max_model_len_fits == 99 * 16  # unknown version: the costlier side
    assert _fit((0, 27), 100 * BLOCK).max_model_len_fits == 100 * 16
    refused = _fit((0, 32), 100 * BLOCK, length=100 * 16)
    assert refused.verdict == "wont-fit" and "null block" in refused.reasons[0]
    assert _fit((0, 27), 100 * BLOCK, length=100 * 16).verdict in ("fits", "tight")
    # The pool itself keeps every block: vLLM's KV cache size line counts all of them.
    assert _fit((0, 32), 100 * BLOCK, length=99 * 16).kv_cache_tokens == 100 * 16


def test_more_than_the_card_holds_is_wont_fit():
    report = _fit((0, 32), 70 << 30)
    assert report.verdict == "wont-fit" and "--kv-cache-memory-bytes" in report.reasons[0]


def test_a_slug_passing_the_flag_is_priced_with_it():
    assert explicit_kv_bytes(Knobs(extra_args=("--kv-cache-memory-bytes", "2G"))) == 2 * 10**9
    assert explicit_kv_bytes(Knobs(extra_args=("--kv-cache-memory-bytes=3Gi",))) == 3 << 30
    assert explicit_kv_bytes(Knobs(extra_args=("--kv-cache-memory-bytes", "123456"))) == 123456
    assert explicit_kv_bytes(Knobs(extra_args=("--kv-cache-memory-bytes", "lots"))) is None
    assert explicit_kv_bytes(Knobs(kv_cache_memory_bytes=5, extra_args=("--kv-cache-memory-bytes", "7"))) == 5


def test_cli_takes_the_budget_and_max_context_finds_the_engines_length(capsys):
    code, out, err = run(capsys, "fit", "--config", LLAMA, "--vram-gib", "79.2", "--tp", "1", "--engine-version", "0.32.0",
                         "--weights-gib", "14.99", "--max-num-seqs", "8", "--max-num-batched-tokens", "2048",
                         "--kv-cache-memory-bytes", str(100 * BLOCK + 1), "--max-context", "--json")
    data = json.loads(out)
    assert code == 0, err
    assert data["kv_blocks"] == 100 and data["max_context"]["tokens"] == 99 * 16 and data["max_context"]["kv_blocks"] == 100
    code, _, err = run(capsys, "fit", "vllm/llama-3.1-8b", "--card", "rtx-3090", "--kv-cache-memory-bytes", "1000")
    assert code == 2 and "only go with --config" in err
