"""Sessions, not tenants (issue 26): under `--sticky auto` one shared API key is a tenant, and each of its
conversations is a session of its own — named by the `user` field, `X-Session-ID`, or else the
conversation's prefix (system + first user message; the start of a completion prompt)."""

from __future__ import annotations

from collections import Counter, defaultdict

import httpx

from tests.pool.conftest import admin_headers

SHARED_KEY = {"Authorization": "Bearer sk-the-whole-team"}


def _turns(i: int) -> list[list[dict[str, str]]]:
    """Three turns of conversation `i`: each sends the whole history so far, as chat clients do."""
    history = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": f"question number {i}: why?"}]
    turns = [list(history)]
    for turn in (1, 2):
        history += [{"role": "assistant", "content": f"answer {turn}"}, {"role": "user", "content": f"follow-up {turn}"}]
        turns.append(list(history))
    return turns


def test_one_api_key_many_conversations_spread_and_each_stays_put(shared_stubs, pool_process):
    backends = shared_stubs("a", "b", extra=("--tokens", "1"))
    pool = pool_process({n: s.url for n, s in backends.items()}, "--sticky", "auto")
    where: dict[int, set[str]] = defaultdict(set)
    sources = Counter()
    with httpx.Client(base_url=pool.url, timeout=10, headers={**SHARED_KEY, **admin_headers()}) as client:
        conversations = {i: _turns(i) for i in range(20)}
        for turn in range(3):  # interleaved, as concurrent users are
            for i, turns in conversations.items():
                r = client.post("/v1/chat/completions", json={"model": "stub/model", "messages": turns[turn], "max_tokens": 4})
                assert r.status_code == 200, r.text
                where[i].add(r.headers["x-c3-backend"])
                sources[r.headers["x-c3-key-source"]] += 1
    assert all(len(seen) == 1 for seen in where.values()), where  # every turn on the conversation's backend
    per_backend = Counter(next(iter(seen)) for seen in where.values())
    assert max(per_backend.values()) <= 15, per_backend  # neither gets more than 75 % of conversations
    assert sources == {"prefix": 60}
    assert pool.status()["pins"] == 20


def test_user_field_and_session_header_name_the_session_within_a_tenant(shared_stubs, pool_process):
    backends = shared_stubs("a", "b", extra=("--tokens", "1"))
    pool = pool_process({n: s.url for n, s in backends.items()}, "--sticky", "auto")
    with httpx.Client(base_url=pool.url, timeout=10, headers={**SHARED_KEY, **admin_headers()}) as client:
        by_user: dict[str, set[str]] = defaultdict(set)
        for turn in range(2):
            for u in range(10):
                # The same first message for every user: the `user` field, not the prefix, names the session.
                body = {"model": "stub/model", "messages": [{"role": "user", "content": f"hi {turn}"}], "user": f"u{u}"}
                r = client.post("/v1/chat/completions", json=body)
                assert r.status_code == 200 and r.headers["x-c3-key-source"] == "user"
                by_user[f"u{u}"].add(r.headers["x-c3-backend"])
        assert all(len(s) == 1 for s in by_user.values()) and len({next(iter(s)) for s in by_user.values()}) == 2, by_user
        r = client.post("/v1/completions", json={"model": "stub/model", "prompt": "x" * 10_000, "user": "u1"},
                        headers={"X-Session-ID": "desk-7"})
        assert r.headers["x-c3-key-source"] == "x-session-id"  # the header wins over the body
        prompt = "Once upon a time " * 400
        first = client.post("/v1/completions", json={"model": "stub/model", "prompt": prompt, "max_tokens": 2})
        later = client.post("/v1/completions", json={"model": "stub/model", "prompt": prompt + " and then more", "max_tokens": 2})
        assert first.headers["x-c3-key-source"] == later.headers["x-c3-key-source"] == "prefix"
        assert (later.headers["x-c3-backend"], later.headers["x-c3-sticky"]) == (first.headers["x-c3-backend"], "hit")
        models = client.get("/v1/models")  # no body: the tenant is all there is
        assert models.headers["x-c3-key-source"] == "authorization"


def test_session_key_is_bounded_and_tenant_scoped():
    from backend.pool.keys import PARSE_LIMIT, parse_sticky, session_key

    auto = parse_sticky("auto")
    alice = b'{"user": "alice", "messages": [{"role": "user", "content": "hi"}]}'
    one, two = {b"authorization": b"Bearer sk-1"}, {b"authorization": b"Bearer sk-2"}
    assert session_key(one, alice, auto)[1] == "user"
    assert session_key(one, alice, auto)[0] != session_key(two, alice, auto)[0]  # one user name, two tenants
    huge = b'{"messages": [{"role": "user", "content": "' + b"x" * PARSE_LIMIT + b'"}]}'
    for body in (huge, b"not json", b"{broken", b"[" * 100_000, b'{"messages": [{"role": "system", "content": "s"}]}', None):
        assert session_key(one, body, auto) == (b"Bearer sk-1", "authorization"), body[:20] if body else body
    reordered = b'{"messages": [{"content": "hi", "role": "user"}], "model": "m"}'
    assert session_key(one, reordered, auto) == session_key(one, b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}', auto)
    assert session_key(one, alice, parse_sticky("authorization")) == (b"Bearer sk-1", "authorization")
