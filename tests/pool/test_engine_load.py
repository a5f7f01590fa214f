"""`--route cache --cache-load engine`: the balance bound reads the engines' own queues from /metrics.

Stub backends on loopback serve /health and a /metrics body the test sets (vLLM's or llama-server's
names). The router is started as `pool serve` starts it (`Router.start`: probes, then the background
scrape), so a test that expects the engine's queue to decide also fails on a router that never reads
it: with two requests in flight on the prefix's holder against none elsewhere, the in-flight bound
diverts (issue 26's 4-replica bench: one conversation in eight recomputed the system prompt)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from backend.pool.router import PoolConfig, Router
from tests.pool.test_prefix_index import chat

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engines"


def vllm(waiting: int, running: int) -> bytes:
    return (b"# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
            b"# TYPE vllm:num_requests_waiting gauge\n"
            b'vllm:num_requests_waiting{engine="0",model_name="m"} %d.0\n'
            b'vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} %d.0\n'
            b'vllm:num_requests_running{engine="0",model_name="m"} %d.0\n' % (waiting, waiting, running))


def llamacpp(deferred: int, processing: int) -> bytes:
    return b"llamacpp:requests_processing %d\nllamacpp:requests_deferred %d\n" % (processing, deferred)


class MetricsStub:
    """A backend answering /health 200 and /metrics with `body` (None: 404, as llama-server without
    --metrics; `stall`: never answers)."""

    def __init__(self) -> None:
        self.body: bytes | None = vllm(0, 0)
        self.stall = False
        self.scrapes = 0
        self.released = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1]
            if path == b"/metrics":
                self.scrapes += 1
                if self.stall:
                    await self.released.wait()
                body, status = (self.body, b"200 OK") if self.body is not None else (b"not found", b"404 Not Found")
            else:
                body, status = b"{}", b"200 OK"
            writer.write(b"HTTP/1.1 %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (status, len(body), body))
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        self.released.set()
        if self.server is not None:
            self.server.close()


async def started(*stubs: MetricsStub, **kw) -> Router:
    """A cache-route router over `stubs` (a, b, ...), started, each engine read or failed once. Only
    `kw` names options newer than the in-flight bound, so the first test also runs on a router without them."""
    urls = [await s.start() for s in stubs]
    config = PoolConfig(backends=[(chr(ord("a") + i), url) for i, url in enumerate(urls)], route="cache", sticky="none",
                        probe_interval_s=60, **kw)
    router = Router(config, salt=b"0123456789abcdef0123")
    await router.start()
    deadline = time.monotonic() + 3
    loads = getattr(router, "loads", None)
    while loads is not None and time.monotonic() < deadline:  # every backend read once, or failed once
        if all(loads.readings[n] is not None or loads.errors[n] for n in router.backends):
            break
        await asyncio.sleep(0.02)
    return router

@contextlib.asynccontextmanager
async def routed(*stubs, **options):
    """A started router in front of `stubs`; stopped, and the stubs closed, when the block ends."""
    router = await started(*stubs, **options)
    try:
        yield router
    finally:
        await router.stop()
        for s in stubs:
            s.close()



def route(router: Router, body: bytes) -> str:
    choice = router.choose(None, prompt=router.prompt_blocks(body))
    assert choice is not None
    return choice[0].name


BODY = chat("a question only a has seen " * 20)


async def test_a_holder_whose_engine_queues_nothing_keeps_the_prefix_two_ahead_in_flight():
    stubs = [MetricsStub(), MetricsStub()]
    stubs[0].body = vllm(0, 2)
    async with routed(*stubs) as router:
        assert router.prefixes is not None
        router.prefixes.record("a", router.prompt_blocks(BODY) or [])
        a, b = router.order
        a.metrics.in_flight, b.metrics.in_flight = 1, 0  # 2 against 0 with this request: past --cache-balance-abs 1
        assert route(router, BODY) == "a"
        assert router.cache_outcomes == {"prefix": 1, "over_load": 0, "no_match": 0}
        row = router.status()["backends"][0]["engine_load"]
        assert row["read"] and (row["engine"], row["waiting"], row["running"]) == ("vllm", 0, 2)


async def test_a_holder_whose_engine_queues_passes_the_request_to_an_engine_that_queues_less():
    stubs = [MetricsStub(), MetricsStub(), MetricsStub()]
    stubs[0].body, stubs[1].body, stubs[2].body = llamacpp(3, 4), llamacpp(1, 4), llamacpp(3, 4)
    async with routed(*stubs, load_interval_s=0.05) as router:
        assert router.prefixes is not None
        router.prefixes.record("a", router.prompt_blocks(BODY) or [])
        for b in router.order:
            b.metrics.in_flight = 4  # equal in flight: the in-flight bound alone would follow the prefix
        assert route(router, BODY) == "b"  # the only engine queueing less than a's
        assert router.cache_outcomes["over_load"] == 1
        stubs[1].body = llamacpp(3, 4)  # now every engine queues as much: diverting would only lose the cache
        router.prefixes.forget("b")  # (b was recorded as holding it too)
        await asyncio.sleep(0.3)
        assert route(router, BODY) == "a"


async def test_among_holders_of_the_prefix_the_one_whose_engine_queues_nothing_gets_it():
    stubs = [MetricsStub(), MetricsStub(), MetricsStub()]
    stubs[0].body, stubs[1].body, stubs[2].body = vllm(2, 4), vllm(0, 4), vllm(0, 4)
    async with routed(*stubs) as router:
        assert router.prefixes is not None
        for name in ("a", "b"):  # a shared system prompt both have served; c has not
            router.prefixes.record(name, router.prompt_blocks(BODY) or [])
        a, b, c = router.order
        a.metrics.in_flight, b.metrics.in_flight, c.metrics.in_flight = 0, 1, 0
        # a is idlest by the router's count but its engine queues; b holds the prefix too and has room:
        # b, not a cold c, is where the prefix costs nothing
        assert route(router, BODY) == "b"
        assert router.cache_outcomes == {"prefix": 1, "over_load": 0, "no_match": 0}


async def test_unreadable_metrics_fall_back_to_the_in_flight_bound_and_status_says_so():
    from backend.pool.engineload import MAX_BYTES

    stubs = [MetricsStub(), MetricsStub(), MetricsStub()]
    stubs[0].body = None  # 404: llama-server run without --metrics
    stubs[1].body = b"# just some text\nnot_an_engine_metric 1\n"
    stubs[2].body = b"x" * (MAX_BYTES + 10)  # over the size cap
    async with routed(*stubs) as router:
        assert router.prefixes is not None
        router.prefixes.record("a", router.prompt_blocks(BODY) or [])
        a, b, c = router.order
        a.metrics.in_flight, b.metrics.in_flight, c.metrics.in_flight = 1, 0, 1
        assert route(router, BODY) == "b"  # 2 against 0: the in-flight bound, as before
        router.prefixes.forget("b")  # (b was recorded as holding it too)
        a.metrics.in_flight = 0
        assert route(router, BODY) == "a"
        rows = [row["engine_load"] for row in router.status()["backends"]]
        assert [r["read"] for r in rows] == [False, False, False]
        assert "HTTP 404" in rows[0]["error"] and "llamacpp:requests_deferred" in rows[1]["error"]
        assert "over" in rows[2]["error"] and all(r["fallback"] == "in-flight bound" for r in rows)
        assert router.status()["cache_load"] == "engine"


async def test_a_stalled_metrics_endpoint_is_bounded_and_retried_with_backoff():
    stub = MetricsStub()
    stub.stall = True
    url = await stub.start()
    config = PoolConfig(backends=[("a", url)], route="cache", load_interval_s=0.2, probe_timeout_s=0.2)
    router = Router(config)
    loads = router.loads
    assert loads is not None and loads.timeout_s == 0.2
    t0 = time.monotonic()
    await loads.scrape_all(router.order)
    assert time.monotonic() - t0 < 1.0
    assert loads.readings["a"] is None and "timed out" in (loads.errors["a"] or "")
    await loads.scrape_all(router.order)  # not due yet: backing off, no second connection
    await asyncio.sleep(0.05)
    assert stub.scrapes == 1
    stub.close()


def test_parse_reads_the_real_engines_metrics_and_only_the_totals():
    from backend.pool.engineload import parse_load

    for name, engine in (("vllm-0.32.0-cpu.metrics.txt", "vllm"), ("llama-server-0.3.36.metrics.txt", "llamacpp")):
        reading = parse_load((FIXTURES / name).read_bytes(), at=1.0)
        assert reading is not None and reading.engine == engine and reading.waiting == 0 and reading.running == 0
    dp = (b'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0\n'
          b'vllm:num_requests_waiting{engine="1",model_name="m"} 3.0\n'
          b'vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 2.0\n')
    reading = parse_load(dp, at=0.0)
    assert reading is not None and (reading.waiting, reading.running) == (5, None)  # summed over ranks
    assert parse_load(b"vllm:num_requests_running 3\n", at=0.0) is None  # no queue gauge: no reading
    assert parse_load(b"vllm:num_requests_waiting NaN\nvllm:num_requests_waiting{a=\"}\"} 1\n", at=0.0) is not None


def test_a_stale_reading_is_no_reading():
    from backend.pool.engineload import EngineLoads, parse_load

    loads = EngineLoads(["a"], interval_s=1.0, timeout_s=1.0)
    reading = parse_load(vllm(0, 1), at=100.0)
    loads.readings["a"] = reading
    assert loads.fresh("a", now=102.0) is reading
    assert loads.fresh("a", now=104.0) is None


def test_in_flight_mode_and_the_ring_route_scrape_nothing():
    base = [("a", "http://127.0.0.1:9000")]
    assert Router(PoolConfig(backends=base, route="cache", cache_load="in-flight")).loads is None
    assert Router(PoolConfig(backends=base, route="ring")).loads is None
    assert Router(PoolConfig(backends=base, route="cache")).loads is not None  # the default
