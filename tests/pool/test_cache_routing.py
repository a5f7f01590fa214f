"""`c3 pool serve --route cache` on loopback in front of real stub engines: a shared-system-prompt,
multi-turn workload lands each conversation's turns on the backend that served its prefix (and the
engines' prefix caches hit), where load balancing without the index scatters them; and under concurrency a
shared system prompt does not draw every conversation to one replica (the balance bound)."""

from __future__ import annotations

import re
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

CACHED = "--route", "cache"


def _prefix_hits(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    return sum(float(m.group(1)) for m in re.finditer(r"^vllm:prefix_cache_hits_total\{[^}]*\} (\S+)$", text, re.M))


def _conversations(pool_url: str, system: str, conversations: int = 6, turns: int = 4) -> tuple[int, int, list[str]]:
    """Run the workload through the router: (turns after the first that reached the backend of the
    conversation's previous turn, such turns in all, backend of every first turn)."""
    history = [[{"role": "system", "content": system}] for _ in range(conversations)]
    last: list[str | None] = [None] * conversations
    followed = total = 0
    firsts = []
    with httpx.Client(base_url=pool_url, timeout=10) as client:
        for turn in range(turns):
            for c in range(conversations):
                history[c].append({"role": "user", "content": f"conversation {c} turn {turn}: " + "tell me more please " * 20})
                r = client.post("/v1/chat/completions", json={"model": "stub/model", "messages": history[c], "max_tokens": 40})
                assert r.status_code == 200, r.text
                backend = r.headers["x-c3-backend"]
                assert backend == r.headers["x-stub-backend"]
                if last[c] is None:
                    firsts.append(backend)
                else:
                    total += 1
                    followed += backend == last[c]
                last[c] = backend
                history[c].append({"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]})
    return followed, total, firsts


def test_cache_route_keeps_conversations_where_their_prefix_is(stubs, pool_process):
    backends = stubs("a", "b", "c")
    nodes = {n: s.url for n, s in backends.items()}
    # Load balancing alone (no sessions: `--sticky none`, least in flight, ties at random) ...
    balanced = pool_process(nodes, "--sticky", "none")
    before = sum(_prefix_hits(s.url) for s in backends.values())
    followed_lb, total_lb, _ = _conversations(balanced.url, "You are the balanced assistant. " * 60)
    hits_lb = sum(_prefix_hits(s.url) for s in backends.values()) - before
    balanced.stop()
    # ... against the prefix index, same stubs, same workload (another system prompt: cold caches).
    cached = pool_process(nodes, "--sticky", "none", *CACHED)
    before = sum(_prefix_hits(s.url) for s in backends.values())
    followed, total, firsts = _conversations(cached.url, "You are the cache-aware assistant. " * 60)
    hits = sum(_prefix_hits(s.url) for s in backends.values()) - before

    assert total == total_lb == 18
    assert followed == total, f"cache route: {followed}/{total} turns reached their prefix's backend"
    assert len(set(firsts)) == 1  # new conversations follow the shared system prompt (nothing is loaded)
    assert followed_lb < 0.8 * total_lb, f"balanced: {followed_lb}/{total_lb} (expected about a third)"
    assert hits > hits_lb, (hits, hits_lb)
    status = cached.status()
    assert status["route"] == "cache" and status["cache_routing"]["prefix"] == 23  # all but the very first request
    assert sum(b["prefix_blocks"] for b in status["backends"]) > 0
    # `--cache-load engine` (the default): the router read every stub engine's queue from its /metrics
    assert status["cache_load"] == "engine"
    assert all(b["engine_load"]["read"] and b["engine_load"]["waiting"] == 0 for b in status["backends"]), status["backends"]


@pytest.mark.parametrize("sticky", ["none", "auto"])
def test_a_shared_system_prompt_under_concurrency_uses_both_replicas_and_conversations_stick(stubs, pool_process, sticky):
    """Two requests in flight at a time (a barrier per step), eight conversations over ONE system prompt.
    The replica that saw the prompt first must not take every conversation (with this request it would
    be two ahead of an idle one: past the balance bound), and each conversation, different from the others
    after the shared prompt, keeps its replica for every later turn (by its pin under `auto`, by its own
    longer prefix under `none`). `--cache-load in-flight`: the router's own in-flight counts are the load."""
    backends = stubs("a", "b", extra=("--tokens", "4", "--token-delay", "0.15"))  # ~0.6 s a request: a pair overlaps even on a loaded box
    # The stubs batch without queueing (their /metrics never report requests waiting), so under the
    # default `--cache-load engine` the prefix would rightly take every pair: this is the in-flight bound.
    pool = pool_process({n: s.url for n, s in backends.items()}, "--sticky", sticky, *CACHED, "--cache-load", "in-flight")
    system = "You are the shared support assistant; cite the policy and keep it short. " * 30
    history = {c: [{"role": "system", "content": system}] for c in range(8)}
    where: dict[int, list[str]] = {c: [] for c in range(8)}
    barrier = threading.Barrier(2)

    def lane(convs: list[int]) -> None:
        with httpx.Client(base_url=pool.url, timeout=30) as client:
            for turn in range(2):
                for c in convs:
                    barrier.wait(timeout=30)
                    history[c].append({"role": "user", "content": f"conversation {c} turn {turn}: " + "where is my parcel " * 20})
                    r = client.post("/v1/chat/completions", headers={"X-Session-ID": f"conv-{c}"},
                                    json={"model": "stub/model", "messages": history[c], "max_tokens": 4})
                    assert r.status_code == 200, r.text
                    where[c].append(r.headers["x-c3-backend"])
                    history[c].append({"role": "assistant", "content": r.json()["choices"][0]["message"]["content"]})

    with ThreadPoolExecutor(2) as lanes:
        for done in [lanes.submit(lane, [0, 1, 2, 3]), lanes.submit(lane, [4, 5, 6, 7])]:
            done.result()
    firsts = Counter(turns[0] for turns in where.values())
    assert firsts == {"a": 4, "b": 4}, where  # each pair in flight split over the two replicas
    assert all(len(set(turns)) == 1 for turns in where.values()), where  # every later turn where its first went
    status = pool.status()["cache_routing"]
    assert status["over_load"] >= 1 and status["prefix"] >= 1, status
