"""A stub engine's state: request records, counters, the prefix cache and the hold gates, and the
Prometheus text (vLLM's or llama-server's) that /metrics serves from them.

Standard library only, like the rest of the stub engine (see `stub_engine.py`).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import time
from collections.abc import Callable
from typing import Any


class PrefixCache:
    """vLLM-style automatic prefix caching, in the stub's own units (a whitespace word is a token).

    A prompt is cut into full blocks of BLOCK tokens, each hashed with all the blocks before it; a
    request counts its prompt tokens as queries and BLOCK hits for every leading block already seen.
    Oldest blocks fall out past `capacity`. What it gives a router test: sticky routing of a growing
    conversation shows hits, scattering it over replicas does not — as with a real engine.
    """

    BLOCK = 16

    def __init__(self, capacity: int = 65536):
        self.blocks: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self.capacity = capacity

    def lookup_and_insert(self, tokens: list[str]) -> int:
        """Tokens of `tokens` served from cache; the prompt's blocks are cached afterwards."""
        digest, hits, missed = hashlib.sha256(), 0, False
        for start in range(0, len(tokens) - self.BLOCK + 1, self.BLOCK):
            digest.update("\x00".join(tokens[start:start + self.BLOCK]).encode() + b"\x01")
            key = digest.copy().digest()
            if not missed and key in self.blocks:
                hits += self.BLOCK
                self.blocks.move_to_end(key)
            else:
                missed = True
                self.blocks[key] = None
                if len(self.blocks) > self.capacity:
                    self.blocks.popitem(last=False)
        return hits


class EngineState:
    """What a stub engine counts and holds while it serves: its request records and counters, the
    prefix cache, the hold gates; and the /metrics text built from them (the HTTP side is `stub_http`)."""

    def __init__(self, cfg: dict[str, Any]):
        self.cfg = cfg
        self.started = int(time.time())
        self.records: collections.deque[dict[str, Any]] = collections.deque(maxlen=2000)
        self.seq = 0
        self.counts: collections.Counter[str] = collections.Counter()
        self.running = 0
        self.inflight_tokens = 0
        self.prefix_cache = PrefixCache()
        self.gates: dict[str, asyncio.Event] = {}
        """Hold gates by name (`X-Stub-Hold`), opened by `POST /debug/release/<name>`."""
        self.held: collections.Counter[str] = collections.Counter()
        """Requests waiting at each closed gate now."""
        self.sleep_level = 0
        """vLLM's sleep mode: 0 awake, 1 weights offloaded, 2 all discarded (`POST /sleep?level=N`)."""
        self.awake = asyncio.Event()
        """Set while awake: a request that arrives while the engine sleeps waits here, as vLLM's does."""
        self.awake.set()
        self.on_sleep: Callable[[bool], None] | None = None
        """Called with True on sleep and False on wake when the engine runs with `--enable-sleep-mode`."""

    async def hold(self, name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Wait at gate `name` until a test releases it (a gate released first lets requests straight
        through), so a test waits on a signal instead of sizing a slow stream by guess. The client
        going away ends the wait with ConnectionResetError, as a write would."""
        gate = self.gates.setdefault(name, asyncio.Event())
        self.held[name] += 1
        try:
            while not gate.is_set():
                if reader.at_eof() or writer.is_closing():
                    raise ConnectionResetError
                try:  # wake up now and then only to see a client that went away
                    await asyncio.wait_for(gate.wait(), 0.05)
                except TimeoutError:
                    pass
        finally:
            self.held[name] -= 1
            if not self.held[name]:
                del self.held[name]

    def metrics(self) -> str:
        """The engine's Prometheus text: vLLM 0.32's names, or llama-server's `llamacpp:` set.

        Names, types and label sets follow the real engines' own /metrics (recorded in
        tests/fixtures/engines/ by scripts/rig/record_engine_fixtures.py; a test fails on drift).
        """
        if self.cfg.get("engine") == "llamacpp":
            return self.llamacpp_metrics()
        label = f'{{engine="0",model_name="{self.cfg["served"][0]}"}}'
        kv = min(1.0, self.inflight_tokens / max(1, self.cfg.get("kv_tokens") or 1))
        rows = [("num_requests_running", "gauge", "Number of requests in model execution batches.", self.running),
                ("num_requests_waiting", "gauge", "Number of requests waiting to be processed.", 0),
                ("kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", kv),
                ("prefix_cache_queries_total", "counter",
                 "Prefix cache queries, in terms of number of queried tokens.", self.counts["prefix_queries"]),
                ("prefix_cache_hits_total", "counter",
                 "Prefix cache hits, in terms of number of cached tokens.", self.counts["prefix_hits"]),
                ("num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", 0),
                ("prompt_tokens_total", "counter", "Number of prefill tokens processed.",
                 self.counts["prompt_tokens"]),
                ("prompt_tokens_cached_total", "counter", "Number of cached prompt tokens (local + external).",
                 self.counts["prefix_hits"]),
                ("generation_tokens_total", "counter", "Number of generation tokens processed.",
                 self.counts["generation_tokens"])]
        out = []
        for name, kind, help_text, value in rows:
            out += [f"# HELP vllm:{name} {help_text}", f"# TYPE vllm:{name} {kind}",
                    f"vllm:{name}{label} {float(value)}"]
        out += ["# HELP vllm:engine_sleep_state Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine "
                "is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
                "# TYPE vllm:engine_sleep_state gauge"]
        for level, state in enumerate(("awake", "weights_offloaded", "discard_all")):
            value = (self.sleep_level == 0) if level == 0 else (self.sleep_level == level)
            out.append(f'vllm:engine_sleep_state{{engine="0",model_name="{self.cfg["served"][0]}",sleep_state="{state}"}} {float(value)}')
        out += ["# HELP vllm:request_success_total Count of successfully processed requests.",
                "# TYPE vllm:request_success_total counter"]
        for reason in ("stop", "length", "abort"):
            out.append(f'vllm:request_success_total{{engine="0",finished_reason="{reason}",model_name='
                       f'"{self.cfg["served"][0]}"}} {float(self.counts["finished_" + reason])}')
        return "\n".join(out) + "\n"

    def llamacpp_metrics(self) -> str:
        """llama-server's `--metrics` text: unlabelled, integers printed without a decimal point."""
        counters = [("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens",
                     self.counts["prompt_tokens"] - self.counts["prefix_hits"]),
                    ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache",
                     self.counts["prefix_hits"]),
                    ("tokens_predicted_total", "Number of generation tokens processed", self.counts["generation_tokens"]),
                    ("n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and "
                     "multimodal decoding", self.counts["generation_tokens"])]
        gauges = [("requests_processing", "Number of requests processing", self.running),
                  ("requests_deferred", "Number of requests deferred", 0)]
        out = []
        for kind, rows in (("counter", counters), ("gauge", gauges)):
            for name, help_text, value in rows:
                out += [f"# HELP llamacpp:{name} {help_text}", f"# TYPE llamacpp:{name} {kind}",
                        f"llamacpp:{name} {value:g}"]
        return "\n".join(out) + "\n"
