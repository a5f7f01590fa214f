"""The boot-log reader and `c3 bootlog` on real engines' boot logs (tests/fixtures/engines/, recorded from a
real vLLM 0.32 CPU build and llama-server by scripts/rig/record_engine_fixtures.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from backend.fit.bootlog import parse_boot_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engines"
ROOT = Path(__file__).resolve().parents[2]
VLLM_LOG = FIXTURES / "vllm-0.32.0-cpu.boot.log"
LLAMA_LOG = FIXTURES / "llama-server-0.3.36.boot.log"


def test_vllm_cpu_boot_log():
    text = VLLM_LOG.read_text()
    assert "CPU KV cache size: 2,097,152 tokens" in text  # the fixture is what the test claims it is
    report = parse_boot_log(text)
    assert report.engine == "vllm" and report.engine_version == "0.32.0"
    assert report.kv_device == "CPU"
    assert report.kv_cache_tokens == 2_097_152
    assert report.available_kv_gib == 1.0 and report.available_kv_gib_per_rank == [1.0]
    assert report.max_concurrency == 1024.0 and report.max_model_len == 2048
    assert report.weights_gib is None  # vLLM's CPU build prints no "Model loading took" line


def test_llama_server_boot_log():
    report = parse_boot_log(LLAMA_LOG.read_text())
    assert report.engine == "llamacpp" and report.kv_device == "CPU"
    assert report.llamacpp_mib == {"CPU_Mapped": {"model": 1.06}, "CPU": {"kv": 2.0, "compute": 4.01}}


def test_gpu_lines_still_say_gpu():
    line = "(EngineCore pid=1) INFO 08-14 14:07:23 [kv_cache_utils.py:1311] GPU KV cache size: 1,487,776 tokens"
    assert parse_boot_log(line).kv_device == "GPU"
    cuda = "llama_kv_cache:      CUDA0 KV buffer size =  2048.00 MiB\nllama_kv_cache:        CPU KV buffer size =    16.00 MiB"
    assert parse_boot_log(cuda).kv_device == "GPU"


def test_c3_bootlog_on_real_logs():
    for path, expected in ((VLLM_LOG, ["KV cache tokens                2,097,152", "KV pool on                     CPU"]),
                           (LLAMA_LOG, ["llama.cpp CPU buffers          kv 2.00, compute 4.01 MiB"])):
        result = subprocess.run([sys.executable, "-m", "c3", "bootlog", str(path)], cwd=ROOT, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0, result.stderr
        for line in expected:
            assert line in result.stdout, result.stdout
