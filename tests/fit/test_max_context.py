"""`c3 fit … --max-context`: the largest context that fits, exact against c3's own fit, and the rank that binds."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from backend.catalog import load_catalog
from backend.catalog.configs import load_config_file
from backend.catalog.specs import MODELS_DIR
from backend.errors import Refused
from backend.fit import fit_config, fit_on_cards, max_context_on_cards
from backend.fit.maxctx import largest_context
from backend.fit.plan import Knobs
from backend.models import FitReport
from tests.fit.test_cli import LLAMA, assert_one_error, run

EXAMPLES = int(os.environ.get("C3_HYPOTHESIS_EXAMPLES", "12"))
CATALOG = load_catalog()


def holds(report: FitReport, length: int) -> bool:
    """The test's own reading of a fit priced at `length`: does one request of `length` tokens fit its KV pool?
    (vLLM: the largest context the pool's blocks hold; llama.cpp: the largest --ctx-size whose KV fits.)"""
    fits = report.kv_cache_tokens if report.engine == "llamacpp" else report.max_model_len_fits
    return fits is not None and fits >= length


def _pricer(config: str, totals: list[float], knobs: Knobs, gpu_name: str) -> tuple[int, Callable[[int], FitReport]]:
    """(the model's max_position_embeddings, `c3 fit --config` priced at a given context)."""
    spec = load_config_file(MODELS_DIR / f"{config}.config.json")
    return spec.max_position_embeddings, lambda length: fit_config(spec, totals, replace(knobs, max_model_len=length), gpu_name=gpu_name)


def _at(slug: str, cards: list[str], length: int) -> FitReport:
    return fit_on_cards(CATALOG.get(slug), cards, max_model_len=length, catalog=CATALOG)


@pytest.mark.parametrize(
    "slug, cards",
    [
        ("vllm/llama-3.1-8b", ["rtx-3090"]),
        ("vllm/llama-3.1-8b-tp2", ["rtx-3060-12gb", "rtx-3060-12gb"]),
        ("vllm/gemma-3-27b-fp8-tp2", ["rtx-3090", "rtx-5090"]),  # sliding-window hybrid, heterogeneous TP
        ("vllm/deepseek-v2-lite", ["a100-40gb-sxm"]),  # MLA
        ("vllm/gpt-oss-20b", ["l4"]),
        ("llamacpp/llama-3.1-70b-q4km-2gpu", ["rtx-3090", "rtx-3090"]),
        ("llamacpp/qwen3-32b-q8-2gpu", ["a10", "a10"]),  # -np 2: two streams of --ctx-size / 2
        ("llamacpp/gemma-3-27b-q4km", ["rtx-3090"]),
    ],
)
def test_the_context_found_fits_and_one_step_more_does_not(slug, cards):
    found, report = max_context_on_cards(CATALOG.get(slug), cards, catalog=CATALOG)
    assert found.bound == "memory" and 0 < found.tokens < found.model_max
    at = _at(slug, cards, found.tokens)
    assert at.verdict in ("fits", "tight") and holds(at, found.tokens)
    assert report == at  # the report shown is c3's own fit at that context
    for more in (1, found.granularity):
        over = _at(slug, cards, found.tokens + more)
        assert not holds(over, found.tokens + more), f"{found.tokens} + {more} still holds one request"
    if report.engine == "vllm":
        # A plain full-attention stack: L = blocks × block_size; vLLM's admission bound cdiv(L, bs) ≤ blocks (these slugs
        # pin versions before vLLM reserved the null block; from 0.28 the bound is blocks − 1).
        assert found.kv_blocks == report.kv_blocks == min(g.kv_blocks or 0 for g in report.gpus)
        if report.kv_groups == 1:
            assert found.tokens == found.kv_blocks * found.granularity
    else:
        assert _at(slug, cards, found.tokens + found.granularity).verdict == "wont-fit"


def test_without_a_double_count_one_block_more_is_wont_fit():
    # vLLM 0.32 has no second copy of the profile transient, so past the bound the verdict itself is wont-fit.
    knobs = Knobs(engine="vllm", tp=1, util=0.9, version=(0, 32), weights_gib=14.99)
    model_max, price_at = _pricer("meta-llama__Llama-3.1-8B-Instruct", [23.56], knobs, "NVIDIA GeForce RTX 3090")
    found, report = largest_context(price_at, model_max=model_max, knobs=knobs)
    # vLLM 0.32 plans one request against all blocks but BlockPool's null block (kv_cache_utils.py `check_memory`).
    assert found.bound == "memory" and found.kv_blocks is not None and found.tokens == (found.kv_blocks - 1) * 16
    assert report.verdict in ("fits", "tight")
    assert price_at(found.tokens + 16).verdict == "wont-fit" and price_at(found.tokens + 1).verdict == "wont-fit"
    # KV budget and bytes/token it came from: blocks = ⌊available bytes / (16 tokens × 131,072 B)⌋.
    assert found.kv_bytes_per_token == 131072 and found.kv_blocks == int(report.gpus[0].available_kv_gib * 2**30 // (16 * 131072))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
@given(
    vram=st.floats(min_value=12.0, max_value=160.0),
    engine=st.sampled_from(["vllm", "llamacpp"]),
    version=st.sampled_from([None, (0, 7), (0, 27), (0, 32)]),
    config=st.sampled_from(["meta-llama__Llama-3.1-8B-Instruct", "Qwen__Qwen3-8B", "google__gemma-3-12b-it", "mistralai__Mistral-7B-Instruct-v0.3"]),
)
def test_exact_on_any_memory_size_engine_and_version(vram, engine, version, config):
    # V0 (vLLM 0.7) prices an activation that grows with the context up to 32 K and drops past it: the search
    # must not assume one monotone range there.
    spec = load_config_file(MODELS_DIR / f"{config}.config.json")
    knobs = Knobs(engine=engine, tp=1, util=0.9, version=version, weights_gib=spec.hidden_size * spec.num_layers * 12 * 2 / 2**30 + 1.0)
    _, price_at = _pricer(config, [vram], knobs, "NVIDIA H100 80GB HBM3")
    try:
        found, _ = largest_context(price_at, model_max=spec.max_position_embeddings, knobs=knobs)
    except Refused as refused:
        assert "no context fits" in refused.message and not holds(price_at(1), 1)
        return
    assert holds(price_at(found.tokens), found.tokens)
    if found.bound == "memory":
        assert not any(holds(price_at(found.tokens + d), found.tokens + d) for d in (1, found.granularity))
    else:
        assert found.tokens == spec.max_position_embeddings
    # No longer context in the model's range holds (checked on a coarse grid above the answer).
    step = max(1, (spec.max_position_embeddings - found.tokens) // 16)
    assert not any(holds(price_at(length), length) for length in range(found.tokens + 1, spec.max_position_embeddings + 1, step))


def test_v0_holds_a_longer_context_where_32k_does_not():
    # vLLM V0 profiles the whole context up to 32 K (its activation grows with L) and chunks prefill past it: on
    # 26 GiB a 32,768-token context does not fit but 43,312 does. A single binary search would stop below 32 K.
    knobs = Knobs(engine="vllm", tp=1, util=0.9, version=(0, 7), weights_gib=15.0)
    model_max, price_at = _pricer("meta-llama__Llama-3.1-8B-Instruct", [26.0], knobs, "NVIDIA H100 80GB HBM3")
    found, _ = largest_context(price_at, model_max=model_max, knobs=knobs)
    assert not holds(price_at(32768), 32768)
    assert found.tokens == 43312 and holds(price_at(43312), 43312) and not holds(price_at(43313), 43313)


def test_the_models_own_maximum_wins_when_memory_holds_more(capsys):
    found, report = max_context_on_cards(CATALOG.get("vllm/qwen3-8b"), ["h100-sxm"], catalog=CATALOG)
    assert found.bound == "model" and found.tokens == found.model_max == 40960 and report.max_concurrency and report.max_concurrency > 1
    code, out, _ = run(capsys, "fit", "vllm/qwen3-8b", "--card", "h100-sxm", "--max-context")
    assert code == 0 and "Largest context that fits: 40,960 tokens — the model's own maximum" in out


def test_the_binding_rank_is_the_one_with_the_least_kv():
    entry = CATALOG.get("vllm/gemma-3-27b-fp8-tp2")
    small_first, _ = max_context_on_cards(entry, ["rtx-3090", "rtx-5090"], catalog=CATALOG)
    small_last, _ = max_context_on_cards(entry, ["rtx-5090", "rtx-3090"], catalog=CATALOG)
    assert (small_first.binding_rank, small_first.binding_card, small_first.ranks_alike) == (0, "rtx-3090", 1)
    assert (small_last.binding_rank, small_last.binding_card) == (1, "rtx-3090") and small_last.tokens == small_first.tokens
    alike, _ = max_context_on_cards(CATALOG.get("vllm/llama-3.1-8b-tp2"), ["rtx-3090", "rtx-3090"], catalog=CATALOG)
    assert (alike.binding_rank, alike.ranks_alike) == (0, 2)
    # llama.cpp splits layers by memory and puts the output layer's compute buffer on the last device.
    llama, _ = max_context_on_cards(CATALOG.get("llamacpp/llama-3.1-70b-q4km-2gpu"), ["rtx-3090", "rtx-3090"], catalog=CATALOG)
    assert (llama.binding_rank, llama.ranks_alike) == (1, 1)
    streams, _ = max_context_on_cards(CATALOG.get("llamacpp/qwen3-32b-q8-2gpu"), ["a10", "a10"], catalog=CATALOG)
    assert streams.granularity == 512 and streams.per_request_tokens == streams.tokens // 2


def test_pipeline_stages_bind_by_their_own_blocks():
    knobs = Knobs(engine="vllm", tp=1, pp=2, util=0.9, version=(0, 32), weights_gib=8.0)
    model_max, price_at = _pricer("meta-llama__Llama-3.1-8B-Instruct", [23.56, 31.37], knobs, "NVIDIA GeForce RTX 3090")
    found, report = largest_context(price_at, model_max=model_max, knobs=knobs)
    blocks = [g.kv_blocks or 0 for g in report.gpus]
    assert found.binding_rank == blocks.index(min(blocks)) == 0 and found.kv_blocks == min(blocks)


def test_json_carries_the_fields(capsys, monkeypatch):
    monkeypatch.setenv("C3_RIG", "demo")
    code, out, _ = run(capsys, "fit", "vllm/llama-3.1-8b", "--gpus", "0", "--max-context", "--json")
    data = json.loads(out)
    found = data["max_context"]
    assert code == 0 and {"tokens", "bound", "model_max", "granularity", "kv_bytes_per_token", "kv_budget_gib", "kv_blocks", "per_request_tokens",
                          "binding_rank", "binding_gpu", "binding_card", "ranks_alike"} <= set(found)
    assert found["binding_gpu"] == 0 and data["max_model_len"] == found["tokens"] == data["max_model_len_fits"]
    assert found["kv_budget_gib"] == data["gpus"][0]["available_kv_gib"] and found["kv_bytes_per_token"] == data["kv_bytes_per_token"] == 131072
    code, out, _ = run(capsys, "fit", "--config", LLAMA, "--vram-gib", "23.56", "--tp", "1", "--engine", "llamacpp", "--weights-gib", "5", "--max-context", "--json")
    data = json.loads(out)
    assert code == 0 and data["max_context"]["granularity"] == 256 and data["max_context"]["bound"] in ("memory", "model")


def test_human_output_names_the_budget_and_the_binding_rank(capsys):
    code, out, _ = run(capsys, "fit", "vllm/gemma-3-27b-fp8-tp2", "--card", "rtx-3090,rtx-5090", "--max-context")
    found, _ = max_context_on_cards(CATALOG.get("vllm/gemma-3-27b-fp8-tp2"), ["rtx-3090", "rtx-5090"], catalog=CATALOG)
    assert code == 0 and f"Largest context that fits: {found.tokens:,} tokens — KV memory binds (the model's own maximum is 131,072)" in out
    assert f"from {found.kv_budget_gib:.2f} GiB of KV on rank 0 (rtx-3090) at 253,952 bytes/token = {found.kv_blocks:,} blocks of 16 tokens" in out
    assert "binding: rank 0 (rtx-3090)" in out


@pytest.mark.parametrize(
    "args, code_wanted, needle",
    [
        (["vllm/llama-3.1-8b", "--card", "rtx-3090", "--max-model-len", "8192"], 2, "--max-context finds the context; --max-model-len fixes one"),
        (["--config", LLAMA, "--vram-gib", "24", "--tp", "1", "--max-model-len", "8192"], 2, "--max-model-len fixes one"),
        (["sglang/qwen3-8b", "--card", "rtx-3090"], 1, "cannot compute the largest context for sglang"),
        (["vllm/gpt-oss-120b", "--card", "rtx-3090"], 1, "no context fits: the weights alone (66.01 GiB) exceed the budget of rank 0 (rtx-3090)"),
        (["--config", LLAMA, "--vram-gib", "12", "--tp", "1", "--weights-gib", "10.5"], 1, "no context fits: 12 GiB: no memory left for the KV cache"),
        (["vllm/qwen3-next-80b-fp8-tp2", "--card", "rtx-3090,rtx-3090"], 1, "--max-context: incompatible-hw"),
        (["vllm/llama-3.1-8b", "--card", "rtx-3090,rtx-3090"], 1, "needs 1 GPU(s)"),
    ],
)
def test_bad_input_is_one_line_and_its_exit_code(capsys, args, code_wanted, needle):
    code, out, err = run(capsys, "fit", *args, "--max-context")
    assert code == code_wanted and out == ""
    assert needle in assert_one_error(err)


def test_a_custom_entry_is_refused_in_one_line(capsys, tmp_path, monkeypatch):
    folder = tmp_path / "catalog.d"
    folder.mkdir()
    (folder / "mine.yaml").write_text("entries:\n  - {slug: custom/my-server, engine: custom, image: 'my/server:1.2', command: ['/bin/server'], "
                                      "container_port: 8000, health_path: /v1/models, tp: 1}\n")
    monkeypatch.setenv("C3_HOME", str(tmp_path))
    code, out, err = run(capsys, "fit", "custom/my-server", "--card", "rtx-3090", "--max-context")
    assert code == 1 and out == "" and "custom entries carry no model spec" in assert_one_error(err)
