"""Engine adapters render exact argv lists."""

from __future__ import annotations

import pytest

from backend.errors import Refused
from backend.models import CatalogEntry
from backend.runtime.engines import render


def entry(**kw) -> CatalogEntry:
    base = dict(slug="vllm/qwen3-8b", engine="vllm", image="vllm/vllm-openai:v0.11.0", model="Qwen/Qwen3-8B")
    base.update(kw)
    return CatalogEntry(**base)


def test_vllm_argv_has_every_flag_in_order():
    e = entry(tp=2, pp=1, max_model_len=32768, gpu_memory_utilization=0.92, kv_cache_dtype="fp8", max_num_seqs=16, max_num_batched_tokens=4096, extra_args=("--enable-prefix-caching",))
    cmd = render(e)
    assert cmd.argv == [
        "vllm", "serve", "Qwen/Qwen3-8B", "--served-model-name", "Qwen/Qwen3-8B", "qwen3-8b",
        "--tensor-parallel-size", "2", "--pipeline-parallel-size", "1", "--max-model-len", "32768",
        "--gpu-memory-utilization", "0.92", "--kv-cache-dtype", "fp8", "--max-num-seqs", "16",
        "--max-num-batched-tokens", "4096", "--host", "0.0.0.0", "--port", "8000", "--enable-prefix-caching",
    ]
    assert cmd.container_port == 8000 and cmd.health_path == "/v1/models"


def test_vllm_auto_kv_dtype_and_unset_limits_are_left_to_the_engine():
    argv = render(entry(revision="abc123")).argv
    assert "--kv-cache-dtype" not in argv and "--max-model-len" not in argv and "--max-num-seqs" not in argv
    assert argv[argv.index("--revision") + 1] == "abc123"


def test_llamacpp_argv_uses_hf_quant_split_and_cache_env():
    e = entry(slug="llamacpp/qwen3-8b-q4", engine="llamacpp", image="ghcr.io/ggml-org/llama.cpp:server-cuda", model="Qwen/Qwen3-8B-GGUF",
              weights="gguf-q4_k_m", tp=2, max_model_len=16384, max_num_seqs=4, kv_cache_dtype="q8_0")
    cmd = render(e)
    assert cmd.argv == [
        "/app/llama-server", "-hf", "Qwen/Qwen3-8B-GGUF:Q4_K_M", "--alias", "Qwen/Qwen3-8B-GGUF", "-c", "16384", "-ngl", "999",
        "-np", "4", "-sm", "layer", "-ts", "1,1", "-ctk", "q8_0", "-ctv", "q8_0", "--host", "0.0.0.0", "--port", "8080",
    ]
    assert cmd.container_port == 8080
    assert cmd.env["LLAMA_CACHE"].startswith("/root/.cache/huggingface")


def test_llamacpp_local_file_uses_m():
    argv = render(entry(engine="llamacpp", model="/models/x.gguf")).argv
    assert argv[1:3] == ["-m", "/models/x.gguf"] and "-sm" not in argv


def test_sglang_argv():
    e = entry(slug="sglang/qwen3-8b", engine="sglang", image="lmsysorg/sglang:v0.5", tp=4, pp=2, gpu_memory_utilization=0.85, max_model_len=8192, max_num_seqs=32)
    argv = render(e).argv
    assert argv[:5] == ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]
    assert argv[argv.index("--tp") + 1] == "4" and argv[argv.index("--pp-size") + 1] == "2"
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.85"
    assert argv[argv.index("--context-length") + 1] == "8192"
    assert argv[argv.index("--max-running-requests") + 1] == "32"
    assert argv[-2:] == ["--port", "30000"]


def test_custom_is_verbatim_and_needs_command_and_port():
    e = entry(slug="custom/s", engine="custom", image="x:1", model="", command=("/bin/server", "--port", "9000"), container_port=9000, health_path="/health", extra_args=("-v",))
    cmd = render(e)
    assert cmd.argv == ["/bin/server", "--port", "9000", "-v"]
    assert (cmd.container_port, cmd.health_path) == (9000, "/health")
    with pytest.raises(Refused, match="no command"):
        render(entry(slug="custom/t", engine="custom", model=""))
    with pytest.raises(Refused, match="container_port"):
        render(entry(slug="custom/t", engine="custom", model="", command=("/x",)))


def test_no_secret_ever_lands_in_argv(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    for engine in ("vllm", "llamacpp", "sglang"):
        assert not any("hf_secret" in a for a in render(entry(engine=engine)).argv)
