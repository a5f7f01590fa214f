"""`--route cache`: the per-backend prefix index (bounded, longest prefix, eviction) and the router's use
of it (load bound, no match, pins keep working)."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from backend.pool.prefix import BLOCK, MAX_BLOCKS, PrefixIndex, block_hashes, prompt_bytes
from tests.pool.test_units import make_router

SALT = b"0123456789abcdef0123"
SYSTEM = "You are a careful assistant. " * 40  # ~1.2 KB shared system prompt


def chat(*turns: str, system: str = SYSTEM) -> bytes:
    messages = [{"role": "system", "content": system}]
    for i, text in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return json.dumps({"model": "m", "messages": messages}).encode()


def test_a_later_turn_starts_with_the_earlier_turns_blocks():
    first = block_hashes(prompt_bytes(chat("question one " * 30)), SALT)
    second = block_hashes(prompt_bytes(chat("question one " * 30, "answer " * 40, "question two " * 30)), SALT)
    assert len(first) >= 5 and len(second) > len(first)
    assert second[: len(first)] == first
    other = block_hashes(prompt_bytes(chat("something else " * 30)), SALT)
    shared = len(SYSTEM) // BLOCK  # whole blocks of the system prompt alone
    assert other[:shared] == first[:shared] and other[len(first) - 1] != first[-1]
    assert block_hashes(prompt_bytes(chat("question one " * 30)), b"another-salt-of-16+bytes") != first
    assert prompt_bytes(b"not json") == b"" and prompt_bytes(b'{"prompt": [1, 2, 3]}') == b"1,2,3"
    assert prompt_bytes(json.dumps({"prompt": "x" * (BLOCK * MAX_BLOCKS + 9)}).encode()) == b"x" * (BLOCK * MAX_BLOCKS)


def test_longest_prefix_wins_and_ties_go_to_the_first_name():
    index = PrefixIndex(["a", "b", "c"], cap=1000)
    prompt = list(range(1, 11))
    index.record("a", prompt[:3])
    index.record("b", prompt[:7])
    index.record("c", [99, 98])
    assert index.longest(prompt, ["a", "b", "c"]) == ("b", 7)
    assert index.longest(prompt, ["a", "c"]) == ("a", 3)
    assert index.longest([42], ["a", "b", "c"]) == (None, 0)
    index.record("c", prompt[:7])
    assert index.longest(prompt, ["c", "b"]) == ("c", 7)
    index.forget("b")
    assert index.size("b") == 0 and index.longest(prompt, ["b"]) == (None, 0)


def test_eviction_keeps_the_cap_and_drops_the_least_recent_first():
    index = PrefixIndex(["a"], cap=8)
    shared = [1, 2, 3]
    index.record("a", shared + [10, 11])
    index.record("a", shared + [20, 21])
    assert index.size("a") == 7
    index.record("a", shared + [30, 31, 32])  # 10 distinct > 8: the oldest extensions go, not the shared start
    assert index.size("a") == 8 and index.evictions == 2
    assert index.matched("a", shared + [30, 31, 32]) == 6
    assert index.matched("a", shared + [10, 11]) == 3  # its own blocks went first
    assert index.matched("a", shared + [20, 21]) == 5


def test_index_memory_stays_bounded_per_backend():
    cap = 4096
    index = PrefixIndex(["a", "b"], cap=cap)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200):
            index.record("a", block_hashes(prompt_bytes(chat(f"conversation {i} " * 400)), SALT))
            index.record("b", [i * 100_000 + j for j in range(300)])
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert index.size("a") == cap and index.size("b") == cap
    # ~150-170 bytes an entry (a hash in a dict and an order list), by CPython build and allocator state; the
    # bound is what matters: 200 × 300 recorded blocks per backend would be over 10× this without the cap.
    assert used < 2 * cap * 256, f"{used / (2 * cap):.0f} bytes per entry"


def _cached(router, body: bytes, key: str | None = None, exclude=frozenset()):
    return router.choose(key, exclude, prompt=router.prompt_blocks(body))


def test_cache_route_follows_the_prefix_and_respects_the_load_bound():
    router = make_router(route="cache")
    a, b, c = router.order
    first, _ = _cached(router, chat("hello there " * 30))
    # Every further turn and every new conversation over the shared system prompt follows the prefix.
    for i in range(20):
        assert _cached(router, chat("hello there " * 30, "answer " * 30, f"turn {i} " * 60))[0] is first
    assert router.cache_outcomes["prefix"] == 20
    # Over the load bound (in flight + 1 > 2 × (least + 1)) it goes to the least loaded instead.
    first.metrics.in_flight = 2
    others = [x for x in router.order if x is not first]
    others[0].metrics.in_flight = 1
    assert _cached(router, chat("hello there " * 30, "answer " * 30, "more " * 30))[0] is others[1]
    assert router.cache_outcomes["over_load"] == 1
    others[1].metrics.in_flight = 1  # least is now 1: 2 + 1 <= 2 × 2, the match is taken again
    # (the overloaded request's prompt went to others[1]; `first` still holds the longer prefix here)
    assert _cached(router, chat("hello there " * 30, "answer " * 30, "turn 0 " * 60 + "again"))[0] is first
    # A prompt that shares too little (below --cache-min-match) is balanced as usual.
    short_system = chat("x " * 2000, system="hi")
    for x in router.order:
        x.metrics.in_flight = 0
    first.metrics.in_flight = 5
    assert _cached(router, short_system)[0] is not first
    assert router.cache_outcomes["no_match"] >= 1


def test_cache_route_keeps_pins_and_forgets_a_backend_that_leaves():
    router = make_router(route="cache")
    body = chat("pinned conversation " * 30)
    sessions = [router.hasher.digest(b"s%d" % i) for i in range(30)]
    pinned = {}
    for key in sessions:
        b, outcome = router.choose(key)  # plain ring pins, no prompt
        assert outcome == "miss"
        pinned[key] = b
    assert len({b.name for b in pinned.values()}) > 1
    _cached(router, body)
    for key in sessions:
        assert _cached(router, body, key) == (pinned[key], "hit")  # a live pin beats the prefix
    assert router.cache_outcomes == {"prefix": 0, "over_load": 0, "no_match": 1}
    fresh = chat("a conversation only one backend has seen " * 20, system="Another system prompt. " * 60)
    holder, _ = _cached(router, fresh)
    for i in range(10):  # new sessions follow the prefix, whatever the ring says
        assert _cached(router, fresh, router.hasher.digest(b"new-%d" % i)) == (holder, "miss")
    holder.health.state = "down"
    router._state_changed(holder, "up")
    assert router.prefixes is not None and router.prefixes.size(holder.name) == 0


def test_ring_route_ignores_prompts():
    router = make_router()
    assert router.prefixes is None and router.prompt_blocks(chat("hello " * 100)) is None
    seen = {_cached(router, chat("hello there " * 30, f"turn {i} " * 30))[0].name for i in range(30)}
    assert len(seen) > 1


@pytest.mark.parametrize("route", ["ring", "cache"])
def test_status_says_the_route(route):
    router = make_router(route=route)
    doc = router.status()
    assert doc["route"] == route and set(doc["cache_routing"]) == {"prefix", "over_load", "no_match"}
    assert all("prefix_blocks" in b for b in doc["backends"])
