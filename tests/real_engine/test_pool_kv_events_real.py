"""`--kv-events` against a real vLLM (CPU build) publishing its KV-cache events over ZMQ.

The engine gets a small prefix cache (`--num-gpu-blocks-override`: 16 blocks of 128 tokens), so a few
distinct prompts evict the first. The router reads the engine's own events: BlockStored as prompts are
computed, BlockRemoved as the first prompt's blocks are reused, AllBlocksCleared on `/reset_prefix_cache`.
What the router then believes is checked against the engine's own counters: the prompt the router
forgot gets no prefix-cache hit when sent again (Δ`vllm:prefix_cache_hits_total` = 0), the one it kept
does.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from scripts.rig.engine_procs import free_port
from scripts.rig.prefix_workload import scrape
from tests.pool.conftest import pool_process, wait_until  # noqa: F401 - pool_process is a fixture

pytestmark = pytest.mark.real_engine

BLOCKS = 16
"""The engine's whole prefix cache: 16 × 128 tokens = 2,048 tokens (max_model_len 1,024 needs 8)."""


@pytest.fixture
def small_cache_vllm(vllm_engine):
    port = free_port()
    # vLLM binds its PUB only to an endpoint with a `*` (tcp://127.0.0.1:P would make it connect out to a
    # subscriber there); the router connects to it on loopback.
    events = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{port}"}
    engine = vllm_engine("dense", "--enforce-eager", "--block-size", "128", "--num-gpu-blocks-override", str(BLOCKS),
                         "--kv-events-config", json.dumps(events), max_model_len=1024, env={"VLLM_SERVER_DEV_MODE": "1"})
    engine.wait_healthy(300)
    return engine, f"tcp://127.0.0.1:{port}"


def _prompt(i: int, tag: str) -> str:
    """~600 tokens (4 full 128-token blocks) of text of its own (36 such paragraphs were over 1,024 tokens)."""
    return " ".join(f"document {i} of {tag}, paragraph {j}: the quick brown fox jumps over the lazy dog." for j in range(20))


def _ask(url: str, text: str) -> dict:
    reply = httpx.post(url + "/v1/completions", timeout=120, json={"model": "tiny", "prompt": text, "max_tokens": 1})
    assert reply.status_code == 200, reply.text
    return reply.json()


def _hits(engine_url: str, pool_url: str, text: str) -> tuple[float, str]:
    """(prefix-cache hits the engine counted for this request, the router's decision for it)."""
    before = scrape(engine_url)["vllm:prefix_cache_hits_total"]
    outcomes = httpx.get(pool_url + "/c3/status", timeout=5).json()["cache_routing"]
    _ask(pool_url, text)
    after = httpx.get(pool_url + "/c3/status", timeout=5).json()["cache_routing"]
    decided = next(k for k in after if after[k] != outcomes[k])
    return scrape(engine_url)["vllm:prefix_cache_hits_total"] - before, decided


def test_the_index_forgets_what_the_real_engine_evicted_and_cleared(small_cache_vllm, pool_process):
    engine, endpoint = small_cache_vllm
    pool = pool_process({"a": engine.url}, "--route", "cache", "--sticky", "none", "--cache-load", "in-flight",
                        "--kv-events", f"a={endpoint}")
    tag = f"{time.time_ns() % 10**6:06d}"  # digits are a token each here: keep it short

    def events() -> dict:
        return pool.backend("a")["kv_events"]

    # ZMQ drops what is published before the subscriber joins: warm up until the router has heard one batch.
    wait_until(lambda: _ask(pool.url, f"warm up {tag} " * 20) and events()["messages"] > 0, timeout=60,
               interval=0.5, what="the router to receive the engine's first events")
    first = _prompt(0, tag)
    tokens = _ask(pool.url, first)["usage"]["prompt_tokens"]
    assert 4 * 128 <= tokens < 1024, tokens  # 4 full blocks, under max_model_len
    wait_until(lambda: events()["engine_blocks"] >= 4, timeout=15, what="BlockStored for the first prompt")
    assert events()["bad"] == 0 and events()["error"] is None

    # Five more prompts of 4-5 blocks each: 16 blocks hold three or four; the first (least recently used) goes.
    for i in (1, 2, 3, 4, 5):
        _ask(pool.url, _prompt(i, tag))
    # All of the eviction's events are in once the blocks seen stored, less those removed, fit the cache.
    wait_until(lambda: events()["removed"] > 0 and events()["engine_blocks"] <= BLOCKS, timeout=15,
               what="BlockRemoved from the engine, down to what its cache holds")
    row = pool.backend("a")
    assert row["kv_events"]["gaps"] == 0 and row["kv_events"]["restarts"] == 0, row

    # The newest prompt: the router still routes it by its prefix, and the engine hits it.
    hits, decided = _hits(engine.url, pool.url, _prompt(5, tag))
    assert decided == "prefix" and hits > 0, (decided, hits)
    # The first prompt: the router forgot it, and the engine had indeed evicted it (0 hits).
    hits, decided = _hits(engine.url, pool.url, first)
    assert decided == "no_match" and hits == 0, (decided, hits)
    assert events()["trimmed"] > 0

    # A reset of the engine's prefix cache empties the backend's index.
    assert httpx.post(engine.url + "/reset_prefix_cache", timeout=30).status_code == 200
    # vLLM publishes what happened to its cache with its next scheduler step: one request sends the reset.
    _ask(engine.url, f"nudge {tag}")
    wait_until(lambda: events()["cleared"] == 1, timeout=15, what="AllBlocksCleared")
    assert pool.backend("a")["prefix_blocks"] == 0
    hits, decided = _hits(engine.url, pool.url, _prompt(5, tag))
    assert decided == "no_match" and hits == 0, (decided, hits)
    pool.stop()
