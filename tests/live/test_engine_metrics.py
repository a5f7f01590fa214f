"""Engine metrics: the parser on the REAL engines' recorded /metrics (tests/fixtures/engines/), rates
from two scrapes, the TTFT median, garbage refused in one line, the stub engine's live /metrics over
loopback, and the live hub polling every serving pod."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from backend.live import LiveState
from backend.live.engine_metrics import MAX_BYTES, EngineMetricsError, derive, histogram_p50, parse, scrape
from backend.models import Pod
from backend.runtime.context import RuntimeContext
from backend.runtime.models import Workload
from tests.live.fakes import FakeProbe, FakeRuntime
from tests.support import free_port, wait_until

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engines"
ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_real_vllm_metrics_parse_to_what_the_engine_reported():
    sample = parse(fixture("vllm-0.32.0-cpu.metrics.txt"), taken_at=T0, clock=1.0)
    m = derive(sample)
    # Read off the recorded text by hand: 0 running/waiting, kv 0.0, 1024 hits of 1872 queried tokens,
    # 1872 prompt and 24 generated tokens, TTFT buckets 2 ≤ 10 ms, 3 ≤ 40 ms (count 3), no preemptions.
    assert (m.engine, m.running, m.waiting, m.kv_cache_pct) == ("vllm", 0, 0, 0.0)
    assert m.prefix_hit_pct == round(100 * 1024 / 1872, 1) == 54.7
    assert (m.prompt_tokens_total, m.generation_tokens_total, m.preemptions) == (1872, 24, 0)
    # p50: rank 1.5 of 3 falls in (5 ms, 10 ms] holding 2 → 5 + 5 * 1.5/2 = 8.75 ms.
    assert m.ttft_p50_ms == 8.8
    assert m.prompt_tps is None and m.generation_tps is None  # one scrape: no rate, never a made-up 0
    # The per-reason and per-source breakdowns are not added into the totals.
    assert sample.waiting == 0 and sample.prompt_tokens == 1872


def test_real_llama_server_metrics_parse_and_lack_what_llama_server_lacks():
    m = derive(parse(fixture("llama-server-0.3.36.metrics.txt"), taken_at=T0, clock=1.0))
    # llama-server counts prompt tokens processed EXCLUDING cached ones (650) and cached ones apart (1222).
    assert (m.engine, m.running, m.waiting) == ("llamacpp", 0, 0)
    assert m.prompt_tokens_total == 650 + 1222 and m.generation_tokens_total == 24
    assert m.prefix_hit_pct == round(100 * 1222 / 1872, 1)
    assert m.kv_cache_pct is None and m.ttft_p50_ms is None and m.preemptions is None


def test_every_name_the_parser_reads_is_in_the_real_engines_name_lists():
    """The recorded name lists (metric-names.json) hold every name the parser needs: a rename upstream
    shows up here when the fixtures are re-recorded, not as silently empty columns."""
    import json

    names = json.loads(fixture("metric-names.json"))
    for name in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "prefix_cache_queries_total",
                 "prefix_cache_hits_total", "prompt_tokens_total", "generation_tokens_total", "num_preemptions_total",
                 "time_to_first_token_seconds"):
        assert any(n == f"vllm:{name}" or n.startswith(f"vllm:{name}") for n in names["vllm"]), name
    for name in ("requests_processing", "requests_deferred", "prompt_tokens_total", "prompt_tokens_cached_total", "tokens_predicted_total"):
        assert f"llamacpp:{name}" in names["llamacpp"], name


def vllm_text(*, running=0, prompt=0.0, gen=0.0, hits=0.0, queries=0.0, preempt=0.0, ttft=(0, 0, 0), engines=("0",), kv=0.5) -> str:
    out = []
    for e in engines:
        label = f'engine="{e}",model_name="m"'
        out += [f"vllm:num_requests_running{{{label}}} {running}", f"vllm:num_requests_waiting{{{label}}} 1",
                f"vllm:kv_cache_usage_perc{{{label}}} {kv}", f"vllm:prompt_tokens_total{{{label}}} {prompt}",
                f"vllm:generation_tokens_total{{{label}}} {gen}", f"vllm:prefix_cache_hits_total{{{label}}} {hits}",
                f"vllm:prefix_cache_queries_total{{{label}}} {queries}", f"vllm:num_preemptions_total{{{label}}} {preempt}"]
        for le, count in zip(("0.1", "1.0", "+Inf"), ttft, strict=True):
            out.append(f'vllm:time_to_first_token_seconds_bucket{{{label},le="{le}"}} {count}')
    return "\n".join(out) + "\n"


def test_rates_hit_rate_ttft_and_preemptions_come_from_the_interval_between_two_scrapes():
    first = parse(vllm_text(prompt=1000, gen=100, hits=0, queries=1000, ttft=(10, 10, 10)), taken_at=T0, clock=10.0)
    second = parse(vllm_text(prompt=1400, gen=300, hits=300, queries=1400, preempt=2, ttft=(10, 10, 14)), taken_at=T0, clock=12.0)
    m = derive(second, first)
    assert (m.prompt_tps, m.generation_tps) == (200.0, 100.0)
    assert m.prefix_hit_pct == 75.0  # 300 of the 400 tokens queried in this interval, not 300/1400
    assert m.ttft_p50_ms == 1000.0  # the 4 recent requests all took >1 s: the median is the last finite bound
    assert (m.preemptions, m.new_preemptions) == (2, 2)
    # An engine restart (counters went down) gives no rate rather than a negative one.
    restarted = parse(vllm_text(prompt=5, gen=1), taken_at=T0, clock=14.0)
    assert derive(restarted, second).generation_tps is None


def test_data_parallel_ranks_are_summed_and_kv_is_their_mean():
    s = parse(vllm_text(running=2, prompt=10, engines=("0", "1"), kv=0.25), taken_at=T0, clock=1.0)
    assert (s.running, s.waiting, s.prompt_tokens, s.kv_cache_fraction) == (4, 2, 20.0, 0.25)


def test_histogram_median_interpolates_like_prometheus():
    assert histogram_p50(((0.1, 0.0), (0.2, 4.0), (float("inf"), 4.0))) == pytest.approx(0.15)
    assert histogram_p50(((0.1, 0.0), (float("inf"), 0.0))) is None
    assert histogram_p50(()) is None


@pytest.mark.parametrize("body", ["<html>not metrics</html>\n", "foo_total 3\nbar 1\n", "vllm:x{engine=\"0\" 1\n", "vllm:num_requests_running{engine=\"0\" 1\n"])
def test_bodies_that_are_not_an_engines_metrics_are_refused_in_one_line(body):
    with pytest.raises(EngineMetricsError) as caught:
        parse(body, taken_at=T0, clock=1.0)
    assert "\n" not in caught.value.message


def test_an_oversized_body_is_refused_before_parsing():
    with pytest.raises(EngineMetricsError, match="bytes"):
        parse("x" * (MAX_BYTES + 1), taken_at=T0, clock=1.0)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def stub_engine(request):
    port = free_port("127.0.0.1")
    engine = getattr(request, "param", "vllm")
    env = dict(os.environ, PYTHONPATH=str(ROOT), C3_STUB_ENGINE=engine, C3_STUB_TOKENS="5")
    proc = subprocess.Popen([sys.executable, "-m", "backend.sim.stub_engine", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/health"), proc=proc)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def complete(port: int, prompt: str) -> None:
    r = httpx.post(f"http://127.0.0.1:{port}/v1/completions", json={"model": "stub/model", "prompt": prompt, "max_tokens": 5}, timeout=10)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("stub_engine", ["vllm", "llamacpp"], indirect=True)
def test_scrapes_of_the_stub_engine_over_loopback_count_what_was_served(stub_engine):
    url = f"http://127.0.0.1:{stub_engine}/metrics"
    with httpx.Client(timeout=2) as client:
        before = scrape(client, url, clock=time.monotonic(), taken_at=T0)
        complete(stub_engine, "the quick stub engine streams tokens " * 8)
        complete(stub_engine, "the quick stub engine streams tokens " * 8)
        time.sleep(0.05)
        after = scrape(client, url, clock=time.monotonic(), taken_at=T0)
    m = derive(after, before)
    assert m.generation_tokens_total - (before.generation_tokens or 0) == 10
    assert m.generation_tps is not None and m.generation_tps > 0
    assert m.prompt_tokens_total > (before.prompt_tokens or 0)
    assert m.prefix_hit_pct is not None and m.prefix_hit_pct > 0  # the second prompt repeats the first


def test_scrape_failures_are_typed_one_line_errors():
    with httpx.Client(timeout=0.5) as client:
        with pytest.raises(EngineMetricsError, match="ConnectError"):
            scrape(client, f"http://127.0.0.1:{free_port('127.0.0.1')}/metrics", clock=1.0, taken_at=T0)


def test_the_hub_polls_serving_pods_and_derives_rates(stub_engine):
    probe, runtime = FakeProbe(), FakeRuntime()
    pods = [Pod(name="chat", slug="custom/stub", gpus=(1,), port=stub_engine), Pod(name="idle", slug="custom/stub", gpus=(0,), port=1)]
    runtime.state["chat"] = Workload(pod="chat", status="running", gpu_uuids=("GPU-1",))
    live = LiveState(RuntimeContext(runtime=runtime, probe=probe), pods=lambda: pods, health_path_of=lambda p: "/health",
                     gpu_interval_s=0.05, health_interval_s=0.05, placement_interval_s=0.05, metrics_interval_s=0.1)
    live.start()
    try:
        wait_until(lambda: (p := live.latest().pods) and p[0].metrics and p[0].metrics.metrics)
        complete(stub_engine, "a prompt for the hub " * 4)
        snap = wait_until(lambda: (m := live.latest().pods[0].metrics.metrics) and m.generation_tokens_total and m.generation_tps is not None and live.latest())
        chat, idle = snap.pods
        assert chat.metrics.metrics.engine == "vllm" and chat.metrics.metrics.generation_tokens_total == 5
        assert idle.metrics is None  # not running: not scraped
        assert snap.source("engines").ok
    finally:
        live.stop()
