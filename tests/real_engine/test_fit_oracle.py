"""The engines themselves as the oracle for `c3 fit … --max-context` (issue 27).

vLLM: under an explicit KV budget (`--kv-cache-memory-bytes`, which c3's `--config` form takes too) the engine's own
auto-fit (`--max-model-len auto`: vllm/v1/core/kv_cache_utils.py `_auto_fit_max_model_len`, logged "Auto-fit
max_model_len: reduced from X to Y") must give the context `c3 fit --config … --max-context --json` finds, to the
token; and c3's pool must be the engine's: `kv_blocks` = `num_gpu_blocks` and `kv_cache_tokens` = `kv_cache_size_tokens`
on the `vllm:cache_config_info` gauge of /metrics (for a single-group model that is `num_gpu_blocks × block_size`).
The budgets are chosen to end mid-block (a floor must be taken) and below the model's 4,096 positions (the memory
bound, not the model's, must bind). vLLM from vllm#47272 (in 0.32) keeps one block back for BlockPool's null block
when it auto-fits: a request may hold `num_gpu_blocks − 1` blocks, which c3 prices (backend/fit/vllm.py
`usable_blocks`); without it c3 answers one block more for every family here.

llama.cpp: its own `llama-fit-params` (the `--fit` logic of common/fit.cpp, run without a server) prints the KV
cache it sizes ("llama_kv_cache: size = X MiB (N cells, …)") and, under a free-memory target it cannot meet, the
context it shrinks to ("context size reduced from 4096 to Y"). c3's llama.cpp KV estimate must equal the former at
the printed precision (0.01 MiB, well inside 1 %), and the context c3's per-token cost gives for the memory that
separates two targets must equal the engine's (each of its picks is floored to 256 cells).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from backend.catalog.configs import load_config_file
from backend.fit.llamacpp import _kv_gib
from backend.fit.plan import GIB
from tests.fit.test_cli import run
from tests.real_engine.test_kv_sizing import engine_cpu, host_overrides  # noqa: F401 - `engine_cpu` is a fixture

pytestmark = pytest.mark.real_engine

MIB = 1 << 20
BATCHED = 2048
KNOBS = ("--max-num-batched-tokens", str(BATCHED), "--max-num-seqs", "8")
BUDGETS = {"dense": 22 * 65536 + 1000, "sliding": 118 * 32768 + 1000, "moe": 22 * 98304 + 1000, "mla": 195 * 5120 + 1000,
           "hybrid": 30 * 32768 + 1000, "nemotron_h": 24 * 131072 + 1000, "jamba": 36 * 65536 + 1000}
"""--kv-cache-memory-bytes per family: a whole number of the engine's blocks (64 KiB for dense at 128 tokens, 32 KiB for
the Gemma 3 mix, 96 KiB MoE, 5 KiB MLA at the 16-token blocks of a host without AMX, 32 KiB Qwen3-Next, 128 KiB
Nemotron-H at 256 tokens, 64 KiB Jamba) and 1,000 bytes more: the floor must drop the rest, and one byte more per token
and layer would cost more than those 1,000 (a block fewer). Each auto-fits to between 2,688 and 3,104 of the 4,096
tokens the models allow."""
AUTO_FIT = re.compile(r"Auto-fit max_model_len: reduced from (\d+) to (\d+)")
CONTEXT_REDUCED = re.compile(r"context size reduced from (\d+) to (\d+)")
KV_SIZE = re.compile(r"llama_kv_cache: size =\s+([\d.]+) MiB \(\s*(\d+) cells,\s+(\d+) layers,\s+(\d+)/(\d+) seqs\)")


def cache_config_info(url: str) -> dict[str, str]:
    """The labels of vLLM's `vllm:cache_config_info` gauge."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as reply:
        text = reply.read().decode()
    line = next(ln for ln in text.splitlines() if ln.startswith("vllm:cache_config_info{"))
    return dict(re.findall(r'(\w+)="([^"]*)"', line[line.index("{") + 1: line.rindex("}")]))


def c3_max_context(capsys, config: Path, budget: int, block: int) -> dict:
    """`c3 fit --config … --max-context --json` with the knobs the engine was started with."""
    code, out, err = run(capsys, "fit", "--config", str(config), "--vram-gib", "16", "--tp", "1", "--engine-version", "0.32.0",
                         "--block-size", str(block), "--max-num-seqs", "8", "--max-num-batched-tokens", str(BATCHED),
                         "--kv-cache-memory-bytes", str(budget), "--max-context", "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("family", list(BUDGETS))
def test_max_context_is_vllms_own_auto_fit(real_engines, vllm_engine, engine_cpu, capsys, family):  # noqa: F811
    budget = BUDGETS[family]
    block, _, _ = host_overrides(family, engine_cpu)
    engine = vllm_engine(family, "--block-size", "128", *KNOBS, "--kv-cache-memory-bytes", str(budget), kv_space_gib=None,
                         max_model_len="auto", in_process=True)
    engine.wait_healthy(300)
    gauge = cache_config_info(engine.url)
    log = engine.log()
    engine.stop(signal.SIGKILL, timeout=15)
    found = AUTO_FIT.search(log)
    assert found, f"{family}: vLLM logged no auto-fit reduction:\n{log[-3000:]}"
    model_max, engine_len = int(found.group(1)), int(found.group(2))
    assert gauge["kv_cache_memory_bytes"] == str(budget)  # the pool really is the budget given, on both sides

    data = c3_max_context(capsys, real_engines.model(family) / "config.json", budget, block)
    got = data["max_context"]
    assert (got["model_max"], got["bound"]) == (model_max, "memory")
    assert got["tokens"] == engine_len, f"{family}: c3 --max-context {got['tokens']:,} ≠ vLLM auto-fit {engine_len:,}"
    assert data["kv_blocks"] == int(gauge["num_gpu_blocks"]), f"{family}: c3 {data['kv_blocks']} blocks ≠ vLLM {gauge['num_gpu_blocks']}"
    assert data["kv_cache_tokens"] == int(gauge["kv_cache_size_tokens"])
    if data["kv_groups"] == 1:  # one group: the pool's tokens are its blocks × block size
        assert data["kv_cache_tokens"] == int(gauge["num_gpu_blocks"]) * int(gauge["block_size"])
    print(f"{family}: budget {budget:,} B → vLLM auto-fit {engine_len:,} (of {model_max:,}), {gauge['num_gpu_blocks']} blocks of "
          f"{data['block_size']}, {gauge['kv_cache_size_tokens']} tokens; c3 {got['tokens']:,}, {data['kv_blocks']} blocks")


def fit_params(real_engines, tmp_path: Path, *args: str) -> str:
    """What llama-fit-params says (verbose), run on the tiny GGUF in `tmp_path`."""
    out = subprocess.run([str(real_engines.fit_params), "-m", str(real_engines.gguf), "-v", *args], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout + out.stderr


@pytest.mark.parametrize(("args", "n_seq"), [(("-c", "4096"), 1), (("-c", "1000"), 1), (("-c", "16384", "-np", "4"), 4)])
def test_llamacpp_kv_estimate_is_llama_fit_params_own(real_engines, tmp_path, args, n_seq):
    """The KV cache c3 prices for llama.cpp is the one llama.cpp sizes (cells padded to 256, one stream per sequence).
    llama-fit-params runs the plain context (not llama-server's 4 unified slots for -np 1), so c3's function is given
    the streams the log reports."""
    found = KV_SIZE.search(fit_params(real_engines, tmp_path, *args, "--fit", "off"))
    assert found, "llama-fit-params printed no KV size"
    engine_mib, seqs = float(found.group(1)), int(found.group(5))
    assert seqs == n_seq
    spec = load_config_file(real_engines.model("dense") / "config.json")  # the GGUF is the dense tiny model, converted
    gib, _ = _kv_gib(spec, int(args[1]), n_seq, "f16", unified=False)
    c3_mib = gib * GIB / MIB
    assert round(c3_mib, 2) == engine_mib, f"{args}: c3 {c3_mib:.4f} MiB ≠ llama.cpp {engine_mib:.2f} MiB"
    assert abs(c3_mib - engine_mib) <= 0.01 * engine_mib
    print(f"{' '.join(args)}: llama.cpp {engine_mib:.2f} MiB in {found.group(2)} cells × {seqs} seq(s); c3 {c3_mib:.4f} MiB")


COMPUTE = re.compile(r"CPU compute buffer size =\s+([\d.]+) MiB")
FILE_SIZE = re.compile(r"file size\s+=\s+([\d.]+) MiB")
HOST_TOTAL = re.compile(r"vs\. (\d+) MiB of total host memory")


def host_ram_bytes() -> int:
    """What llama.cpp's CPU device reports as free and total (ggml-cpu.cpp `ggml_backend_cpu_device_get_memory`:
    `sysconf(_SC_PHYS_PAGES) × sysconf(_SC_PAGE_SIZE)` for both — it fits against all of the host's RAM)."""
    import os

    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("spare_mib", [4, 7])
def test_llamacpp_fit_context_follows_c3s_kv(real_engines, tmp_path, spare_mib):
    """llama.cpp's `--fit`, held to a free-memory target it cannot meet at the trained 4,096 cells (`--fit-target`
    = host RAM − `spare_mib`, `--fit-ctx 256`), shrinks the context by common/fit.cpp's own rule: it measures its use U
    at the smallest and the largest context and interpolates, `n_ctx = 256 + 3840 × (T − U(256)) / (U(4096) − U(256))`,
    floored to 256 cells. Its pick must follow from that rule with c3's KV estimate for the two contexts and the model
    and compute buffers the engine printed: the KV term is c3's formula, the rest is the engine's own measurement.

    c3's own `--max-context` for llama.cpp is not that number, for explained reasons: c3 prices a GPU (a 0.4 GiB CUDA
    context, 0.1 GiB of graph headroom, logits and scratch over a full 512-token ubatch), where the CPU graph here is
    1.25–6 MiB; and llama.cpp's straight line between two measurements is not its compute buffer, which is not linear in
    the context (1.25 MiB at 256 cells, where the ubatch is cut to 256 tokens; 3.01 at 1,024; 6.01 at 4,096)."""
    total = host_ram_bytes()
    out = fit_params(real_engines, tmp_path, "--fit-ctx", "256", "--fit-target", str(total // MIB - spare_mib))
    assert int(HOST_TOTAL.search(out).group(1)) == total // MIB  # the engine sees the RAM this test computed
    found = CONTEXT_REDUCED.search(out)
    assert found, f"--fit did not shrink the context with {spare_mib} MiB spare:\n{out[-2000:]}"
    high, pick = int(found.group(1)), int(found.group(2))
    # The engine measures at the full context first, then at --fit-ctx: two compute buffers, in that order.
    compute_high, compute_low = (float(v) * MIB for v in COMPUTE.findall(out)[:2])
    model = float(FILE_SIZE.search(out).group(1)) * MIB
    spec = load_config_file(real_engines.model("dense") / "config.json")  # the GGUF is the dense tiny model, converted
    kv_low, kv_high = (_kv_gib(spec, n, 1, "f16", unified=False)[0] * GIB for n in (256, high))
    target = total - (total // MIB - spare_mib) * MIB
    used_low, used_high = model + kv_low + compute_low, model + kv_high + compute_high
    raw = 256 + (high - 256) * (target - used_low) / (used_high - used_low)
    expected = max(256, int(raw) - int(raw) % 256)
    assert pick == expected, f"{spare_mib} MiB spare: llama.cpp --fit picked {pick:,} cells; its rule with c3's KV gives {raw:,.0f} → {expected:,}"
    print(f"{spare_mib} MiB spare: llama.cpp --fit {high:,} → {pick:,} cells; its rule with c3's KV "
          f"({kv_low / MIB:.3f}/{kv_high / MIB:.3f} MiB) gives {raw:,.0f} → {expected:,}")


MODEL_BUFFER = re.compile(r"\b(CPU_Mapped|CPU|CUDA\d+) model buffer size\s*=\s*([\d.]+) MiB")


def test_llamacpp_weights_are_llama_servers_model_buffer(real_engines, llama_engine, capsys):
    """c3's llama.cpp weights for the tiny GGUF (`c3 fit --config … --engine llamacpp --gguf`: its tensor data, read from
    its header) are the model buffer llama-server reports, at its printed precision and within 1 %. The file's size, which
    a published GGUF listing gives, is not: the tiny model's vocabulary makes it 2.6 % more."""
    server = llama_engine("-lv", "4")  # the verbosity at which llama-server logs its buffers
    server.wait_healthy(120)
    buffers = MODEL_BUFFER.findall(server.log())
    assert buffers, "llama-server printed no model buffer"
    engine_mib = sum(float(mib) for _, mib in buffers)
    code, out, err = run(capsys, "fit", "--config", str(real_engines.model("dense") / "config.json"), "--engine", "llamacpp", "--gguf",
                         str(real_engines.gguf), "--vram-gib", "8", "--tp", "1", "--max-model-len", "4096", "--json")
    assert code == 0, err
    c3_mib = json.loads(out)["gpus"][0]["weights_gib"] * 1024
    assert round(c3_mib, 2) == round(engine_mib, 2), f"c3 {c3_mib:.4f} MiB ≠ llama-server {engine_mib:.2f} MiB"
    assert abs(c3_mib - engine_mib) <= 0.01 * engine_mib
    file_mib = real_engines.gguf.stat().st_size / MIB
    assert abs(file_mib - engine_mib) > 0.01 * engine_mib  # the file size would miss the 1 % bar
    print(f"tiny.gguf: llama-server {engine_mib:.2f} MiB ({buffers}); c3 {c3_mib:.4f} MiB; file {file_mib:.4f} MiB")
