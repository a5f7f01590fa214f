"""The stub engine's /metrics against the real engines' (tests/fixtures/engines/, recorded from a real
vLLM 0.32 CPU build and llama-server by scripts/rig/record_engine_fixtures.py).

Every metric the stub serves must exist in the real engine with the same type, and every metric c3
reads must exist in the real engine at all: a rename upstream (or a typo here) fails this test. The live
counterpart, against running engines, is tests/real_engine/test_metrics_and_bootlogs.py.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engines"

#: What c3 (live hub, cockpit, pool figures) reads from an engine's /metrics.
C3_READS = {
    "vllm": {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
             "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:prompt_tokens_total",
             "vllm:generation_tokens_total", "vllm:num_preemptions_total", "vllm:request_success_total"},
    "llamacpp": {"llamacpp:requests_processing", "llamacpp:requests_deferred", "llamacpp:prompt_tokens_total",
                 "llamacpp:tokens_predicted_total", "llamacpp:prompt_tokens_cached_total"},
}


def fixture_names(engine: str) -> list[str]:
    return json.loads((FIXTURES / "metric-names.json").read_text())[engine]


def types(text: str) -> dict[str, str]:
    """`# TYPE name kind` lines → {name: kind}."""
    return {parts[2]: parts[3] for parts in (line.split() for line in text.splitlines() if line.startswith("# TYPE "))}


def real_text(engine: str) -> str:
    recorded = json.loads((FIXTURES / "metric-names.json").read_text())["recorded_with"][engine]
    return (FIXTURES / f"{recorded}.metrics.txt").read_text()


STUB_ARGV = {"vllm": ("vllm", "serve", "m"), "llamacpp": ("llama-server", "-m", "/m.gguf")}


def stub_metrics(engine: str, log_dir: Path) -> str:
    """Start the stub as `engine`, serve one chat completion, return its /metrics text (stub stopped)."""
    from tests.plugins.rig import start_stub

    stub = start_stub(STUB_ARGV[engine], {"C3_STUB_STARTUP_DELAY": "0"}, log_dir)
    try:
        request = urllib.request.Request(stub.url + "/v1/chat/completions", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode())
        urllib.request.urlopen(request, timeout=10).close()
        with urllib.request.urlopen(stub.url + "/metrics", timeout=10) as reply:
            return reply.read().decode()
    finally:
        stub.stop()


def stub_metric_names(engine: str, log_dir: Path) -> set[str]:
    return set(types(stub_metrics(engine, log_dir)))


_STUB_TEXT: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def _stub_texts(tmp_path_factory):
    for engine in STUB_ARGV:
        _STUB_TEXT[engine] = stub_metrics(engine, tmp_path_factory.mktemp(f"stub-{engine}"))


@pytest.mark.parametrize("engine", ["vllm", "llamacpp"])
def test_c3_reads_only_names_the_real_engine_serves(engine):
    assert C3_READS[engine] <= set(fixture_names(engine)), sorted(C3_READS[engine] - set(fixture_names(engine)))


@pytest.mark.parametrize("engine", ["vllm", "llamacpp"])
def test_stub_serves_real_names_with_real_types(engine):
    stub, real = types(_STUB_TEXT[engine]), types(real_text(engine))
    assert set(stub) <= set(real), f"the stub serves names {engine} does not: {sorted(set(stub) - set(real))}"
    assert stub == {n: real[n] for n in stub}, "a metric's type differs from the real engine's"
    assert C3_READS[engine] <= set(stub), f"the stub lacks {sorted(C3_READS[engine] - set(stub))}"


def test_stub_label_sets_match_vllm():
    """vLLM labels every engine metric with engine and model_name (finished_reason on request_success)."""
    import re

    def labels(text: str) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for m in re.finditer(r"^(vllm:[a-z_]+)\{([^}]*)\}", text, re.M):
            found.setdefault(m.group(1), set()).update(re.findall(r'(\w+)="', m.group(2)))
        return found

    stub, real = labels(_STUB_TEXT["vllm"]), labels(real_text("vllm"))
    for name, keys in stub.items():
        assert keys == real[name], (name, keys, real[name])
