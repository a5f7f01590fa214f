"""The boot-log reader on realistic lines (formats of research-fitcheck.md §1.2)."""

from __future__ import annotations

import pytest

from backend.fit.bootlog import parse_boot_log

V1_TP2 = """\
vllm-qwen-1  | (APIServer pid=1) INFO 08-14 14:05:01 [api_server.py:1896] vLLM API server version 0.27.1
vllm-qwen-1  | (Worker_TP0 pid=447) INFO 08-14 14:06:40 [gpu_model_runner.py:4216] Model loading took 15.31 GiB memory and 21.46 seconds
vllm-qwen-1  | (Worker_TP1 pid=448) INFO 08-14 14:06:40 [gpu_model_runner.py:4216] Model loading took 15.33 GiB memory and 21.50 seconds
vllm-qwen-1  | (Worker_TP1 pid=448) INFO 08-14 14:07:22 [gpu_model_runner.py:6806] Estimated CUDA graph memory: 0.36 GiB total
vllm-qwen-1  | (Worker_TP1 pid=448) INFO 08-14 14:07:22 [gpu_worker.py:578] CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization=0.8200 is equivalent to --gpu-memory-utilization=0.8048 without CUDA graph memory profiling.
vllm-qwen-1  | (Worker_TP0 pid=447) INFO 08-14 14:07:22 [gpu_worker.py:563] Available KV cache memory: 6.87 GiB
vllm-qwen-1  | (Worker_TP1 pid=448) INFO 08-14 14:07:22 [gpu_worker.py:563] Available KV cache memory: 6.81 GiB
vllm-qwen-1  | (EngineCore pid=367) INFO 08-14 14:07:23 [kv_cache_utils.py:1311] GPU KV cache size: 1,487,776 tokens
vllm-qwen-1  | (EngineCore pid=367) INFO 08-14 14:07:23 [kv_cache_utils.py:1315] Maximum concurrency for 262,144 tokens per request: 5.68x
vllm-qwen-1  | (Worker_TP0 pid=447) INFO 08-14 14:07:40 [gpu_worker.py:726] CUDA graph pool memory: 0.09 GiB (actual), 0.36 GiB (estimated), difference: 0.27 GiB (75.0%).
"""

V0 = """\
INFO 12-02 10:00:00 llm_engine.py:249] Initializing an LLM engine (v0.6.4.post1) with config: model='meta-llama/Llama-3.1-8B-Instruct'
INFO 12-02 10:00:30 model_runner.py:1077] Loading model weights took 14.9888 GB
INFO 12-02 10:00:33 worker.py:232] Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90
INFO 12-02 10:00:33 gpu_executor.py:113] # GPU blocks: 1952, # CPU blocks: 2048
INFO 12-02 10:00:33 gpu_executor.py:117] Maximum concurrency for 20000 tokens per request: 1.56x
"""

V07 = """\
INFO 02-11 07:40:45 worker.py:267] the current vLLM instance can use total_gpu_memory (23.64GiB) x gpu_memory_utilization (0.98) = 23.17GiB
INFO 02-11 07:40:45 worker.py:267] model weights take 13.95GiB; non_torch_memory takes 0.25GiB; PyTorch activation peak memory takes 0.19GiB; the rest of the memory reserved for KV Cache is 8.69GiB.
"""

SUMMARY = (
    "(Worker_TP1 pid=238) INFO 08-22 04:42:13 [gpu_worker.py:789] Free memory on device (30.5/31.4 GiB) on startup. Desired GPU memory "
    "utilization is (0.92, 28.88 GiB). Actual usage is 15.05 GiB for consumed memory (weights + non-torch), 1.59 GiB for peak activation, "
    "and 0.09 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory=12889979761` (12.0 GiB) to fit into "
    "requested memory. Current kv cache memory in use is 12.24 GiB.\n"
)

DEBUG = (
    "(EngineCore_DP0 pid=9) DEBUG 05-01 [gpu_worker.py:290] Memory profiling takes 4.12 seconds. Total non KV cache memory: 17.52GiB; "
    "torch peak memory increase: 2.31GiB; non-torch forward increase memory: 0.21GiB; weights memory: 14.99GiB.\n"
)


def test_v1_tensor_parallel_log_takes_the_minimum_rank():
    r = parse_boot_log(V1_TP2)
    assert r.engine == "vllm" and r.engine_version == "0.27.1" and not r.v0
    assert r.available_kv_gib == 6.81 and r.available_kv_gib_per_rank == [6.87, 6.81]
    assert r.weights_gib == 15.33
    assert r.kv_cache_tokens == 1_487_776
    assert r.max_concurrency == 5.68 and r.max_model_len == 262_144
    assert r.cudagraph_estimate_gib == 0.36 and r.cudagraph_actual_gib == 0.09
    assert r.gpu_memory_utilization == 0.82


def test_v0_profile_line_and_blocks():
    r = parse_boot_log(V0)
    assert r.v0 and r.engine_version == "0.6.4.post1"
    assert r.weights_gib == 14.9888 and r.available_kv_gib == 3.81
    assert r.total_gib == 23.58 and r.gpu_memory_utilization == 0.90
    assert r.gpu_blocks == 1952 and r.max_concurrency == 1.56 and r.max_model_len == 20000
    assert r.non_kv_gib == pytest.approx(23.58 * 0.9 - 3.81)


def test_v07_budget_split():
    r = parse_boot_log(V07)
    assert (r.total_gib, r.gpu_memory_utilization, r.weights_gib) == (23.64, 0.98, 13.95)
    assert (r.non_torch_gib, r.activation_gib, r.available_kv_gib) == (0.25, 0.19, 8.69)


def test_free_memory_summary_and_debug_profile():
    r = parse_boot_log(SUMMARY + DEBUG)
    assert r.total_gib == 31.4 and r.gpu_memory_utilization == 0.92
    assert r.activation_gib == 2.31  # the DEBUG line comes later and is more precise
    assert r.non_torch_gib == 0.21 and r.weights_gib == 14.99


def test_sglang_and_llamacpp_lines():
    sg = parse_boot_log("[2025-07-22 10:00:00 TP0] KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB\n")
    assert sg.engine == "sglang" and sg.kv_cache_tokens == 367_404
    lc = parse_boot_log(
        "load_tensors:        CUDA0 model buffer size = 15339.44 MiB\n"
        "llama_kv_cache:      CUDA0 KV buffer size =  2048.00 MiB\n"
        "llama_context:      CUDA0 compute buffer size =   154.02 MiB\n"
    )
    assert lc.engine == "llamacpp" and lc.llamacpp_mib == {"CUDA0": {"model": 15339.44, "kv": 2048.0, "compute": 154.02}}


def test_negative_available_and_empty_logs():
    r = parse_boot_log("(EngineCore_0 pid=5839) INFO 08-20 18:04:22 [gpu_worker.py:276] Available KV cache memory: -2.14 GiB\n")
    assert r.available_kv_gib == -2.14
    empty = parse_boot_log("hello\nworld\n")
    assert empty.engine is None and empty.available_kv_gib is None
