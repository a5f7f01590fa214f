"""fit_on_gpus / fit_on_cards / fit_config: verdicts, per-rank breakdown, heterogeneous sets."""

from __future__ import annotations

import math

import pytest

from backend.catalog import load_catalog
from backend.catalog.specs import shipped_spec
from backend.errors import Refused
from backend.fit import fit_config, fit_on_cards, fit_on_gpus, reservation_mib
from backend.fit.plan import Knobs
from backend.models import CatalogEntry, Gpu

GIB = 2**30


def g(index: int, name: str, total: int | None, sm: str | None, reserved: int | None = None) -> Gpu:
    return Gpu(index=index, uuid=f"GPU-{index}", name=name, total_mib=total, sm=sm, reserved_mib=reserved)


RTX3090 = g(0, "NVIDIA GeForce RTX 3090", 24576, "8.6", 422)
RTX5090 = g(1, "NVIDIA GeForce RTX 5090", 32607, "12.0", 487)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_fit_report_fields_and_exact_kv(catalog):
    report = fit_on_gpus(catalog.get("vllm/llama-3.1-8b"), [RTX3090])
    assert report.verdict in ("fits", "tight")
    assert report.kv_bytes_per_token == 131072
    rank = report.gpus[0]
    assert rank.total_gib == pytest.approx((24576 - 422) / 1024, abs=1e-3)
    assert rank.budget_gib == pytest.approx(rank.total_gib * 0.90, abs=1e-3)
    left = rank.budget_gib - rank.weights_gib - rank.activation_gib - rank.non_torch_gib - rank.cudagraph_gib
    assert rank.available_kv_gib == pytest.approx(left, abs=2e-3)
    # The report rounds GiB to 3 decimals: the block count agrees to within one block.
    assert abs(report.kv_blocks - int(rank.available_kv_gib * GIB) // (16 * 131072)) <= 1
    assert report.max_concurrency == pytest.approx(report.kv_blocks / math.ceil(32768 / 16), abs=0.01)
    assert report.kv_cache_tokens == int(report.kv_blocks / 2048 * 32768)
    assert report.max_model_len_fits == report.kv_blocks * 16


def test_heterogeneous_set_is_limited_by_the_smallest_card(catalog):
    report = fit_on_gpus(catalog.get("vllm/gemma-3-27b-fp8-tp2"), [RTX3090, RTX5090])
    small, big = report.gpus
    assert small.available_kv_gib < big.available_kv_gib
    assert report.available_kv_gib == small.available_kv_gib
    assert report.kv_blocks == min(small.kv_blocks, big.kv_blocks) == small.kv_blocks
    assert small.weights_gib == big.weights_gib
    # Swapping the order changes nothing: the pool is the minimum over ranks.
    assert fit_on_gpus(catalog.get("vllm/gemma-3-27b-fp8-tp2"), [RTX5090, RTX3090]).kv_blocks == report.kv_blocks


def test_incompatible_hw_and_fallback(catalog):
    fp8 = catalog.get("vllm/qwen3-next-80b-fp8-tp2")  # sm 8.9 needed, no fallback
    report = fit_on_gpus(fp8, [RTX3090, g(1, "NVIDIA GeForce RTX 3090", 24576, "8.6", 422)])
    assert report.verdict == "incompatible-hw" and "8.9" in report.reasons[0]
    oss = catalog.get("vllm/gpt-oss-20b")  # sm 9.0 fast path, sm 8.0 fallback
    report = fit_on_gpus(oss, [RTX3090])
    assert report.verdict in ("fits", "tight")
    assert any("slower sm 8.0 path" in n for n in report.notes)
    old = g(0, "Tesla T4", 15360, "7.5")
    assert fit_on_gpus(oss, [old]).verdict == "incompatible-hw"


def test_homogeneous_architecture_guard(catalog):
    entry = catalog.get("vllm/qwen3-30b-a3b-fp8-tp2")
    ada = g(0, "NVIDIA GeForce RTX 4090", 24564, "8.9")
    report = fit_on_gpus(entry, [ada, RTX5090])
    assert report.verdict == "incompatible-hw" and "one GPU architecture" in report.reasons[0]


def test_fp8_kv_on_ampere_is_incompatible():
    spec = shipped_spec("meta-llama/Llama-3.1-8B-Instruct")
    entry = CatalogEntry(slug="vllm/x", engine="vllm", image="i", model="meta-llama/Llama-3.1-8B-Instruct", weights="bf16", kv_cache_dtype="fp8_e4m3", max_model_len=8192)
    assert spec is not None
    report = fit_on_gpus(entry, [RTX3090])
    assert report.verdict == "incompatible-hw" and "fp8_e4m3" in report.reasons[0]
    e5m2 = entry.model_copy(update={"kv_cache_dtype": "fp8_e5m2"})
    assert fit_on_gpus(e5m2, [RTX3090]).kv_bytes_per_token == 65536


def test_unknown_card_is_priced_from_its_measurement(catalog):
    future = g(0, "NVIDIA Hypothetical 96GB", 98304, "10.0")
    report = fit_on_gpus(catalog.get("vllm/llama-3.1-8b"), [future])
    assert report.verdict in ("fits", "tight")
    assert "no profile" in report.gpus[0].card
    assert report.gpus[0].total_gib == pytest.approx((98304 - 800) / 1024, abs=1e-3)
    # Not silently the 3090 profile: a 96 GB card prices far more KV.
    assert report.available_kv_gib > 50


def test_no_memory_and_no_profile_is_unknown(catalog):
    report = fit_on_gpus(catalog.get("vllm/llama-3.1-8b"), [g(0, "NVIDIA Mystery", None, "9.0")])
    assert report.verdict == "unknown" and report.reasons


def test_gb10_uses_unified_memory_total(catalog):
    spark = g(0, "NVIDIA GB10", None, "12.1")
    report = fit_on_gpus(catalog.get("vllm/gpt-oss-120b"), [spark])
    assert report.gpus[0].total_gib == 121.69
    assert report.verdict in ("fits", "tight")


def test_wont_fit_reasons(catalog):
    report = fit_on_cards(catalog.get("vllm/gpt-oss-120b"), ["rtx-3090"])
    assert report.verdict == "wont-fit" and "no memory left" in report.reasons[0]
    long = fit_on_cards(catalog.get("vllm/llama-3.1-8b"), ["rtx-3090"], max_model_len=131072)
    assert long.verdict == "wont-fit" and "largest context that fits" in long.reasons[0]
    assert 0 < long.max_model_len_fits < 131072


def test_wrong_gpu_count_and_unknown_card_are_refused(catalog):
    with pytest.raises(Refused, match="needs 2 GPU"):
        fit_on_gpus(catalog.get("vllm/qwen3-32b-tp2"), [RTX3090])
    with pytest.raises(Refused, match="unknown card"):
        fit_on_cards(catalog.get("vllm/llama-3.1-8b"), ["rtx-9999"])


def test_custom_entries_are_unknown():
    entry = CatalogEntry(slug="custom/x", engine="custom", image="my/server:1", command=("/srv",), container_port=8000)
    assert fit_on_gpus(entry, [RTX3090]).verdict == "unknown"
    assert reservation_mib(entry, RTX3090) is None


def test_reservation_is_ceil_total_times_util(catalog):
    entry = catalog.get("vllm/llama-3.1-8b")
    assert reservation_mib(entry, RTX3090) == math.ceil((24576 - 422) * 0.90)
    llama = catalog.get("llamacpp/qwen3-8b-q4km")
    assert 4000 < reservation_mib(llama, RTX3090) < 24576
    assert reservation_mib(entry, g(0, "NVIDIA Mystery", None, None)) is None


def test_fit_config_tp_and_weights_override():
    spec = shipped_spec("Qwen/Qwen3-32B")
    report = fit_config(spec, [79.2, 79.2], Knobs(tp=2, util=0.9, max_model_len=32768, max_num_seqs=256, max_num_batched_tokens=8192))
    assert report.kv_bytes_per_token == 131072 and len(report.gpus) == 2
    given = fit_config(spec, [79.2, 79.2], Knobs(tp=2, util=0.9, max_model_len=32768, weights_gib=31.0))
    assert given.gpus[0].weights_gib == 31.0


def test_llamacpp_and_sglang_rules(catalog):
    llama = fit_on_cards(catalog.get("llamacpp/qwen3-32b-q4km"), ["rtx-3090"])
    assert llama.engine == "llamacpp" and llama.gpus[0].cudagraph_gib == 0
    assert llama.gpus[0].budget_gib == pytest.approx(23.56 - 1.0)
    sg = fit_on_cards(catalog.get("sglang/llama-3.1-8b"), ["h100-sxm"])
    assert sg.engine == "sglang" and sg.gpus[0].budget_gib == pytest.approx(79.20 * 0.85, abs=1e-3)
    assert abs(sg.kv_cache_tokens - int(sg.available_kv_gib * GIB // 131072)) < 100  # GiB rounded to 3 decimals


def test_heads_that_do_not_divide_over_tp_are_refused():
    spec = shipped_spec("microsoft/phi-4")  # 40 heads, 10 KV heads
    report = fit_config(spec, [79.2] * 4, Knobs(tp=4, util=0.9, max_model_len=8192))
    assert report.verdict == "wont-fit" and "10 KV heads" in report.reasons[0]
    assert fit_config(spec, [79.2] * 2, Knobs(tp=2, util=0.9, max_model_len=8192)).verdict in ("fits", "tight")
    mla = shipped_spec("deepseek-ai/DeepSeek-V2-Lite-Chat")  # 16 heads, MLA: KV heads do not matter
    assert fit_config(mla, [79.2] * 8, Knobs(tp=8, util=0.9, max_model_len=8192)).verdict in ("fits", "tight")
