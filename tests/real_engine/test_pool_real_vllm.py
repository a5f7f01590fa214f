"""`c3 pool serve` in front of two real vLLM replicas (CPU build, tiny dense model).

Stickiness is measured where it pays: vLLM's own prefix cache. A multi-turn workload (each turn resends
the whole conversation, as chat clients do) is run through the pool with `--sticky auto` (one
X-Session-ID per conversation) and with `--sticky none`; the hit rate is Δ`vllm:prefix_cache_hits_total`
/ Δ`vllm:prefix_cache_queries_total` summed over both replicas. Then a replica is killed (by pid) in the
middle of a stream: the client gets the pool's error event, and the session continues on the survivor.
bench/pool_prefix_cache.py prints the same figures for bench/RESULTS.md.
"""

from __future__ import annotations

import httpx
import pytest

from scripts.rig.prefix_workload import conversation_hit_rate, scrape
from tests.pool.conftest import pool_process, wait_until  # noqa: F401 - pool_process is a fixture

pytestmark = pytest.mark.real_engine


@pytest.fixture
def replicas(vllm_engine):
    # 4096 tokens of context: room for a stream long enough (seconds, even for this tiny model) to be cut.
    a, b = vllm_engine("dense", max_model_len=4096), vllm_engine("dense", max_model_len=4096)
    a.wait_healthy(300)
    b.wait_healthy(300)
    return {"a": a, "b": b}


def test_sticky_sessions_hit_the_prefix_cache_and_survive_a_killed_replica(replicas, pool_process):
    urls = {name: proc.url for name, proc in replicas.items()}
    sticky = pool_process(urls, "--sticky", "auto")
    sticky_rate = conversation_hit_rate(sticky.url, list(urls.values()), conversations=6, turns=3, tag="sticky")
    sticky.stop()
    spread = pool_process(urls, "--sticky", "none")
    spread_rate = conversation_hit_rate(spread.url, list(urls.values()), conversations=6, turns=3, tag="spread")
    spread.stop()
    # Turn 1 of each conversation can never hit; with stickiness turns 2–3 reuse everything before them
    # (bench/pool_prefix_cache.py, 6 × 3: 0.63 in 3 of 3 runs). Without it, a follow-up that lands on the other
    # replica finds at most an older prefix there, nothing at all on turn 2 (measured 0.32–0.37). All 12
    # follow-ups staying put by chance (which would erase the gap) has probability 2⁻¹².
    assert sticky_rate > 0.5, sticky_rate
    assert sticky_rate > spread_rate + 0.1, (sticky_rate, spread_rate)

    pool = pool_process(urls, "--sticky", "auto")
    session = "kill-me"
    first = httpx.post(pool.url + "/v1/chat/completions", headers={"X-Session-ID": session}, timeout=120,
                       json={"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
    victim = first.headers["x-c3-backend"]
    survivor = "b" if victim == "a" else "a"
    body = {"model": "tiny", "stream": True, "max_tokens": 4000, "ignore_eos": True,
            "messages": [{"role": "user", "content": "tell me everything"}]}
    events: list[bytes] = []
    with httpx.stream("POST", pool.url + "/v1/chat/completions", json=body, headers={"X-Session-ID": session},
                      timeout=120) as reply:
        assert reply.status_code == 200 and reply.headers["x-c3-backend"] == victim
        killed = False
        for line in reply.iter_lines():
            if line:
                events.append(line.encode())
            if not killed and sum(b"chat.completion.chunk" in e for e in events) >= 2:
                replicas[victim].kill()  # API server, EngineCore and Worker at once, by the group we started
                killed = True
    assert killed
    assert any(b"c3_backend_failed" in e for e in events[-3:]), events[-3:]
    assert not any(e == b"data: [DONE]" for e in events)
    after = wait_until(lambda: _chat(pool.url, session), timeout=60, what="the session to continue")
    assert after.headers["x-c3-backend"] == survivor
    assert after.json()["usage"]["completion_tokens"] == 4
    assert scrape(replicas[survivor].url)["vllm:num_requests_running"] == 0
    pool.stop()


def _chat(url: str, session: str):
    try:
        reply = httpx.post(url + "/v1/chat/completions", headers={"X-Session-ID": session}, timeout=120,
                           json={"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": "again"}]})
    except httpx.HTTPError:
        return None
    return reply if reply.status_code == 200 else None
