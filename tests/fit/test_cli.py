"""`c3 fit` and `c3 catalog` through the real CLI entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.catalog.specs import MODELS_DIR
from c3.cli import main

ROOT = Path(__file__).resolve().parents[2]
LLAMA = str(MODELS_DIR / "meta-llama__Llama-3.1-8B-Instruct.config.json")
QWEN32 = str(MODELS_DIR / "Qwen__Qwen3-32B.config.json")
FIELDS = {"verdict", "kv_bytes_per_token", "kv_cache_tokens", "max_concurrency", "max_model_len_fits", "available_kv_gib", "gpus"}
GPU_FIELDS = {"total_gib", "budget_gib", "weights_gib", "activation_gib", "non_torch_gib", "cudagraph_gib", "available_kv_gib"}


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert lines and lines[0].startswith("c3: error: "), err
    assert all(line.startswith("hint: ") for line in lines[1:]) and len(lines) <= 2, err
    assert "Traceback" not in err
    return lines[0]


def test_config_form_json_has_the_contract_fields_and_exact_kv(capsys):
    code, out, _ = run(capsys, "fit", "--config", LLAMA, "--vram-gib", "79.2", "--tp", "1", "--max-model-len", "32768", "--json")
    data = json.loads(out)
    assert code == 0 and FIELDS <= set(data) and data["kv_bytes_per_token"] == 131072
    assert len(data["gpus"]) == 1 and GPU_FIELDS <= set(data["gpus"][0])
    code, out, _ = run(capsys, "fit", "--config", QWEN32, "--vram-gib", "79.2,79.2", "--tp", "2", "--json")
    data = json.loads(out)
    assert data["kv_bytes_per_token"] == 64 * 4 * 128 * 2 * 2 == 131072 and len(data["gpus"]) == 2
    assert data["available_kv_gib"] == min(g["available_kv_gib"] for g in data["gpus"])


def test_slug_on_cards_and_heterogeneous_human_output(capsys):
    code, out, _ = run(capsys, "fit", "vllm/gemma-3-27b-fp8-tp2", "--card", "rtx-3090,rtx-5090")
    assert code == 0 and "rtx-3090" in out and "rtx-5090" in out and "KV bytes/token" in out
    assert out.strip().splitlines()[-1].startswith("  note:") or "fits" in out


def test_gpus_form_uses_the_probe(capsys, monkeypatch):
    monkeypatch.setenv("C3_RIG", "demo")
    code, out, _ = run(capsys, "fit", "vllm/llama-3.1-8b", "--gpus", "0", "--json")
    data = json.loads(out)
    assert code == 0 and data["gpus"][0]["index"] == 0 and data["kv_bytes_per_token"] == 131072
    code, _, err = run(capsys, "fit", "vllm/llama-3.1-8b", "--gpus", "9")
    assert code == 1 and "not on this machine" in assert_one_error(err)


def test_exit_codes(capsys):
    code, out, err = run(capsys, "fit", "vllm/gpt-oss-120b", "--card", "rtx-3090")
    assert code == 1 and "× wont-fit" in out and "wont-fit: rtx-3090: no memory left" in assert_one_error(err)
    code, _, err = run(capsys, "fit", "vllm/qwen3-next-80b-fp8-tp2", "--card", "rtx-3090,rtx-3090")
    assert code == 1 and ": incompatible-hw: " in assert_one_error(err)
    code, _, err = run(capsys, "fit", "vllm/nope", "--card", "rtx-3090")
    assert code == 1 and "unknown slug" in assert_one_error(err)
    code, _, err = run(capsys, "fit", "vllm/llama-3.1-8b", "--card", "rtx-9999")
    assert code == 1 and "unknown card" in assert_one_error(err)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["fit"], "give a SLUG"),
        (["fit", "vllm/llama-3.1-8b"], "exactly one of --gpus and --card"),
        (["fit", "vllm/llama-3.1-8b", "--gpus", "0", "--card", "rtx-3090"], "exactly one"),
        (["fit", "vllm/llama-3.1-8b", "--card", "rtx-3090", "--tp", "2"], "only go with --config"),
        (["fit", "--config", LLAMA], "needs --vram-gib and --tp"),
        (["fit", "--config", LLAMA, "--vram-gib", "24", "--tp", "0"], "--tp"),
        (["fit", "--config", LLAMA, "--vram-gib", "-1", "--tp", "1"], "--vram-gib"),
        (["fit", "--config", LLAMA, "--vram-gib", "inf", "--tp", "1"], "--vram-gib"),
        (["fit", "--config", LLAMA, "--vram-gib", "24,24,24", "--tp", "2"], "needs 2"),
        (["fit", "--config", LLAMA, "--vram-gib", "24", "--tp", "1", "--kv-dtype", "int3"], "--kv-dtype"),
        (["fit", "--config", LLAMA, "--vram-gib", "24", "--tp", "1", "--gpu-mem-util", "1.5"], "--gpu-mem-util"),
        (["fit", "--config", "/does/not/exist.json", "--vram-gib", "24", "--tp", "1"], "no such file"),
        (["fit", "vllm/llama-3.1-8b", "--config", LLAMA], "not both"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, args, needle):
    code, _, err = run(capsys, *args)
    assert code == 2
    assert needle in assert_one_error(err)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    vram=st.text(alphabet="0123456789.,-eE naif", max_size=12),
    tp=st.text(alphabet="0123456789-x ", max_size=4),
    kv=st.sampled_from(["auto", "bf16", "fp8", "FP8_E5M2", "", "int4", "fp8_e4m3 "]),
)
def test_fuzzed_flags_never_traceback(capsys, vram, tp, kv):
    code, out, err = run(capsys, "fit", "--config", LLAMA, "--vram-gib", vram, "--tp", tp, "--kv-dtype", kv, "--json")
    assert "Traceback" not in err
    if code == 2:
        assert_one_error(err)
    else:
        assert code in (0, 1) and json.loads(out)["kv_bytes_per_token"] > 0


def test_catalog_json_and_fits_on(capsys, monkeypatch):
    code, out, _ = run(capsys, "catalog", "--json")
    entries = json.loads(out)["entries"]
    assert code == 0 and len(entries) >= 25
    assert {"slug", "engine", "model", "tp", "pp", "default_port", "status"} <= set(entries[0])
    monkeypatch.setenv("C3_RIG", "demo")
    code, out, _ = run(capsys, "catalog", "--fits-on", "0,1", "--json")
    priced = json.loads(out)["entries"]
    assert code == 0 and priced and all(e["tp"] * e["pp"] <= 2 and "verdict" in e for e in priced)
    code, out, _ = run(capsys, "catalog")
    assert code == 0 and "vllm/llama-3.1-8b" in out
    for args in (("catalog", "--fits-on", "0,9"), ("fit", "vllm/llama-3.1-8b", "--gpus", "9")):
        code, out, err = run(capsys, *args)
        assert code == 1 and out == "" and "GPU 9 is not on this machine (GPUs: 0, 1, 2, 3)" in assert_one_error(err)


def test_malformed_catalog_d_is_exit_2(capsys, tmp_path, monkeypatch):
    folder = tmp_path / "h" / "catalog.d"
    folder.mkdir(parents=True)
    (folder / "bad.yaml").write_text("entries: [\n")
    monkeypatch.setenv("C3_HOME", str(tmp_path / "h"))
    code, _, err = run(capsys, "catalog")
    assert code == 2 and "bad.yaml" in assert_one_error(err)


def test_console_script_subprocess():
    """The installed entry point, as a user runs it."""
    result = subprocess.run(
        [sys.executable, "-m", "c3", "fit", "--config", LLAMA, "--vram-gib", "23.56", "--tp", "1", "--max-model-len", "8192", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["kv_bytes_per_token"] == 131072


def test_gpus_without_any_probe_is_exit_3(capsys, monkeypatch):
    import backend.wiring as wiring
    from backend.errors import EnvironmentProblem

    def no_probe(*_a, **_k):
        raise EnvironmentProblem("no GPUs to read: NVML is not available and C3_RIG is not set")

    monkeypatch.setattr(wiring, "open_probe", no_probe)
    code, _, err = run(capsys, "fit", "vllm/llama-3.1-8b", "--gpus", "0")
    assert code == 3 and "no GPUs" in assert_one_error(err)


def test_defaults_are_named_in_the_output(capsys):
    code, out, _ = run(capsys, "fit", "--config", LLAMA, "--vram-gib", "23.56", "--tp", "1", "--max-model-len", "8192")
    assert code == 0 and "max_num_seqs 256" in out and "max_num_batched_tokens 2048" in out
    code, out, _ = run(capsys, "fit", "--config", LLAMA, "--vram-gib", "79.2", "--tp", "1", "--engine-version", "0.27.1", "--json")
    assert json.loads(out)["gpu_memory_utilization"] == 0.92


def test_gpu_name_sets_vllm_batch_defaults_on_config(capsys):
    # vllm/engine/arg_utils.py: "a100" in the device name keeps 256/2048 on an 80 GB card.
    base = ("fit", "--config", LLAMA, "--vram-gib", "79.2", "--tp", "1", "--weights-gib", "15", "--engine-version", "0.27.1", "--json")
    code, out, _ = run(capsys, *base, "--gpu-name", "NVIDIA A100-SXM4-80GB")
    assert code == 0 and json.loads(out)["max_num_seqs"] == 256
    code, out, _ = run(capsys, *base, "--gpu-name", "NVIDIA H100 80GB HBM3")
    assert code == 0 and json.loads(out)["max_num_seqs"] == 1024
    code, _, err = run(capsys, "fit", "vllm/llama-3.1-8b", "--card", "rtx-3090", "--gpu-name", "NVIDIA A100-SXM4-80GB")
    assert code == 2 and "--gpu-name" in assert_one_error(err)


def test_estimated_weights_are_never_fits(capsys):
    code, out, _ = run(capsys, "fit", "--config", LLAMA, "--vram-gib", "79.2", "--tp", "1", "--max-model-len", "8192", "--json")
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "tight" and "estimated" in report["reasons"][0]
