"""`--route cache --cache-load engine` leaves a prompt's backend only while that backend's engine queues
requests, proven against two real llama-servers (one slot each, `--metrics`).

The queue is made outside the router: two long generations sent straight to the backend that holds the
prompt's prefix, so its one slot is busy and the second waits (`llamacpp:requests_deferred` = 1 on its own
/metrics). The router's own in-flight count for that backend stays 0, so only the engine's reading can
make it divert. The control run is the same scene under `--cache-load in-flight`: the request follows
its prefix into the queue. After the queue is gone, the prefix's backend gets the prompt again.
"""

from __future__ import annotations

import os
import threading
import time

import httpx
import pytest

from scripts.rig.prefix_workload import scrape
from tests.pool.conftest import pool_process, wait_until  # noqa: F401 - pool_process is a fixture

pytestmark = pytest.mark.real_engine

SYSTEM = " ".join(f"rule {i}: answer briefly and cite the page you read it on." for i in range(40))
"""~2.2 KB: the shared prefix (the index matches 256-byte blocks; it must hold over half of the prompt)."""


class Occupier:
    """Long generations sent straight to one llama-server, cut (connection closed) on `release()`."""

    def __init__(self, url: str, count: int) -> None:
        self.url = url
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._one, args=(i,), daemon=True) for i in range(count)]
        for thread in self.threads:
            thread.start()

    def _one(self, i: int) -> None:
        body = {"model": "tiny", "stream": True, "max_tokens": 3500, "ignore_eos": True,
                "messages": [{"role": "user", "content": f"occupy {i} {time.time_ns()}"}]}
        try:
            with httpx.stream("POST", self.url + "/v1/chat/completions", json=body, timeout=300) as reply:
                for _ in reply.iter_bytes():
                    if self.stop.is_set():
                        return  # leaving the block closes the connection: llama-server cancels the task
        except httpx.HTTPError:
            return

    def release(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)


def _ask(url: str, *turns: str, timeout: float = 120) -> httpx.Response:
    """One chat request: the shared system prompt, then `turns` as user / assistant / user ... messages, each
    ~0.8 KB (whole 256-byte blocks that only the backends which saw that turn hold)."""
    messages = [{"role": "system", "content": SYSTEM}]
    messages += [{"role": ("user", "assistant")[i % 2], "content": f"{turn} " * (800 // (len(turn) + 1))}
                 for i, turn in enumerate(turns)]
    return httpx.post(url + "/v1/chat/completions", timeout=timeout,
                      json={"model": "tiny", "max_tokens": 2, "messages": messages})


def _deferred(url: str) -> float:
    return scrape(url).get("llamacpp:requests_deferred", 0.0)


@pytest.fixture
def two_llamas(llama_engine):
    procs = {name: llama_engine("-np", "1") for name in ("a", "b")}
    for proc in procs.values():
        proc.wait_healthy(120)
    return procs


@pytest.mark.parametrize("load", ["engine", "in-flight"])
def test_the_cache_route_leaves_a_prefix_only_while_its_engine_queues(two_llamas, pool_process, load):
    urls = {name: proc.url for name, proc in two_llamas.items()}
    pool = pool_process(urls, "--route", "cache", "--sticky", "none", "--cache-load", load)
    tag = f"{load}-{os.getpid()}-{time.time_ns()}"
    first = _ask(pool.url, f"first {tag}")
    assert first.status_code == 200, first.text
    holder = first.headers["x-c3-backend"]
    other = "b" if holder == "a" else "a"
    # With the queues empty the prefix keeps its backend (the index, not a coin: 4 of 4).
    for i in range(4):
        again = _ask(pool.url, f"again {i} {tag}")
        assert again.headers["x-c3-backend"] == holder, (i, again.headers)

    occupier = Occupier(urls[holder], 2)
    try:
        wait_until(lambda: _deferred(urls[holder]) >= 1, timeout=60, what=f"a request deferred on {holder}")
        if load == "engine":
            wait_until(lambda: pool.backend(holder)["engine_load"].get("waiting", 0) >= 1, timeout=15,
                       what="the router to read the queue")
            idle = pool.backend(other)["engine_load"]
            assert idle["read"] and idle["waiting"] == 0, idle
            diverted = _ask(pool.url, f"queued {tag}", timeout=60)
            assert diverted.status_code == 200, diverted.text
            assert diverted.headers["x-c3-backend"] == other, diverted.headers
            assert _deferred(urls[holder]) >= 1  # the queue was still there when the request went elsewhere
        else:
            # The router's own count for the holder is 0 (the load came from outside): it follows the
            # prefix into the queue. Read the head on a stream, then let the queue go so it is answered.
            with httpx.stream("POST", pool.url + "/v1/chat/completions", timeout=120,
                              json={"model": "tiny", "max_tokens": 2, "stream": True,
                                    "messages": [{"role": "system", "content": SYSTEM},
                                                 {"role": "user", "content": f"queued {tag}"}]}) as reply:
                occupier.release()
                assert reply.status_code == 200
                assert reply.headers["x-c3-backend"] == holder, reply.headers
                assert b"[DONE]" in b"".join(reply.iter_bytes())
    finally:
        occupier.release()

    wait_until(lambda: _deferred(urls[holder]) == 0, timeout=60, what=f"{holder}'s queue to empty")
    if load == "engine":
        wait_until(lambda: pool.backend(holder)["engine_load"].get("waiting") == 0, timeout=15,
                   what="the router to read the empty queue")
    # A follow-up of a conversation only the holder saw (the diverted request put the system prompt on
    # the other backend too): its longest prefix is on the holder again.
    back = _ask(pool.url, f"again 0 {tag}", "ok", f"after {tag}")
    assert back.headers["x-c3-backend"] == holder, back.headers
    pool.stop()
