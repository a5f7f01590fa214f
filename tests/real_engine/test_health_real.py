"""Busy is not sick, against a real engine: a real llama-server pod on the real dockerd, its process
stopped (SIGSTOP on the pid c3's runtime reports) so that it accepts connections and answers nothing —
what a saturated engine looks like from outside — while the live hub watches it at its default periods.

Stopped briefly, it stays healthy through its late probes and is healthy again, its count cleared, once
it answers; stopped for longer, the third timeout in a row calls it unhealthy, and it recovers when it
answers again. Nothing about the container changes meanwhile (no Docker event), as with a busy engine."""

from __future__ import annotations

import os
import signal

import pytest

from tests.runtime.helpers import c3, free_port
from tests.support import health_verdicts

pytestmark = [pytest.mark.real_engine, pytest.mark.docker, pytest.mark.nvml]


@pytest.mark.timeout(600)
def test_a_real_llama_server_that_stops_answering_is_late_before_it_is_unhealthy(pod_rig):
    from backend import paths
    from backend.live import LiveState
    from backend.views.estate_file import health_path_of, planned_pods
    from backend.wiring import open_context

    name = "busy"
    port = free_port()
    created = c3("pod", "create", name, "--gpus", "0", "--slug", "llamacpp/real-tiny", "--port", str(port), "--force")
    assert created.returncode == 0, created.stdout + created.stderr
    pod_rig.append(name)
    up = c3("pod", "up", name, "--force", timeout=600)
    assert up.returncode == 0, up.stdout + up.stderr

    ctx = open_context()
    hub = LiveState(ctx, pods=lambda: planned_pods(paths.estate_file()), health_path_of=health_path_of(ctx))
    hub.start()
    stopped = False
    try:
        health_verdicts(hub, lambda h: h.healthy and not h.late, timeout=60)
        pid = ctx.runtime.workload(name).pids[0]

        os.kill(pid, signal.SIGSTOP)  # the engine accepts connections and answers nothing
        stopped = True
        seen = health_verdicts(hub, lambda h: h.late == 1, timeout=30)
        os.kill(pid, signal.SIGCONT)
        stopped = False
        seen += health_verdicts(hub, lambda h: h.healthy and not h.late, timeout=30)
        assert all(healthy for healthy, _, _ in seen), f"called unhealthy while only late: {seen}"
        assert (True, 1, True) in seen, seen

        os.kill(pid, signal.SIGSTOP)
        stopped = True
        seen = health_verdicts(hub, lambda h: not h.healthy, timeout=60)
        assert seen[-3:] == [(True, 1, True), (True, 2, True), (False, 0, True)], seen  # the third timeout in a row
        os.kill(pid, signal.SIGCONT)
        stopped = False
        seen = health_verdicts(hub, lambda h: h.healthy, timeout=30)
        assert seen[-1] == (True, 0, False), seen
        assert ctx.runtime.workload(name).pids[0] == pid  # the same engine throughout: no restart, no event
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        hub.stop()
