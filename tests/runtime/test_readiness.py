"""Readiness: progress phases, an engine that exits, a deadline."""

from __future__ import annotations

from backend.runtime.models import Workload
from backend.runtime.readiness import wait_ready


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.now += s


def test_ready_after_phases_with_progress():
    clock = Clock()
    answers = iter(["starting", "starting", "loading", "ready"])
    seen = []
    result = wait_ready(url="u", workload=lambda: Workload(pod="p", status="running"), logs=lambda n: "", timeout_s=60,
                        progress=lambda ph, t: seen.append(ph), clock=clock, sleep=clock.sleep, health=lambda u: next(answers))
    assert result.ok and result.phase == "ready"
    assert seen == ["starting", "loading", "ready"]


def test_exit_during_boot_returns_log_tail():
    clock = Clock()
    states = iter([Workload(pod="p", status="running"), Workload(pod="p", status="exited", exit_code=1)])
    result = wait_ready(url="u", workload=lambda: next(states), logs=lambda n: f"last {n} lines\nCUDA out of memory", timeout_s=60, clock=clock, sleep=clock.sleep, health=lambda u: "starting")
    assert not result.ok and result.phase == "exited"
    assert "exit code 1" in result.detail and "CUDA out of memory" in result.log_tail


def test_timeout():
    clock = Clock()
    result = wait_ready(url="u", workload=lambda: Workload(pod="p", status="running"), logs=lambda n: "hung", timeout_s=10, clock=clock, sleep=clock.sleep, health=lambda u: "loading")
    assert not result.ok and result.phase == "timeout" and "not serving after 10 s" in result.detail
    assert 10 <= clock.now <= 13
