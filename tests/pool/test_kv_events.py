"""`--route cache --kv-events`: the prefix index forgets what the engines' KV-cache events say they forgot.

The publishers here are real ZMQ PUB sockets sending vLLM's wire format (topic, 8-byte sequence, msgpack
`[ts, [event…], dp_rank]` with `type`-tagged event maps, as vLLM 0.32's `ZmqEventPublisher` encodes them;
tests/real_engine/test_pool_kv_events_real.py reads a real vLLM's). The router is started as `pool serve`
starts it, so a router that never subscribes, or reads the events but never trims, fails here."""

from __future__ import annotations

import asyncio
import time

import msgpack
import pytest
import zmq

from backend.errors import UsageError
from backend.pool.kvevents import KvEvents, parse_endpoints
from backend.pool.router import PoolConfig, Router
from tests.pool.test_engine_load import MetricsStub, route
from tests.pool.test_prefix_index import chat

BACKENDS = [("a", "http://10.0.0.2:8000/v1"), ("b", "http://spark-2:8000/v1")]


def stored(*hashes, medium="GPU") -> dict:
    return {"type": "BlockStored", "block_hashes": list(hashes), "parent_block_hash": None, "token_ids": [1] * 16 * len(hashes),
            "block_size": 16, "lora_id": None, "medium": medium, "lora_name": None}


def removed(*hashes, medium="GPU") -> dict:
    return {"type": "BlockRemoved", "block_hashes": list(hashes), "medium": medium}


CLEARED = {"type": "AllBlocksCleared"}


def frames(seq: int, *events: dict) -> list[bytes]:
    return [b"", seq.to_bytes(8, "big"), msgpack.packb([time.time(), list(events), None])]


# -- the endpoint spec ---------------------------------------------------------------------------------------


def test_a_port_means_every_backends_host_and_names_give_each_its_own():
    assert parse_endpoints("5557", BACKENDS) == {"a": "tcp://10.0.0.2:5557", "b": "tcp://spark-2:5557"}
    assert parse_endpoints("a=tcp://127.0.0.1:7001, b=tcp://127.0.0.1:7002", BACKENDS) == {
        "a": "tcp://127.0.0.1:7001", "b": "tcp://127.0.0.1:7002"}
    assert parse_endpoints("b=tcp://h:1", BACKENDS) == {"b": "tcp://h:1"}  # a backend without events: none read


@pytest.mark.parametrize("spec, says", [
    ("70000", "--kv-events `70000` is not a TCP port (a number from 1 to 65535)"),
    ("c=tcp://h:1", "not one of the pool's nodes (a, b)"),
    ("a=tcp://h:1,a=tcp://h:2", "names a twice"),
    ("a=http://h:1", "must be tcp://HOST:PORT"),
    ("a=tcp://h", "must be tcp://HOST:PORT"),
    ("a=tcp://h:99999", "must be tcp://HOST:PORT"),
    ("a=tcp://h:1/x", "must be tcp://HOST:PORT"),
    ("tcp://h:1", "give a port, or NAME=tcp://HOST:PORT"),
    ("５５５７", "give a port, or NAME=tcp://HOST:PORT"),  # full-width digits are not a port
])
def test_a_bad_spec_is_one_usage_error(spec, says):
    with pytest.raises(UsageError) as caught:
        parse_endpoints(spec, BACKENDS)
    assert says in caught.value.message


# -- reading the events ----------------------------------------------------------------------------------------


def test_an_eviction_is_the_share_of_the_blocks_seen_stored_and_a_clear_is_everything():
    kv = KvEvents({"a": "tcp://127.0.0.1:1"})
    assert kv.take("a", frames(0, stored(*range(10)))) == 0.0
    assert kv.take("a", frames(1, removed(0, 1))) == pytest.approx(2 / 10)
    assert kv.take("a", frames(2, removed(1000, 1001))) == 0.0  # stored before the router subscribed: not ours
    assert kv.take("a", frames(3, removed(2, 3, medium="CPU"))) == 0.0  # an offloading tier's copy
    assert kv.take("a", frames(4, removed(2), removed(3))) == pytest.approx(1 - (7 / 8) * (6 / 7))
    assert kv.take("a", frames(5, stored(20), CLEARED)) == 1.0
    row = kv.row("a")
    assert row is not None
    assert (row["engine_blocks"], row["stored"], row["removed"], row["cleared"], row["gaps"], row["bad"]) == (0, 11, 6, 1, 0, 0)


def test_lost_and_malformed_messages_are_counted_and_reading_goes_on():
    kv = KvEvents({"a": "tcp://127.0.0.1:1"})
    kv.take("a", frames(0, stored(1, 2)))
    kv.take("a", frames(5, stored(3)))  # 1-4 lost

    def seq(n: int) -> bytes:
        return n.to_bytes(8, "big")

    for bad in ([b"", seq(6), b"\xc1"], [b"", seq(7), msgpack.packb({"x": 1})], [b"", seq(8), msgpack.packb([1.0, 7])],
                [b"only one frame"], [b"", b"\0" * 3, b""], [b"", seq(9), msgpack.packb([1.0, [7, "x", {"type": 1}, removed("z")]])]):
        assert kv.take("a", bad) == 0.0
    row = kv.row("a")
    assert row is not None
    # one gap (0 → 5); three unreadable payloads and two malformed framings; the last batch is well formed, its events odd
    assert (row["engine_blocks"], row["gaps"], row["restarts"], row["bad"]) == (3, 1, 0, 5), row
    assert kv.take("a", frames(10, removed(3))) == pytest.approx(1 / 3)


def test_a_sequence_that_starts_again_is_a_new_engine_whose_cache_is_empty():
    kv = KvEvents({"a": "tcp://127.0.0.1:1"})
    kv.take("a", frames(41, stored(1, 2, 3)))
    kv.take("a", frames(42, stored(4)))
    assert kv.take("a", frames(0, stored(9))) == 1.0  # restarted: everything the index held for it is gone
    row = kv.row("a")
    assert row is not None
    assert (row["engine_blocks"], row["restarts"], row["gaps"]) == (1, 1, 0), row
    assert kv.take("a", frames(1, removed(1))) == 0.0  # a block of the old process: not this one's


def test_what_is_remembered_is_bounded(monkeypatch):
    import backend.pool.kvevents as kvevents

    monkeypatch.setattr(kvevents, "MAX_KNOWN", 4)
    kv = KvEvents({"a": "tcp://127.0.0.1:1"})
    kv.take("a", frames(0, stored(*range(10))))
    assert len(kv.feeds["a"].known) == 4 and kv.feeds["a"].untracked == 6


# -- a started router ----------------------------------------------------------------------------------------------


class Publisher:
    """A ZMQ PUB on loopback sending vLLM-format batches with its own sequence numbers."""

    def __init__(self, ctx: zmq.Context) -> None:
        self.sock = ctx.socket(zmq.PUB)
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.seq = 0

    def send(self, *events: dict) -> None:
        self.sock.send_multipart(frames(self.seq, *events))
        self.seq += 1


async def wait_for(predicate, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def test_a_router_forgets_what_the_engine_evicted_and_everything_it_cleared():
    ctx = zmq.Context()
    pubs = {"a": Publisher(ctx), "b": Publisher(ctx)}
    stubs = [MetricsStub(), MetricsStub()]
    urls = [await s.start() for s in stubs]
    config = PoolConfig(backends=[("a", urls[0]), ("b", urls[1])], route="cache", sticky="none", probe_interval_s=60,
                        cache_load="in-flight", kv_events={n: f"tcp://127.0.0.1:{p.port}" for n, p in pubs.items()})
    router = Router(config, salt=b"0123456789abcdef0123")
    await router.start()
    try:
        assert router.prefixes is not None
        # A PUB drops what it sends before a subscriber has joined: send until the router has one.
        await wait_for(lambda: (pubs["a"].send(stored(0)) or router.status()["backends"][0]["kv_events"]["messages"] > 0),
                       "the router to subscribe")
        pubs["b"].send(stored(0))
        pubs["a"].send(stored(*range(1, 40)))  # the engine holds 40 blocks
        await wait_for(lambda: router.status()["backends"][0]["kv_events"]["engine_blocks"] == 40, "40 blocks on a")

        prompts = [chat(f"conversation {i} " * 40) for i in range(10)]
        for body in prompts:
            router.prefixes.record("a", router.prompt_blocks(body) or [])
        before = router.prefixes.size("a")
        assert before >= 20 and route(router, prompts[0]) == "a"

        pubs["a"].send(removed(*range(10)))  # a quarter of the engine's blocks evicted (its oldest)
        await wait_for(lambda: router.status()["backends"][0]["kv_events"]["removed"] == 10, "the eviction")
        await wait_for(lambda: router.prefixes.size("a") <= before * 3 // 4, "a quarter of a's index to go")
        row = router.status()["backends"][0]
        assert row["prefix_blocks"] == before - row["kv_events"]["trimmed"] and row["kv_events"]["trimmed"] == before // 4
        assert route(router, prompts[-1]) == "a"  # the newest conversations are still held...
        oldest = router.prompt_blocks(prompts[1]) or []  # (prompts[0] was touched again by the route above)
        assert router.prefixes.matched("a", oldest) < len(oldest)  # ...the oldest is not, whole

        pubs["a"].send(CLEARED)
        await wait_for(lambda: router.prefixes.size("a") == 0, "a's index to empty")
        outcomes = dict(router.cache_outcomes)
        route(router, prompts[-1])
        assert router.cache_outcomes["no_match"] == outcomes["no_match"] + 1
        rows = [b["kv_events"] for b in router.status()["backends"]]
        assert rows[0]["cleared"] == 1 and rows[0]["engine_blocks"] == 0 and rows[0]["error"] is None
        assert rows[1]["messages"] >= 1 and rows[1]["trimmed"] == 0
    finally:
        await router.stop()
        for s in stubs:
            s.close()
        for p in pubs.values():
            p.sock.close(0)
        ctx.term()


async def test_without_kv_events_nothing_subscribes():
    stub = MetricsStub()
    config = PoolConfig(backends=[("a", await stub.start())], route="cache", probe_interval_s=60, cache_load="in-flight")
    router = Router(config)
    await router.start()
    try:
        assert router.kv is None and router.status()["backends"][0]["kv_events"] is None
    finally:
        await router.stop()
        stub.close()


@pytest.mark.parametrize("args, says", [
    (("--kv-events", "5557"), "c3: error: --kv-events is read by the cache route only"),
    (("--route", "cache", "--kv-events", "a=tcp://h:1,c=tcp://h:2"), "c3: error: --kv-events names 'c', which is not one of the pool's nodes (a, b)"),
    (("--route", "cache", "--kv-events", "a=udp://h:1"), "c3: error: --kv-events a=udp://h:1: the endpoint must be tcp://HOST:PORT"),
])
def test_pool_serve_refuses_a_bad_kv_events_flag_in_one_line_before_listening(args, says):
    import subprocess

    from scripts.rig.engine_procs import free_port
    from tests.pool.conftest import c3_argv, register

    register("a", "http://127.0.0.1:1")
    register("b", "http://127.0.0.1:2")
    done = subprocess.run([*c3_argv(), "pool", "serve", "--nodes", "a,b", "--bind", f"127.0.0.1:{free_port()}", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.splitlines()[0] == says, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_pool_status_says_what_the_events_said_or_that_none_came():
    from backend.pool.status import KvEventsStatus
    from c3.cli.pool import _kv_line

    quiet = KvEventsStatus(endpoint="tcp://10.0.0.2:5557")
    assert _kv_line(quiet) == "kv events: none yet from tcp://10.0.0.2:5557 (is the engine's --kv-events-config endpoint tcp://*:PORT?)"
    heard = KvEventsStatus(endpoint="tcp://10.0.0.2:5557", messages=9, engine_blocks=12, removed=4, cleared=1, trimmed=30,
                           gaps=2, last_event_age_s=3.2)
    assert _kv_line(heard) == ("kv events: engine holds 12 blocks seen stored, 4 evicted, 1 cleared; 30 index entries dropped; "
                               "last 3s ago (⚠ 2 lost, 0 unreadable)")


@pytest.mark.parametrize("host", ["localhost", "[::1]"], ids=["by-name", "ipv6"])
async def test_the_reader_reaches_a_publisher_by_host_name_and_by_ipv6_address(host):
    """The endpoints `--kv-events PORT` makes from the backends' URLs: a node's name (resolved by ZMQ) or an
    IPv6 address (ZMQ refuses those unless the socket allows IPv6)."""
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.IPV6, 1)
    port = pub.bind_to_random_port("tcp://[::1]" if host == "[::1]" else "tcp://127.0.0.1")
    endpoint = parse_endpoints(str(port), [("a", f"http://{host}:8000/v1")])["a"]
    assert endpoint == f"tcp://{host}:{port}"
    kv = KvEvents({"a": endpoint})
    forgot: list[tuple[str, float]] = []
    kv.start(asyncio.get_running_loop(), lambda name, share: forgot.append((name, share)))
    try:
        seq = 0
        deadline = time.monotonic() + 10
        while kv.feeds["a"].messages == 0 and time.monotonic() < deadline:  # a PUB drops what precedes a subscriber
            pub.send_multipart(frames(seq, stored(seq)))
            seq += 1
            await asyncio.sleep(0.05)
        assert kv.feeds["a"].messages > 0, f"nothing arrived from {endpoint}"
        pub.send_multipart(frames(seq, CLEARED))
        await wait_for(lambda: forgot == [("a", 1.0)], "the clear to reach the loop")
    finally:
        await asyncio.to_thread(kv.stop)
        pub.close(0)
        ctx.term()
