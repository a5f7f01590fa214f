"""Multimodal activation, read from vLLM's source (issue 27: "multimodal activation", c3 priced ~5 GiB where the engine
used ~2).

vllm/config/vllm.py `_is_default_v2_model_runner_model` at v0.27.0 and v0.28.0 (PyPI wheels) puts a generate model on
Model Runner V2 when `is_default_v2_architecture or not model_config.is_moe` (hybrids and attention-free models
excepted): nothing there keeps a multimodal checkpoint on the V1 runner, and from v0.29.0 `use_v2_model_runner` has
no model test at all. MRv2's `profile_run` (vllm/v1/worker/gpu/model_runner.py) runs the encoder profile
(`encoder_runner.profile_encoder_cache`, outputs kept in the encoder cache), then `_dummy_run` and the lean dummy
sampler. c3 priced every vision checkpoint with the V1 runner's full-vocabulary sampler (15 B/logit from v0.17): for
Gemma 3's 262,208-token vocabulary at 1,024 sequences that is 3.75 GiB the engine never holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.catalog.configs import load_config_file
from backend.fit.overhead import activation_gib, cudagraph_gib, model_runner_v2
from tests.fit.rows import boot_row
from tests.fit.test_accuracy import predict

MODELS = Path(__file__).resolve().parents[2] / "backend" / "catalog" / "models"


def spec(name: str):
    return load_config_file(MODELS / f"{name}.config.json")


@pytest.mark.parametrize("name", ["google__gemma-3-12b-it", "google__gemma-3-27b-it", "mistralai__Mistral-Small-3.1-24B-Instruct-2503"])
def test_a_dense_vision_checkpoint_runs_model_runner_v2_from_v027(name):
    s = spec(name)
    assert s.has_vision and not s.num_experts
    assert model_runner_v2(s, (0, 27)) is True
    assert model_runner_v2(s, (0, 26)) is False
    assert model_runner_v2(s, (0, 28), quantized=True) is False  # quantized: priced as before (V1 runner), no boot seen
    # MRv2's profile_cudagraph_memory() returns 0: no graph pool in the budget
    assert cudagraph_gib(s, pp=1, enforce_eager=False, version=(0, 27)) == 0.0


def test_the_lean_profile_drops_the_full_vocabulary_sort_but_keeps_the_encoder_terms():
    s = spec("google__gemma-3-12b-it")
    kwargs = dict(tp=1, max_num_batched_tokens=8192, max_num_seqs=1024)
    v1 = activation_gib(s, version=(0, 26), **kwargs)
    v2 = activation_gib(s, version=(0, 27), **kwargs)
    assert v1 > 3.9 and v2 < 1.5, (v1, v2)
    # the encoder cache (held through the forward and the sampler) is still priced
    assert v2 > activation_gib(s, version=(0, 27), mrv2=True, **kwargs) - 0.001 > 0.15 + 0.1


def test_a_moe_vision_checkpoint_stays_on_the_v1_runner_before_v029():
    """Llama 4 Scout is MoE: `not model_config.is_moe` is false and it is not a default-V2 architecture at v0.27/v0.28."""
    s = spec("meta-llama__Llama-4-Scout-17B-16E-Instruct")
    assert s.has_vision and s.num_experts
    assert model_runner_v2(s, (0, 28)) is False


@pytest.mark.parametrize("point_id", ["planner-google-gemma-3-12b-it-h100-tp1--8192", "planner-google-gemma-3-27b-it-h100-tp1--8192",
                                      "planner-mistralai-mistral-small--h100-tp1--8192"])
def test_the_public_v019_vision_boots_keep_the_v1_runner_terms(point_id):
    """llm-d-planner v0.19.0 H100 logs (bench/data/bootlogs-validation.yaml): before v0.27 the V1 runner profiles them,
    and c3 stays within 0.25 GiB (never more than that optimistic)."""
    row = boot_row(point_id)
    report = predict(row)
    error = report.available_kv_gib - row["logged"]["available_kv_gib"]
    assert -0.5 <= error <= 0.25, (point_id, error)
    assert abs(report.gpus[0].activation_gib - row["logged"]["activation_gib"]) <= 0.2
