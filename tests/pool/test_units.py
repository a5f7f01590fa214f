"""Unit tests of the router's parts: keys, ring, pins, bounded load, health, HTTP heads, metrics, unit."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from backend.errors import UsageError
from backend.pool.heads import HeadError, forward_fields, parse_request, parse_response
from backend.pool.health import BackendHealth, HealthPolicy
from backend.pool.keys import KeyHasher, extract_key, load_or_create_salt, parse_sticky
from backend.pool.pins import PinTable
from backend.pool.ring import HashRing, key_point
from backend.pool.router import PoolConfig, Router
from c3.cli.pool import parse_bind

SECRET = b"Bearer sk-live-0123456789abcdef"


def test_sticky_modes_parse_and_reject():
    assert str(parse_sticky("auto")) == "auto"
    assert str(parse_sticky("Authorization")) == "authorization"
    assert str(parse_sticky("header:X-Conv")) == "header:x-conv"
    assert str(parse_sticky("none")) == "none"
    for bad in ("", "sticky", "header:", "header:a b", "header:x:y"):
        with pytest.raises(UsageError):
            parse_sticky(bad)


def test_key_precedence_and_empty_values_count_as_absent():
    auto = parse_sticky("auto")
    both = {b"x-session-id": b"s1", b"authorization": SECRET}
    assert extract_key(both, auto) == (b"s1", "x-session-id")
    assert extract_key({b"x-session-id": b"  ", b"authorization": SECRET}, auto) == (SECRET, "authorization")
    assert extract_key({b"authorization": b""}, auto) == (None, "none")
    assert extract_key(both, parse_sticky("authorization")) == (SECRET, "authorization")
    assert extract_key(both, parse_sticky("header:X-Conv")) == (None, "none")
    assert extract_key({b"x-conv": b"c9"}, parse_sticky("header:X-Conv")) == (b"c9", "x-conv")
    assert extract_key(both, parse_sticky("none")) == (None, "none")


def test_key_hash_is_salted_stable_and_hides_the_value(tmp_path):
    salt = load_or_create_salt(tmp_path / "salt")
    assert load_or_create_salt(tmp_path / "salt") == salt
    assert (tmp_path / "salt").stat().st_mode & 0o777 == 0o600
    h1, h2 = KeyHasher(salt), KeyHasher(b"another-salt-of-16+bytes")
    digest = h1.digest(SECRET)
    assert digest == h1.digest(SECRET) and len(digest) == 16
    assert digest != h2.digest(SECRET)
    assert "sk-live" not in digest and SECRET.hex() not in digest


def test_ring_moves_only_the_removed_backends_keys_and_spreads_them():
    names = ["a", "b", "c", "d"]
    full, three = HashRing(names), HashRing(["a", "b", "c"])
    keys = [f"{random.Random(i).getrandbits(64):016x}" for i in range(10_000)]
    before = {k: full.owner(key_point(k)) for k in keys}
    after = {k: three.owner(key_point(k)) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(before[k] == "d" for k in moved)
    assert 0.18 < len(moved) / len(keys) < 0.32
    share = Counter(after[k] for k in moved)
    mean = len(moved) / 3
    assert all(abs(v - mean) / mean < 0.25 for v in share.values()), share
    assert list(full.walk(key_point(keys[0])))[0] == before[keys[0]]
    assert sorted(full.walk(key_point(keys[0]))) == names


def test_pin_table_lru_cap_and_idle_ttl():
    now = [0.0]
    pins = PinTable(cap=3, ttl_s=10, clock=lambda: now[0])
    for k in "wxyz":
        pins.set(k, "a")
    assert len(pins) == 3 and pins.peek("w") is None and pins.counts["a"] == 3
    now[0] = 5
    assert pins.get("x") == "a"  # refreshes x
    now[0] = 12
    assert pins.get("y") is None  # idle 12 s > 10 s
    assert pins.get("x") == "a"
    assert pins.sweep() == 1 and len(pins) == 1 and pins.counts["a"] == 1
    pins.set("x", "b")
    assert pins.counts["a"] == 0 and pins.counts["b"] == 1
    rows = pins.export()
    other = PinTable(clock=lambda: 100.0)
    assert other.restore(rows + [("gone", "zz", 0.0)], {"a", "b"}) == 1 and other.peek("x") == "b"


def test_pin_table_stays_bounded_under_many_keys():
    pins = PinTable(cap=1000)
    for i in range(100_000):
        pins.set(f"{i:016x}", "abc"[i % 3])
    assert len(pins) == 1000 and sum(pins.counts.values()) == 1000


def make_router(names=("a", "b", "c"), **kw) -> Router:
    config = PoolConfig(backends=[(n, f"http://127.0.0.1:{9000 + i}") for i, n in enumerate(names)], **kw)
    router = Router(config, salt=b"0123456789abcdef0123")
    for b in router.order:
        b.health.state = "up"
    return router


def test_bounded_load_caps_new_keys_at_125_percent_of_average():
    router = make_router()
    chosen = Counter()
    for i in range(300):
        b, outcome = router.choose(router.hasher.digest(b"key-%d" % i))
        assert outcome == "miss"
        chosen[b.name] += 1
    assert max(chosen.values()) <= math.ceil(1.25 * 300 / 3), chosen
    assert sum(chosen.values()) == 300


def test_pin_moves_only_when_unroutable_and_never_bounces_back():
    router = make_router()
    key = router.hasher.digest(b"session-1")
    first, outcome = router.choose(key)
    assert outcome == "miss"
    assert router.choose(key) == (first, "hit")
    first.health.state = "down"
    second, outcome = router.choose(key)
    assert outcome == "repin" and second is not first and second.metrics.repins == 1
    first.health.state = "up"
    assert router.choose(key) == (second, "hit")
    # A retry away from a still-routable pin serves elsewhere but keeps the pin.
    other, outcome = router.choose(key, exclude={second.name})
    assert outcome == "miss" and other is not second and router.pins.peek(key) == second.name


def test_unkeyed_requests_go_to_least_in_flight():
    router = make_router()
    router.backends["a"].metrics.in_flight = 3
    router.backends["b"].metrics.in_flight = 1
    router.backends["c"].metrics.in_flight = 2
    assert router.choose(None) == (router.backends["b"], "none")
    router.backends["b"].health.state = "loading"
    assert router.choose(None)[0].name == "c"
    for b in router.order:
        b.health.state = "down"
    assert router.choose(None) is None and router.choose("00ff00ff00ff00ff") is None


def test_health_hysteresis_and_passive_marking():
    h = BackendHealth(HealthPolicy(down_after=3, up_after=2))
    assert h.routable and h.state == "unknown"
    assert h.probe_result("ok", 1.0) and h.state == "up"
    assert not h.probe_result("fail", None) and not h.probe_result("fail", None) and h.routable
    assert h.probe_result("fail", None, "refused") and h.state == "down" and not h.routable
    assert not h.probe_result("ok", 1.0) and h.state == "down"
    assert h.probe_result("ok", 1.0) and h.state == "up"
    assert h.passive_failure("connect refused", hard=True) and h.state == "down"
    h2 = BackendHealth(HealthPolicy())
    assert h2.probe_result("loading", 1.0) and h2.state == "loading" and not h2.routable
    h3 = BackendHealth(HealthPolicy(down_after=3))
    h3.state = "up"
    assert not h3.passive_failure("closed before answering", hard=False)
    h3.passive_success()
    assert not h3.passive_failure("closed before answering", hard=False) and not h3.passive_failure("closed before answering", hard=False)
    assert h3.passive_failure("closed before answering", hard=False) and h3.state == "down"


def test_http_heads_parse_and_hop_by_hop_headers_are_dropped():
    req = parse_request(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, X-Hop\r\n"
                        b"X-Hop: 1\r\nAuthorization: Bearer k\r\nContent-Length: 12\r\n\r\n")
    assert req.a == b"POST" and req.b == b"/v1/chat/completions"
    assert (req.framing, req.length) == ("length", 12)
    # Re-serialized from fields: framing, Host and hop-by-hop headers are the router's to write.
    assert forward_fields(req, {b"host"}) == b"Authorization: Bearer k\r\n"
    assert req.keep_alive
    assert not parse_request(b"GET / HTTP/1.0\r\n\r\n").keep_alive
    resp = parse_response(b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert resp.a == b"503" and resp.framing == "chunked"
    for bad, status in ((b"GARBAGE\r\n\r\n", 400), (b"GET / HTTP/1.1\r\nHost: x\r\nno-colon\r\n\r\n", 400),
                        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
                        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
                        (b"POST / HTTP/1.1\r\nHost: x\r\nConnection: content-length\r\nContent-Length: 2\r\n\r\n", 400)):
        with pytest.raises(HeadError) as info:
            parse_request(bad)
        assert info.value.status == status, bad
    for bad in (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nX: a\nTransfer-Encoding: chunked\r\n\r\n"):
        with pytest.raises(HeadError) as info:
            parse_response(bad)
        assert info.value.status == 502


def test_chunk_scanner_refuses_malformed_sizes_without_looping():
    from backend.pool.http1 import BadMessage, ChunkScanner

    for bad in (b"-6\r\nhello\r\n0\r\n\r\n", b"0x5\r\nhello\r\n", b"+5\r\nhello\r\n", b"0_5\r\nhello\r\n",
                b"5\r\nhelloXY0\r\n\r\n", b"5\nhello\r\n", b"0\r\nX: a\nY: b\r\n\r\n", b"1" * 17 + b"\r\n"):
        with pytest.raises(BadMessage):
            ChunkScanner().feed(bad)


def test_metrics_render_has_every_family():
    router = make_router()
    m = router.backends["a"].metrics
    m.requests, m.errors, m.retries = 5, 1, 1
    m.observe(0.002)
    router.metrics.sticky["hit"] = 3
    router.metrics.sticky["miss"] = 1
    text = router.render_metrics()
    for family in ("c3_pool_requests_total", "c3_pool_errors_total", "c3_pool_retries_total", "c3_pool_repins_total",
                   "c3_pool_in_flight", "c3_pool_latency_seconds_bucket", "c3_pool_sticky_hit_ratio", "c3_pool_backend_up"):
        assert f"# TYPE {family.removesuffix('_bucket')}" in text
    assert 'c3_pool_requests_total{backend="a",url="http://127.0.0.1:9000"} 5' in text
    assert "c3_pool_sticky_hit_ratio 0.750000" in text
    assert 'c3_pool_latency_seconds_bucket{backend="a",url="http://127.0.0.1:9000",le="0.0025"} 1' in text


@pytest.mark.parametrize(("text", "expected"), [(":8011", ("0.0.0.0", 8011)), ("8011", ("0.0.0.0", 8011)),
                                                ("127.0.0.1:9000", ("127.0.0.1", 9000)), ("[::1]:8011", ("::1", 8011))])
def test_parse_bind(text, expected):
    assert parse_bind(text) == expected


@pytest.mark.parametrize("text", ["foo", ":0", ":99999", "1.2.3.4", "a:b"])
def test_parse_bind_rejects(text):
    with pytest.raises(UsageError):
        parse_bind(text)


def test_unit_renders_and_verifies(require_service):
    from backend.pool.service import render_unit, verify_unit

    text = render_unit(["a", "b"], ":8011", "header:x-conv", 8011, drain_timeout_s=20)
    assert "pool serve --nodes a,b --bind :8011 --sticky header:x-conv --drain-timeout 20" in text
    assert "TimeoutStopSec=30" in text and "Restart=on-failure" in text
    ok, output = verify_unit(text, "c3-pool-8011.service")
    require_service("systemd-analyze", ok is not None, output)
    assert ok, output
    broken, output = verify_unit(text.replace("Type=simple", "Type=nonsense"), "c3-pool-8011.service")
    assert broken is False, output


def _chunked(chunks: list[bytes], trailer: bytes = b"") -> bytes:
    return b"".join(b"%x;ext=1\r\n%s\r\n" % (len(c), c) if i % 2 else b"%X\r\n%s\r\n" % (len(c), c) for i, c in enumerate(chunks)) + b"0\r\n" + trailer + b"\r\n"


def test_chunk_scanner_follows_framing_over_any_split():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from backend.pool.http1 import ChunkScanner

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.binary(min_size=1, max_size=40), max_size=6), st.lists(st.integers(1, 30), max_size=20), st.booleans())
    def check(chunks, cuts, with_trailer):
        body = _chunked(chunks, b"X-T: 1\r\n" if with_trailer else b"")
        data = body + b"HTTP/1.1 200 extra"
        scanner, pos, consumed, boundaries = ChunkScanner(), 0, 0, []
        pieces = []
        for cut in cuts:
            pieces.append(data[pos : pos + cut])
            pos += cut
        pieces.append(data[pos:])
        for piece in pieces:
            if scanner.done or not piece:
                continue
            used = scanner.feed(piece)
            if scanner.boundary >= 0:
                boundaries.append(consumed + scanner.boundary)
            consumed += used
        assert scanner.done and consumed == len(body)
        ends, at = set(), 0
        for c in chunks:
            at += len(b"%x\r\n" % len(c)) + len(c) + 2 + (len(b";ext=1") if len(ends) % 2 else 0)
            ends.add(at)
        assert set(boundaries) <= ends | {len(body)} and boundaries[-1] == len(body)

    check()


async def test_relay_chunked_holds_back_a_partial_chunk_and_reports_extra_bytes():
    import asyncio

    from backend.pool.http1 import relay_chunked

    reader = asyncio.StreamReader()
    out: list[bytes] = []
    reader.feed_data(b"5\r\nhello\r\n6\r\nwor")
    task = asyncio.create_task(relay_chunked(reader, out.append, prefix=b"HEAD|"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert out == [b"HEAD|5\r\nhello\r\n"]  # "wor" is an unfinished chunk: held
    reader.feed_data(b"ld!\r\n0\r\n\r\nSTRAY")
    assert await asyncio.wait_for(task, 5) is False  # bytes after the body: connection not reusable
    assert b"".join(out) == b"HEAD|5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n"


def test_drain_keeps_a_busy_pin_and_moves_an_idle_one():
    router = make_router()
    key = router.hasher.digest(b"session-drain")
    first, _ = router.choose(key)
    assert router.set_draining(first.name, True) is first and router.set_draining("ghost", True) is None
    router.key_busy[key] = 1  # a request of this session is still in flight on `first`
    assert router.choose(key) == (first, "hit")
    for i in range(50):  # new keys and unkeyed requests avoid the draining backend
        assert router.choose(router.hasher.digest(b"new-%d" % i))[0] is not first
        assert router.choose(None)[0] is not first
    del router.key_busy[key]
    moved, outcome = router.choose(key)
    assert outcome == "repin" and moved is not first
    router.set_draining(first.name, False)
    assert router.choose(key) == (moved, "hit")  # undrain does not pull it back


async def test_a_node_url_with_credentials_is_never_shown_served_or_logged(caplog):
    """Defence in depth: node add refuses userinfo, but one that reaches the router anyway is redacted."""
    import asyncio
    import logging

    from backend.pool.proxy import PoolServer
    from backend.pool.router import PoolConfig, Router

    secret_url = "http://alice:hunter2-s3cret@127.0.0.1:9/v1"
    config = PoolConfig(backends=[("a", secret_url)], host="127.0.0.1", port=0, probe_interval_s=60, probe_timeout_s=0.2)
    with caplog.at_level(logging.INFO, logger="c3.pool"):
        router = Router(config)
        server = PoolServer(router)
        await server.start()
        try:
            answers = []
            for path in (b"/c3/status", b"/metrics"):
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                answers.append(await reader.read())
                writer.close()
        finally:
            await server.shutdown(0)
    assert all(a.startswith(b"HTTP/1.1 200 ") for a in answers)
    shown = b"".join(answers).decode() + str(router.status()) + router.render_metrics() + caplog.text
    assert "hunter2" not in shown and "alice" not in shown
    assert "http://127.0.0.1:9/v1" in shown  # still identifiable without its credentials
    assert "carries user:password" in caplog.text
    with pytest.raises(ValueError) as info:
        Router(PoolConfig(backends=[("b", "ftp://bob:pw-s3cret@host")]))
    assert "pw-s3cret" not in str(info.value) and "ftp://host" in str(info.value)
