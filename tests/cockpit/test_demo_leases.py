"""Two `c3 demo` at once share the demo's estate and pods; quitting one must not stop the pods the other
still shows. Each demo holds a lease; the last one to leave stops the pods (c3/demo.py)."""

from __future__ import annotations

import shutil
import time

from tests.cockpit.test_tmux_smoke import C3, ROOT, Tmux


def running(world) -> set[str]:
    from backend.sim.runtime import SimRuntime

    with world.active():
        return {name for name, w in SimRuntime().workloads().items() if w.running}


def test_quitting_one_demo_leaves_the_others_pods(demo_world, require_service):
    require_service("tmux", shutil.which("tmux") is not None, "apt-get install tmux")
    assert running(demo_world) == {"chat", "coder"}
    env = " ".join(f"{k}={v}" for k, v in demo_world.env.items())
    other = Tmux("demo-lease", 100, 30, f"cd {ROOT} && env {env} TERM=xterm-256color {C3} demo")
    try:
        other.wait_for(r"chat\s+vllm")  # the other demo is up and shows the pods
        # This demo (a facade in this process, as `c3 demo` builds it) quits first.
        with demo_world.active():
            from c3.services_real import build_services

            mine = build_services(demo=True)
        mine.close()
        assert running(demo_world) == {"chat", "coder"}, "quitting one demo stopped the other demo's pods"
        other.wait_for(r"chat\s+vllm")
        # The last demo to leave stops them.
        other.keys("q")
        deadline = time.monotonic() + 20
        while other.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not other.alive()
        deadline = time.monotonic() + 20
        while running(demo_world) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert running(demo_world) == set()
    finally:
        other.kill()


def test_a_dead_demos_lease_does_not_keep_pods(demo_world, tmp_path):
    import json

    from backend.sim.demo import join_demo, leave_demo

    with demo_world.active():
        mine = join_demo()
        dead = mine.with_name("999999-deadbeef.json")
        dead.write_text(json.dumps({"pid": 999999, "start_time": 1}), encoding="utf-8")
        assert leave_demo(mine) is True and not dead.exists()
