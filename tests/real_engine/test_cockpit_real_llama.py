"""The cockpit as a live monitor of a real llama-server: a pod of llama.cpp's own `llama-server`
(built from source by the rig, tiny GGUF, `--metrics`) booted by `c3 pod up` on the real dockerd, the
cockpit on the real facade, real load; then the engine is killed with SIGKILL and must be announced
within 2 s.

llama-server exports no KV use, TTFT histogram or preemptions; what it exports is requests processing
(busy slots) and deferred (queued for a slot), and token counters that grow only when a request has
finished its prompt (prompt, cached prompt) or its generation (predicted). So the load holds still:
7 streaming requests against 6 slots (`-np 6`), each generating ~3,900 tokens (`ignore_eos`): 6 process
and 1 waits, no prompt is admitted and no request finishes, for several seconds a round (2 slots gave
~4 s: too short for two cockpit readings inside it). The pod view's requests
processing / deferred and prefix-cache hit rate, and the totals behind the details' "tokens so far",
are compared with llama-server's own /metrics read back to back beside it (with the plain line parser
of scripts/rig/prefix_workload) by the engine readings that bracket each cockpit reading in time
(tests/real_engine/watching.py). A warm-up puts the shared prefix in every slot's prompt cache first, so
the hit rate compared is not a trivial 0. A reading outside the steady phase is not compared, and the load is
sent again (up to 5 rounds) until one is.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.real_engine.watching import Load, answered, boot_pod, watch_compare_and_kill

pytestmark = [pytest.mark.real_engine, pytest.mark.docker, pytest.mark.nvml]

SLUG = "llamacpp/real-tiny-watch"
PREFIX = "The operator watches the serving box and reads the numbers on the screen. " * 12
SLOTS, DEFERRED = 6, 1
CONTEXT = SLOTS * 4096  # split over the slots: 4,096 tokens each, the tiny model's own training context (llama-server's cap)
GEN_TOKENS = 3900  # per request: fills its slot's context; 6 slots share the engine, so each makes only a few hundred tokens/s

# The medium form of the pod view's engine line for llama-server (no KV metric: `KV –`).
LINE = re.compile(r"req (?P<running>\d+) run (?P<waiting>\d+) wait · KV – · hit (?P<hit>[\d.]+%|–) · gen (?P<gen>[\d.]+k?|–) tok/s")
COUNTERS = ("llamacpp:prompt_tokens_total", "llamacpp:prompt_tokens_cached_total", "llamacpp:tokens_predicted_total")


@pytest.mark.timeout(900)
async def test_the_pod_view_matches_llama_servers_own_metrics_and_a_killed_llama_server_is_announced(pod_rig, real_images, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    pod_rig.add_entry({
        "slug": SLUG, "engine": "llamacpp", "image": real_images("llamacpp"), "model": "/models/tiny.gguf", "tp": 1,
        "max_model_len": CONTEXT, "max_num_seqs": SLOTS, "health_path": "/health",
        # -lv 4: llama-server logs its buffers at that verbosity, which is how c3 learns the KV cache is on the
        # CPU (placement `unknown`); without it a serving pod with no GPU process reads as misplaced.
        "extra_args": ["--metrics", "-lv", "4", "-t", "1"],
    })
    name = "watched"
    url = await boot_pod(pod_rig, name, SLUG)
    # Warm-up: every slot gets the shared prefix in its prompt cache, so the load's prompts hit it.
    warm = Load(url + "/completion", [{"prompt": PREFIX + f"warm-up {i}", "n_predict": 2, "cache_prompt": True} for i in range(SLOTS)])
    try:
        await asyncio.to_thread(warm.wait, 120)
    finally:
        warm.stop()
    assert warm.outcomes() == ["HTTP 200"] * SLOTS, warm.outcomes()

    def send_load(round_: int) -> Load:
        body = {"n_predict": GEN_TOKENS, "ignore_eos": True, "stream": True, "cache_prompt": True}
        return Load(url + "/completion", [{**body, "prompt": PREFIX + f"round {round_} request {i}"} for i in range(SLOTS + DEFERRED)])

    def not_steady(engine, span, metrics, previous) -> str | None:
        states = sorted({(r.values["llamacpp:requests_processing"], r.values["llamacpp:requests_deferred"]) for r in span})
        if states != [(SLOTS, DEFERRED)] or (metrics.running, metrics.waiting) != (SLOTS, DEFERRED):
            return f"engine processing/deferred {states} in its bracket of {len(span)}"
        if previous is None:
            return "no cockpit reading before it (its rates have no interval)"
        since = engine.bracket(previous.taken_at, answered(metrics)) or span
        counters = {tuple(r.values[c] for c in COUNTERS) for r in since}
        if len(counters) != 1:
            return f"a prompt or a request finished since the cockpit's previous reading: {sorted(counters)}"
        return None

    def check(match, metrics, span) -> None:
        processed, cached, predicted = (span[0].values[c] for c in COUNTERS)
        assert abs(float(match["hit"].rstrip("%")) - 100 * cached / (processed + cached)) <= 0.1, (match.group(0), processed, cached)
        # The details' "tokens so far": c3 adds the cached prompt tokens back (llama-server's own counter excludes them).
        assert (metrics.prompt_tokens_total, metrics.generation_tokens_total) == (processed + cached, predicted), (metrics, span[0].values)
        # No request finished in the interval, so llama-server counted no new tokens: c3 must not invent a rate.
        assert float(match["gen"]) == 0.0 and metrics.generation_tps == 0.0, (match.group(0), metrics)
        assert metrics.kv_cache_pct is None and metrics.ttft_p50_ms is None and metrics.preemptions is None  # not exported: unknown, never 0
        assert float(match["hit"].rstrip("%")) > 30.0, match.group(0)  # the shared prefix really hit the slots' prompt caches

    print(await watch_compare_and_kill(url, name, LINE, send_load=send_load, not_steady=not_steady, check=check, rounds=5))
