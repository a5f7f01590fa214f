"""The stub engine's argv/env parsing and GPU attribution (pure functions, no processes)."""

from __future__ import annotations

from backend.sim.stub_engine import gpu_tokens, parse_config


def test_vllm_serve_argv_with_unknown_flags_is_accepted():
    argv = ["vllm", "serve", "Qwen/Qwen3-8B", "--port", "8011", "--served-model-name", "qwen", "q8",
            "--tensor-parallel-size", "2", "--gpu-memory-utilization=0.85", "--enforce-eager",
            "--max-num-seqs", "8", "--kv-cache-dtype", "fp8", "--max-model-len", "32768", "--trust-remote-code"]
    cfg = parse_config(argv, {})
    assert cfg["model"] == "Qwen/Qwen3-8B"
    assert cfg["served"] == ["qwen", "q8"]
    assert (cfg["port"], cfg["tp"], cfg["util"], cfg["max_model_len"]) == (8011, 2, 0.85, 32768)


def test_sglang_and_llamacpp_spellings():
    sglang = parse_config(["python3", "-m", "sglang.launch_server", "--model-path", "m/x", "--tp", "4",
                           "--mem-fraction-static", "0.8", "--port", "30000"], {})
    assert (sglang["model"], sglang["tp"], sglang["util"], sglang["port"]) == ("m/x", 4, 0.8, 30000)
    llama = parse_config(["-m", "/models/x.gguf", "--alias", "x", "-c", "8192", "-ngl", "99", "--port", "8080"], {})
    assert (llama["model"], llama["served"], llama["max_model_len"]) == ("/models/x.gguf", ["x"], 8192)


def test_env_sets_stub_behaviour_and_argv_wins():
    env = {"C3_STUB_STARTUP_DELAY": "2.5", "C3_STUB_HANG": "1", "C3_STUB_TOKENS": "7", "C3_STUB_NAME": "b1"}
    cfg = parse_config(["m", "--tokens", "3"], env)
    assert (cfg["startup_delay"], cfg["hang"], cfg["tokens"], cfg["name"]) == (2.5, True, 3, "b1")
    assert cfg["served"] == ["m"]


def test_api_key_from_vllm_env():
    assert parse_config([], {"VLLM_API_KEY": "k"})["api_key"] == "k"


def test_gpu_tokens_follow_the_masks():
    assert gpu_tokens({}, 2) == ["0", "1"]
    assert gpu_tokens({"NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b"}, 1) == ["GPU-a", "GPU-b"]
    assert gpu_tokens({"NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b", "CUDA_VISIBLE_DEVICES": "1"}, 1) == ["GPU-b"]
    assert gpu_tokens({"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VISIBLE_DEVICES": "2,3"}, 1) == ["2", "3"]
    assert gpu_tokens({"NVIDIA_VISIBLE_DEVICES": "void"}, 1) == []
    assert gpu_tokens({"CUDA_VISIBLE_DEVICES": "GPU-x"}, 1) == ["GPU-x"]
    # a runtime that ignored the mask: the override is the truth
    assert gpu_tokens({"NVIDIA_VISIBLE_DEVICES": "GPU-a", "C3_STUB_GPUS": "all"}, 1) == ["all"]


def test_a_command_naming_the_stub_itself_is_skipped():
    cfg = parse_config(["python3", "/opt/c3/stub_engine.py", "--port", "8000", "org/m"], {})
    assert (cfg["model"], cfg["port"]) == ("org/m", 8000)
    assert parse_config(["python3", "/opt/c3/stub_engine.py"], {})["model"] == "stub/model"
