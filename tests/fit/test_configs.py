"""config.json → ModelSpec: text_config nesting, derived layer kinds, parameter counts."""

from __future__ import annotations

import json

import pytest

from backend.catalog.configs import load_config_file, spec_from_config
from backend.catalog.specs import MODELS_DIR, shipped_repos, shipped_spec
from backend.errors import UsageError


@pytest.mark.parametrize(
    "repo, params",
    [
        ("meta-llama/Llama-3.1-8B-Instruct", 8_030_261_248),
        ("meta-llama/Llama-3.1-70B-Instruct", 70_553_706_496),
        ("Qwen/Qwen3-8B", 8_190_735_360),
        ("Qwen/Qwen3-32B", 32_762_123_264),
        ("Qwen/Qwen3-30B-A3B", 30_532_122_624),
        ("openai/gpt-oss-20b", 20_914_757_184),
        ("openai/gpt-oss-120b", 116_829_156_672),
        ("deepseek-ai/DeepSeek-V2-Lite-Chat", 15_706_484_224),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", 79_674_391_296),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", 23_572_403_200),
    ],
)
def test_parameter_count_matches_the_hugging_face_count(repo, params):
    assert shipped_spec(repo).param_count == params


def test_multimodal_configs_read_text_config_first():
    mistral = shipped_spec("mistralai/Mistral-Small-3.1-24B-Instruct-2503")
    assert (mistral.num_layers, mistral.head_dim, mistral.num_kv_heads, mistral.vocab_size) == (40, 128, 8, 131072)
    assert mistral.has_vision
    gemma = shipped_spec("google/gemma-3-27b-it")
    # The official sparse file relies on Gemma3TextConfig defaults for vocab and tying.
    assert (gemma.num_layers, gemma.head_dim, gemma.vocab_size, gemma.tie_word_embeddings) == (62, 128, 262208, True)
    assert gemma.architecture == "Gemma3ForConditionalGeneration"


def test_layer_kinds_are_derived_per_family():
    gemma = shipped_spec("google/gemma-3-27b-it")
    assert [i for i, k in enumerate(gemma.layer_types) if k == "full_attention"] == [5, 11, 17, 23, 29, 35, 41, 47, 53, 59]
    nxt = shipped_spec("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert [i for i, k in enumerate(nxt.layer_types) if k == "full_attention"] == list(range(3, 48, 4))
    oss = shipped_spec("openai/gpt-oss-20b")
    assert oss.layer_types[:2] == ("sliding_attention", "full_attention") and oss.sliding_window == 128
    assert oss.quant_method == "mxfp4"
    qwen25 = shipped_spec("Qwen/Qwen2.5-7B-Instruct")
    assert qwen25.layer_types is None and qwen25.sliding_window is None  # use_sliding_window: false
    scout = load_config_file(MODELS_DIR / "meta-llama__Llama-4-Scout-17B-16E-Instruct.config.json")
    assert scout.layer_types.count("chunked_attention") == 36 and scout.attention_chunk_size == 8192


def test_every_shipped_config_loads():
    repos = shipped_repos()
    assert len(repos) >= 20
    for repo in repos:
        spec = shipped_spec(repo)
        assert spec.num_layers > 0 and spec.param_count and spec.param_count > 10**8


def test_bad_config_files_are_usage_errors(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        load_config_file(bad)
    bad.write_text(json.dumps({"hidden_size": 10}))
    with pytest.raises(UsageError, match="lacks num_hidden_layers"):
        load_config_file(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(UsageError, match="JSON object"):
        load_config_file(bad)
    with pytest.raises(UsageError, match="no such file"):
        load_config_file(tmp_path / "missing.json")
    with pytest.raises(UsageError):
        spec_from_config({"num_hidden_layers": "x", "hidden_size": 1, "num_attention_heads": 1, "vocab_size": 1})


@pytest.mark.parametrize(
    "repo, checkpoint_bytes",
    [
        ("google/gemma-3-27b-it", 54_864_813_280),
        ("google/gemma-3-12b-it", 24_374_650_080),
        ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", 48_022_722_560),
        ("meta-llama/Llama-3.1-8B-Instruct", 16_060_522_496),
        ("openai/gpt-oss-20b", 13_761_264_768),
    ],
)
def test_weights_estimated_from_config_alone_match_the_checkpoints(repo, checkpoint_bytes):
    """`c3 fit --config` without --weights-gib: text model + vision tower (+ MXFP4 experts) from shapes."""
    from backend.catalog.params import estimated_weight_bytes

    assert abs(estimated_weight_bytes(shipped_spec(repo)) - checkpoint_bytes) / checkpoint_bytes < 0.001
