"""Live checks against the real engines: their /metrics still carry the names c3 and the stub rely on,
and their boot logs still read the way the recorded fixtures (tests/fixtures/engines/) do."""

from __future__ import annotations

import httpx
import pytest

from backend.fit.bootlog import parse_boot_log
from scripts.rig.prefix_workload import scrape
from scripts.rig.record_engine_fixtures import exercise, get, metric_names
from tests.rig.test_stub_metric_names import C3_READS, fixture_names, stub_metric_names

pytestmark = pytest.mark.real_engine


def test_live_vllm_metrics_match_the_fixture_and_the_stub(vllm_dense, tmp_path):
    exercise(vllm_dense)
    live = set(metric_names(get(vllm_dense.url + "/metrics")))
    assert C3_READS["vllm"] <= live, sorted(C3_READS["vllm"] - live)
    assert set(fixture_names("vllm")) == live, sorted(set(fixture_names("vllm")) ^ live)
    assert (stub := stub_metric_names("vllm", tmp_path)) <= live, sorted(stub - live)


def test_live_llama_server_metrics_match_the_fixture_and_the_stub(llama_engine, tmp_path):
    server = llama_engine()
    server.wait_healthy(120)
    exercise(server)
    live = set(metric_names(get(server.url + "/metrics")))
    assert C3_READS["llamacpp"] <= live, sorted(C3_READS["llamacpp"] - live)
    assert set(fixture_names("llamacpp")) == live, sorted(set(fixture_names("llamacpp")) ^ live)
    assert (stub := stub_metric_names("llamacpp", tmp_path)) <= live, sorted(stub - live)


def test_live_boot_logs_read_like_the_fixtures(vllm_dense, llama_engine):
    vllm = parse_boot_log(vllm_dense.log())
    assert (vllm.engine, vllm.engine_version, vllm.kv_device) == ("vllm", "0.32.0", "CPU")
    assert vllm.kv_cache_tokens == 2_097_152 and vllm.available_kv_gib == 1.0 and vllm.max_model_len == 2048
    server = llama_engine("-lv", "4")  # the verbosity at which llama-server logs its buffers
    server.wait_healthy(120)
    llama = parse_boot_log(server.log())
    assert llama.engine == "llamacpp" and llama.llamacpp_mib.get("CPU", {}).get("kv")


def test_prefix_cache_counters_move_as_c3_expects(vllm_dense):
    """The same long prompt twice: the second is served from the prefix cache, in whole 128-token blocks."""
    before = scrape(vllm_dense.url)
    prompt = [{"role": "user", "content": "abc " * 300}]
    for _ in range(2):
        httpx.post(vllm_dense.url + "/v1/chat/completions", timeout=120,
                   json={"model": "tiny", "max_tokens": 2, "messages": prompt}).raise_for_status()
    after = scrape(vllm_dense.url)
    assert after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"] >= 128
    assert after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] == 4
