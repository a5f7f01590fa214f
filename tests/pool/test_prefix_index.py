"""`--route cache`: the per-backend prefix index (bounded, longest prefix, eviction) and the router's use
of it (balance bound, no match, pins keep working)."""

from __future__ import annotations

import json
import tracemalloc
from collections import Counter

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


def test_longest_prefix_wins_and_ties_name_every_holder():
    index = PrefixIndex(["a", "b", "c"], cap=1000)
    prompt = list(range(1, 11))
    index.record("a", prompt[:3])
    index.record("b", prompt[:7])
    index.record("c", [99, 98])
    assert index.longest(prompt, ["a", "b", "c"]) == (["b"], 7)
    assert index.longest(prompt, ["a", "c"]) == (["a"], 3)
    assert index.longest([42], ["a", "b", "c"]) == ([], 0)
    index.record("c", prompt[:7])
    assert index.longest(prompt, ["c", "b", "a"]) == (["c", "b"], 7)
    index.forget("b")
    assert index.size("b") == 0 and index.longest(prompt, ["b"]) == ([], 0)


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
        for i in range(200):
            index.record("a", block_hashes(prompt_bytes(chat(f"conversation {i} " * 400)), SALT))
            index.record("b", [i * 100_000 + j for j in range(300)])
        # Only what this code allocated and still holds: the index's tables (prefix.py) and the hashes it keeps
        # (made in prefix.py and in this file). The process-wide figure also counted other threads of the test
        # worker: 273 bytes an entry in a CI worker that had run ~1,000 tests, 144 in a fresh process.
        held = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*/backend/pool/prefix.py"),
                                                          tracemalloc.Filter(True, __file__)])
        used = sum(stat.size for stat in held.statistics("filename"))
    finally:
        tracemalloc.stop()
    assert index.size("a") == cap and index.size("b") == cap
    # ~150-170 bytes an entry (a hash in a dict and an order list), by CPython build and allocator state; the
    # bound is what matters: 200 × 300 recorded blocks per backend would be over 10× this without the cap.
    assert used < 2 * cap * 256, f"{used / (2 * cap):.0f} bytes per entry"


def _cached(router, body: bytes, key: str | None = None, exclude=frozenset()):
    return router.choose(key, exclude, prompt=router.prompt_blocks(body))


def test_cache_route_follows_the_prefix_and_respects_the_balance_bound():
    router = make_router(route="cache")
    first, _ = _cached(router, chat("hello there " * 30))
    # Every further turn and every new conversation over the shared system prompt follows the prefix.
    for i in range(20):
        assert _cached(router, chat("hello there " * 30, "answer " * 30, f"turn {i} " * 60))[0] is first
    assert router.cache_outcomes["prefix"] == 20
    # Past the balance bound (with this request 3 in flight against 0: over 1 ahead and over 1.5 × 0)
    # it goes to the least loaded instead.
    first.metrics.in_flight = 2
    others = [x for x in router.order if x is not first]
    others[0].metrics.in_flight = 1
    assert _cached(router, chat("hello there " * 30, "answer " * 30, "more " * 30))[0] is others[1]
    assert router.cache_outcomes["over_load"] == 1
    others[0].metrics.in_flight = others[1].metrics.in_flight = 2  # 3 against 2: one ahead, within the bound
    # (the passed-over request's prompt went to others[1]; `first` still holds the longer prefix here)
    assert _cached(router, chat("hello there " * 30, "answer " * 30, "turn 0 " * 60 + "again"))[0] is first
    # A prompt that shares too little (below --cache-min-match) is balanced as usual.
    short_system = chat("x " * 2000, system="hi")
    for x in router.order:
        x.metrics.in_flight = 0
    first.metrics.in_flight = 5
    assert _cached(router, short_system)[0] is not first
    assert router.cache_outcomes["no_match"] >= 1


@pytest.mark.parametrize(("held", "least", "follows"), [
    (0, 0, True),   # idle: the prefix wins
    (1, 0, False),  # with this request 2 against 0: more than 1 ahead, and no load to be 1.5 × of
    (1, 1, True),   # 2 against 1: one ahead
    (2, 1, False),  # 3 against 1
    (5, 4, True),   # 6 against 4: two ahead, but within 1.5 × 4
    (7, 4, False),  # 8 against 4: past both
])
def test_the_balance_bound_is_absolute_or_relative_counting_this_request(held, least, follows):
    router = make_router(("a", "b"), route="cache")
    a, b = router.order
    body = chat("a question only a has seen " * 20)
    assert router.prefixes is not None
    router.prefixes.record("a", router.prompt_blocks(body) or [])
    a.metrics.in_flight, b.metrics.in_flight = held, least
    assert (_cached(router, body)[0] is a) is follows
    assert router.cache_outcomes == {"prefix": int(follows), "over_load": int(not follows), "no_match": 0}


def test_the_balance_bound_is_a_pool_option():
    router = make_router(("a", "b"), route="cache", cache_balance_abs=4, cache_balance_rel=1.0)
    a, b = router.order
    body = chat("a question only a has seen " * 20)
    assert router.prefixes is not None
    router.prefixes.record("a", router.prompt_blocks(body) or [])
    a.metrics.in_flight = 3  # 4 ahead with this request: within 4
    assert _cached(router, body)[0] is a
    a.metrics.in_flight = 4
    assert _cached(router, body)[0] is b


def test_among_backends_holding_the_longest_prefix_the_least_loaded_gets_it():
    router = make_router(route="cache")
    a, b, c = router.order
    body = chat("the shared start " * 20)
    assert router.prefixes is not None
    for x in (a, b):
        router.prefixes.record(x.name, router.prompt_blocks(body) or [])
    a.metrics.in_flight, b.metrics.in_flight, c.metrics.in_flight = 3, 2, 2
    assert _cached(router, body)[0] is b  # a holds it as well, but b is idler and within the bound of c


def test_a_shared_system_prompt_under_concurrency_spreads_while_sessions_keep_their_backend():
    router = make_router(("a", "b"), route="cache")
    placed: dict[int, str] = {}
    for wave in range(4):  # eight conversations over one system prompt, two first turns in flight at a time
        busy = []
        for c in (2 * wave, 2 * wave + 1):
            b, outcome = router.choose(router.hasher.digest(b"conv-%d" % c), prompt=router.prompt_blocks(chat(f"conversation {c} " * 30)))
            assert outcome == "miss"
            b.metrics.in_flight += 1
            busy.append(b)
            placed[c] = b.name
        for b in busy:
            b.metrics.in_flight -= 1
    assert Counter(placed.values()) == {"a": 4, "b": 4}
    for c in range(8):  # each conversation's next turn stays where its first went (its pin, its history)
        later = chat(f"conversation {c} " * 30, "answer " * 30, "and then? " * 30)
        b, outcome = router.choose(router.hasher.digest(b"conv-%d" % c), prompt=router.prompt_blocks(later))
        assert (b.name, outcome) == (placed[c], "hit")


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
