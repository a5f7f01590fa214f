"""Families where c3's vLLM estimate is known to be less exact (backend/fit/families.py): the fit names them, with
the size of the miss and the validation rows it was seen on, and keeps its own (pessimistic) figure as the margin."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from backend.catalog.configs import load_config_file
from backend.fit import fit_config
from backend.fit.families import KNOWN_MISSES
from backend.fit.plan import Knobs

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "backend" / "catalog" / "models"
RESULTS = (ROOT / "bench" / "RESULTS.md").read_text()

CASES = [
    # (case, config, GiB per rank, knobs, families named)
    ("gpt-oss-20b (MXFP4) on vLLM 0.11", "openai__gpt-oss-20b", 79.19, dict(version=(0, 11)), ["MXFP4"]),
    ("V0 at 128K", "meta-llama__Llama-3.1-8B-Instruct", 79.19, dict(version=(0, 7), max_model_len=131072), ["V0"]),
    ("V0 at 8K", "meta-llama__Llama-3.1-8B-Instruct", 79.19, dict(version=(0, 7), max_model_len=8192), []),
    ("V1 at 128K", "meta-llama__Llama-3.1-8B-Instruct", 79.19, dict(version=(0, 11), max_model_len=131072), []),
    ("TP 2 on vLLM 0.11 (priced from the source now)", "Qwen__Qwen3-8B", 79.19, dict(version=(0, 11), tp=2), []),
    ("PP 2 on vLLM 0.10", "Qwen__Qwen3-8B", 79.19, dict(version=(0, 10), pp=2), []),
    ("TP 2 on vLLM 0.27", "Qwen__Qwen3-8B", 79.19, dict(version=(0, 27), tp=2), []),
    ("TP 1 on vLLM 0.11", "Qwen__Qwen3-8B", 79.19, dict(version=(0, 11)), []),
    ("gemma-3-12b (vision, dense: MRv2 from 0.27)", "google__gemma-3-12b-it", 79.19, dict(version=(0, 27)), []),
    ("Llama-4-Scout (vision, MoE) on 0.29", "meta-llama__Llama-4-Scout-17B-16E-Instruct", 79.19, dict(version=(0, 29), tp=4), ["multimodal"]),
    ("Llama-4-Scout (vision, MoE) on 0.19", "meta-llama__Llama-4-Scout-17B-16E-Instruct", 79.19, dict(version=(0, 19), tp=4), []),
    ("gemma-3-27b (vision) TP 2 on 0.11", "google__gemma-3-27b-it", 79.19, dict(version=(0, 11), tp=2), []),
    ("gpt-oss-20b on llama.cpp", "openai__gpt-oss-20b", 23.56, dict(engine="llamacpp", weights_bytes=13_000_000_000), []),
    ("gpt-oss-20b measured on the rig", "openai__gpt-oss-20b", 79.19, dict(version=(0, 11), measured_kv_gib=50.0), []),
]


@pytest.mark.parametrize(("case", "config", "total", "knobs", "families"), CASES, ids=[c[0] for c in CASES])
def test_the_fit_names_the_families_it_is_less_exact_on(case, config, total, knobs, families):
    spec = load_config_file(MODELS / f"{config}.config.json")
    k = replace(Knobs(weights_gib=None, max_num_seqs=256, max_num_batched_tokens=8192), **knobs)
    report = fit_config(spec, [total] * (k.tp * k.pp), k, gpu_name="NVIDIA H100 80GB HBM3")
    named = [n for n in report.notes if n.startswith("less exact here")]
    assert len(named) == len(families), (case, named)
    for word, note in zip(families, named, strict=True):
        assert word in note and "kept as margin until a boot on this rig is learned" in note, (case, note)


def test_the_margin_is_kept_not_added_back():
    """The note changes nothing else: the KV figure and the verdict are the pricer's own."""
    spec = load_config_file(MODELS / "openai__gpt-oss-20b.config.json")
    k = Knobs(version=(0, 11), max_num_seqs=256, max_num_batched_tokens=8192)
    from backend.fit.plan import Rank
    from backend.fit.vllm import price_vllm

    plain = price_vllm(spec, [Rank(total_gib=79.19, nvml_name="NVIDIA H100 80GB HBM3")], replace(k, weights_bytes=13_761_264_768))
    noted = fit_config(spec, [79.19], replace(k, weights_bytes=13_761_264_768), gpu_name="NVIDIA H100 80GB HBM3")
    assert noted.available_kv_gib == plain.available_kv_gib and noted.verdict == plain.verdict


@pytest.mark.parametrize("miss", [m for m in KNOWN_MISSES if "issue 27" not in m.rows.split(";")[0]], ids=lambda m: m.family[:30])
def test_each_figure_is_a_row_of_the_results(miss):
    """The size of each miss is the worst validation or calibration row RESULTS.md prints for the family."""
    assert f"−{miss.pessimistic_gib:.2f}" in RESULTS, miss.family
    assert f"−{miss.pessimistic_gib:.2f}" in miss.rows


@pytest.mark.parametrize(("engine", "version", "says"), [
    ("vllm", (0, 7), "vLLM 0.7, the V0 engine"),
    ("vllm", (0, 11), "vLLM 0.11, the V1 engine (version"),
    ("vllm", (0, 26), "vLLM 0.26, the V1 engine (version"),
    ("vllm", (0, 27), "vLLM 0.27, the V1 engine with Model Runner V2 for dense models"),
    ("vllm", (0, 32), "vLLM 0.32, the V1 engine with Model Runner V2 for dense models"),
    ("vllm", None, None),
    ("llamacpp", (0, 3), None),
])
def test_the_fit_says_which_engine_generation_it_assumed(engine, version, says):
    from backend.fit.families import generation_note

    note = generation_note(engine, version, "the image tag x")
    assert (note is None) if says is None else (says in note and note.endswith("(version from the image tag x)"))


def test_a_slug_names_its_generation_and_where_the_version_came_from():
    from backend.catalog import load_catalog
    from backend.fit import fit_on_cards

    report = fit_on_cards(load_catalog().get("vllm/qwen3-8b"), ["rtx-3090"])
    assert ("engine generation assumed: vLLM 0.27, the V1 engine with Model Runner V2 for dense models "
            "(version from the image tag vllm/vllm-openai:v0.27.1)") in report.notes
