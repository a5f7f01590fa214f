"""The cockpit as a live monitor of a real engine: a real vLLM (CPU) pod booted by `c3 pod up` on the
real dockerd, the cockpit on the real facade (Textual Pilot, headless), real load.

What the pod view shows is checked against the engine's own `/metrics`, read by this test on its own
(back to back, with the plain line parser of scripts/rig/prefix_workload, not c3's): requests running
and waiting, KV-cache use and the prefix-cache hit rate. Then the engine is killed with SIGKILL (the
pid c3's runtime reports for the pod: the container's `vllm serve`) and the cockpit must announce it —
trouble count in the mode bar and a toast — within 2 s.

The load: one warm-up request puts a ~300-token prefix in the prefix cache; then 12 streaming requests
share it, against `--max-num-seqs 4`: 4 run and 8 wait while the first 4 generate (`ignore_eos`), then
4 run and 4 wait while the next 4 do — two steady phases a round (~8 s each on this machine), in which
no prompt is admitted. A busy engine answers a scrape late, so a reading is not
"at" one moment: the cockpit's (sent at `taken_at`, answered `scrape_ms` later) is compared with the
engine readings that bracket it (`watching.Timeline.bracket`: the last one answered before it was sent
to the first one sent after it was answered):
- running / waiting: every bracketing reading says the same (4 running, some waiting), and so must the cockpit;
- KV use grows while the 4 generate, in steps (a block per 128 tokens per request): the cockpit's must
  be one of the values the engine showed in the bracket, ± 0.1 point (it shows one decimal) — not any
  value between them;
- hit rate: the engine's hits / queries, its counters unchanged since the cockpit's previous reading
  (so the cockpit's interval saw no prompt and shows the rate since start), ± 0.1 point.
A reading outside the steady phase is not compared (why is kept for the failure message); the load is
sent again, up to 6 rounds (a round in which this process was starved of CPU does not count; see
`watching.Timeline.stalls`), until one is. The engine's container is kept off one CPU, which is left to
this process (`watching._keep_a_cpu_from`): without that, the CPU engine under load left the cockpit
runnable but not run for up to 17 s at a time on the 2-core test machine.
"""

from __future__ import annotations

import re

import httpx
import pytest

from tests.real_engine.conftest import OFFLINE_ENV
from tests.real_engine.watching import Load, answered, boot_pod, watch_compare_and_kill

pytestmark = [pytest.mark.real_engine, pytest.mark.docker, pytest.mark.nvml]

SLUG = "vllm/real-tiny-load"
PREFIX = "The operator watches the serving box and reads the numbers on the screen. " * 12
RUNNING, QUEUED = 4, 8  # per round: 4 run while 8 wait, then 4 run while 4 wait
GEN_TOKENS = 3600  # per request: a steady phase of several cockpit readings even when the engine runs at ~1,800 tokens/s
KV_BLOCKS = 160  # × 128-token CPU blocks = 20,480 tokens: 4 × (prefix + 3,600) fills at most ~3/4 of it (no preemption)

# The pod view's engine line in each of its forms (c3/metrics_text.py): narrow `r4 w2 · KV 37.1% · hit 68%`,
# medium and wide `req 4 run 2 wait · KV 37.1% · hit 68% · …`.
LINE = re.compile(r"(?:req |\br)(?P<running>\d+)(?: run |\s+w)(?P<waiting>\d+)(?: wait)? · KV (?P<kv>[\d.]+)% · hit (?P<hit>[\d.]+)%")


@pytest.mark.timeout(900)
async def test_the_pod_view_matches_the_engines_own_metrics_and_a_killed_engine_is_announced(pod_rig, real_images, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    pod_rig.add_entry({
        "slug": SLUG, "engine": "vllm", "image": real_images("vllm"), "model": "/models/dense", "tp": 1, "max_model_len": 4096,
        "max_num_seqs": RUNNING, "max_num_batched_tokens": 4096, "env": dict(OFFLINE_ENV),
        "extra_args": ["--enforce-eager", "--num-gpu-blocks-override", str(KV_BLOCKS)],
    })
    name = "watched"
    url = await boot_pod(pod_rig, name, SLUG)
    warm = httpx.post(url + "/v1/completions", timeout=120, json={"model": "/models/dense", "prompt": PREFIX + "warm-up", "max_tokens": 2})
    assert warm.status_code == 200, warm.text
    assert warm.json()["usage"]["prompt_tokens"] > 2 * 128  # full blocks to share

    def send_load(round_: int) -> Load:
        body = {"model": "/models/dense", "max_tokens": GEN_TOKENS, "ignore_eos": True, "stream": True}
        return Load(url + "/v1/completions", [{**body, "prompt": PREFIX + f"round {round_} request {i}"} for i in range(RUNNING + QUEUED)])

    def not_steady(engine, span, metrics, previous) -> str | None:
        states = sorted({(r.values["vllm:num_requests_running"], r.values["vllm:num_requests_waiting"]) for r in span})
        if len(states) != 1 or states[0][0] != RUNNING or not states[0][1] or (metrics.running, metrics.waiting) != states[0]:
            return f"engine running/waiting {states} in its bracket of {len(span)}"
        if len({r.values.get("vllm:num_preemptions_total") for r in span}) != 1:
            return "preemptions in its bracket"
        if previous is None:
            return "no cockpit reading before it (its hit rate has no interval)"
        since = engine.bracket(previous.taken_at, answered(metrics)) or span
        counters = {(r.values["vllm:prefix_cache_queries_total"], r.values["vllm:prefix_cache_hits_total"]) for r in since}
        if len(counters) != 1:
            return f"prompts admitted since the cockpit's previous reading: {sorted(counters)}"
        return None

    def check(match, metrics, span) -> None:
        shown = {k: float(v) for k, v in match.groupdict().items()}
        # The gauge moves in steps (a block per 128 tokens per request: several a second while 4 generate),
        # so a bracket often holds 2-3 values. The cockpit's must BE one of them (± 0.1: one decimal shown),
        # not any value in between: an interval admitted a 5 % error, this does not.
        kv = sorted({100 * r.values["vllm:kv_cache_usage_perc"] for r in span})
        assert any(abs(shown["kv"] - v) <= 0.1 for v in kv), (shown, kv)
        assert shown["kv"] > 2.0, shown  # the 4 running requests really hold KV blocks
        hits, queries = span[0].values["vllm:prefix_cache_hits_total"], span[0].values["vllm:prefix_cache_queries_total"]
        assert abs(shown["hit"] - 100 * hits / queries) <= 0.1, (shown, hits, queries)
        assert shown["hit"] > 30.0, shown  # the shared prefix really hit

    print(await watch_compare_and_kill(url, name, LINE, send_load=send_load, not_steady=not_steady, check=check, rounds=6))

