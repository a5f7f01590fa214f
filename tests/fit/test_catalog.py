"""The shipped catalog and the user's catalog.d merge."""

from __future__ import annotations

import pytest

from backend.catalog import load_catalog
from backend.errors import Refused, UsageError


def test_catalog_covers_engines_parallelism_and_families():
    cat = load_catalog()
    assert len(cat.entries) >= 25
    assert {e.engine for e in cat.entries} >= {"vllm", "llamacpp", "sglang"}
    assert {e.tp for e in cat.entries} >= {1, 2, 4}
    models = {(cat.model_for(e).repo if cat.model_for(e) else None) for e in cat.entries}
    for repo in ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen3-8B", "Qwen/Qwen3-32B",
                 "mistralai/Mistral-Small-3.1-24B-Instruct-2503", "Qwen/Qwen3-30B-A3B", "openai/gpt-oss-20b", "openai/gpt-oss-120b",
                 "google/gemma-3-27b-it", "deepseek-ai/DeepSeek-V2-Lite-Chat", "Qwen/Qwen3-Next-80B-A3B-Instruct"):
        assert repo in models, repo


def test_every_entry_is_complete_and_priced_from_real_numbers():
    cat = load_catalog()
    for e in cat.entries:
        assert e.slug.startswith(e.engine + "/") and e.image and e.source
        assert e.max_model_len and e.default_port
        spec = cat.model_for(e)
        assert spec is not None, e.slug
        assert any(v.name == e.weights for v in spec.weights), e.slug
    ports = [e.default_port for e in cat.entries]
    assert len(ports) == len(set(ports))


def test_unknown_slug_is_refused_with_suggestions():
    with pytest.raises(Refused) as info:
        load_catalog().get("vllm/qwen3-8")
    assert "vllm/qwen3-8b" in (info.value.hint or "")


def test_user_catalog_d_adds_and_replaces(tmp_path, monkeypatch):
    folder = tmp_path / "home" / "catalog.d"
    folder.mkdir(parents=True)
    monkeypatch.setenv("C3_HOME", str(tmp_path / "home"))
    (folder / "mine.yaml").write_text(
        """
entries:
  - slug: custom/my-server
    engine: custom
    image: my/server:1.2
    command: ["/bin/server", "--port", "8000"]
    container_port: 8000
    health_path: /v1/models
    tp: 1
  - slug: vllm/llama-3.1-8b
    engine: vllm
    image: vllm/vllm-openai:v0.11.0
    model: meta-llama/Llama-3.1-8B-Instruct
    weights: bf16
    max_model_len: 8192
"""
    )
    cat = load_catalog()
    custom = cat.get("custom/my-server")
    assert custom.user and custom.command == ("/bin/server", "--port", "8000") and custom.container_port == 8000
    replaced = cat.get("vllm/llama-3.1-8b")
    assert replaced.user and replaced.max_model_len == 8192 and replaced.image.endswith("v0.11.0")
    assert sum(1 for e in cat.entries if e.slug == "vllm/llama-3.1-8b") == 1


def test_user_entry_can_point_at_its_own_config(tmp_path, monkeypatch):
    from backend.catalog.specs import MODELS_DIR

    folder = tmp_path / "home" / "catalog.d"
    folder.mkdir(parents=True)
    monkeypatch.setenv("C3_HOME", str(tmp_path / "home"))
    (folder / "cfg.json").write_text((MODELS_DIR / "microsoft__phi-4.config.json").read_text())
    (folder / "phi.yaml").write_text(
        "entries:\n  - {slug: vllm/my-phi, engine: vllm, image: 'vllm/vllm-openai:v0.27.1', model: me/phi, config_path: cfg.json, weights_bytes: 29319014400, max_model_len: 8192}\n"
    )
    cat = load_catalog()
    spec = cat.model_for(cat.get("vllm/my-phi"))
    assert spec.num_kv_heads == 10 and spec.weights[0].bytes == 29319014400


@pytest.mark.parametrize(
    "text, problem",
    [
        ("entries: [\n", "not valid YAML"),
        ("just a string\n", "expected a mapping"),
        ("entries:\n  - slug: vllm/x\n    engine: nope\n    image: i\n", "engine"),
        ("entries:\n  - slug: x\n    engine: vllm\n    image: i\n", "must be `vllm/<name>`"),
        ("entries:\n  - slug: custom/x\n    engine: custom\n    image: i\n", "container_port"),
        ("entries:\n  - slug: vllm/x\n    engine: vllm\n    image: i\n    tp: 0\n", "tp"),
        ("entries:\n  - 7\n", "not a mapping"),
    ],
)
def test_malformed_user_file_is_a_usage_error_naming_it(tmp_path, monkeypatch, text, problem):
    folder = tmp_path / "home" / "catalog.d"
    folder.mkdir(parents=True)
    monkeypatch.setenv("C3_HOME", str(tmp_path / "home"))
    (folder / "broken.yaml").write_text(text)
    with pytest.raises(UsageError) as info:
        load_catalog()
    assert "broken.yaml" in info.value.message and problem in info.value.message


def test_catalog_is_reread_only_when_catalog_d_changes(tmp_path, monkeypatch):
    folder = tmp_path / "home" / "catalog.d"
    folder.mkdir(parents=True)
    monkeypatch.setenv("C3_HOME", str(tmp_path / "home"))
    first = load_catalog()
    assert first.find("vllm/mine") is None
    first.entries.clear()  # a caller mangling its copy must not reach the next caller
    assert len(load_catalog().entries) >= 25
    entry = "entries:\n  - slug: vllm/mine\n    engine: vllm\n    image: vllm/vllm-openai:v0.11.0\n    model: Qwen/Qwen3-8B\n    max_model_len: {n}\n"
    (folder / "mine.yaml").write_text(entry.format(n=4096))
    assert load_catalog().get("vllm/mine").max_model_len == 4096
    (folder / "mine.yaml").write_text(entry.format(n=40960))  # same size class, new content: stamp differs
    assert load_catalog().get("vllm/mine").max_model_len == 40960
    tmp = folder / "mine.yaml.tmp"
    tmp.write_text(entry.format(n=8192))
    tmp.replace(folder / "mine.yaml")  # an atomic replace (new inode) is seen too
    assert load_catalog().get("vllm/mine").max_model_len == 8192
    (folder / "mine.yaml").unlink()
    assert load_catalog().find("vllm/mine") is None
    (folder / "broken.yaml").write_text("entries: [unclosed\n")
    with pytest.raises(UsageError):
        load_catalog()
