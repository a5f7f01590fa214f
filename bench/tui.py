#!/usr/bin/env python3
"""What the cockpit costs: cold start to first frame, and idle CPU, beside a bare Textual app.

    .venv/bin/python bench/tui.py [--runs 7] [--idle-seconds 60]

Both apps run headless in fresh subprocesses (imports included, as a user pays them). The cockpit
runs on the real facade over a simulated world with 8 GPUs and 16 pods, 8 of them serving as stub
engines (tests/cockpit/world.py, scenario `bench`): its live hub polls the GPUs, the workloads, the
engines' health and placement in its own threads (1 s GPU poll, 2 s pod poll, sparklines, as-of
stamps), and that CPU is counted. Measured:
- first frame: process spawn → the first screen painted (for c3 also: → GPUs and pods on screen);
- idle CPU: user+system CPU time of the process over `--idle-seconds` after it settled, as a
  percentage of one core. Both apps idle at the same time, in the same run.
Goals (issue 4): first frame ≤ 1.5 × the bare app; idle ≤ 3 % of one core. Prints medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(kind: str, mode: str, idle_s: float) -> None:
    """Runs inside the subprocess: start the app, report timings as one JSON line on stdout."""
    sys.path.insert(0, str(ROOT))
    from textual.app import App
    from textual.widgets import Footer, Static

    marks: dict[str, float] = {}

    class Bare(App):
        def compose(self):
            yield Static("bare textual app")
            yield Footer()

    if kind == "bare":
        app = Bare()
    else:
        from c3.app import C3App

        def facade():  # built in a worker after the first frame, as `c3` does
            from c3.services_real import RealServices

            return RealServices(demo=True)  # over the world whose environment `spawn` passed in

        app = C3App(facade)

    def first_paint() -> None:
        marks.setdefault("first_frame", time.time())
        if kind == "bare":
            marks.setdefault("data_frame", marks["first_frame"])

    def watch_data() -> None:
        orch = app._orchestration() if kind == "c3" else None
        if orch is not None and len(orch.gpus) == 8 and len(orch.pods) == 16 and "data_frame" not in marks:
            app.call_after_refresh(lambda: marks.setdefault("data_frame", time.time()))

    def cpu() -> float:
        times = os.times()
        return times.user + times.system

    async def idle_then_exit() -> None:
        import asyncio

        await asyncio.sleep(3.0)  # settle: first polls, history seeded
        start_cpu, start = cpu(), time.monotonic()
        await asyncio.sleep(idle_s)
        marks["idle_cpu_pct"] = 100.0 * (cpu() - start_cpu) / (time.monotonic() - start)
        app.exit()

    def on_ready() -> None:
        app.call_after_refresh(first_paint)
        if mode == "first-frame":
            timer = app.set_interval(0.01, lambda: (watch_data(), ("data_frame" in marks) and app.exit()))
            app.set_timer(20, timer.stop)
        else:
            app.run_worker(idle_then_exit(), exit_on_error=False)

    app.call_later(on_ready)
    app.run(headless=True)
    print(json.dumps(marks), flush=True)


WORLD_ENV: dict[str, str] = {}
"""The simulated world's environment (C3_HOME, C3_STATE, C3_RIG, C3_RUNTIME…), set by `main`."""


def spawn(kind: str, mode: str, idle_s: float) -> tuple[float, subprocess.Popen]:
    env = dict(os.environ, TEXTUAL_ANIMATIONS="none", PYTHONPATH=str(ROOT), **WORLD_ENV)
    started = time.time()
    proc = subprocess.Popen([sys.executable, __file__, "--child", kind, "--mode", mode, "--idle-seconds", str(idle_s)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    return started, proc


def result(started: float, proc: subprocess.Popen, timeout: float) -> dict:
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"bench child failed ({proc.returncode}): {err[-2000:]}")
    marks = json.loads(lines[-1])
    for key in ("first_frame", "data_frame"):
        if key in marks:
            marks[key] = marks[key] - started
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--child", choices=["c3", "bare"])
    parser.add_argument("--mode", choices=["first-frame", "idle"], default="first-frame")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.mode, args.idle_seconds)
        return

    sys.path.insert(0, str(ROOT))
    from tests.cockpit.world import World

    world = World.build("bench")
    WORLD_ENV.update(world.env)
    try:
        measure(args)
    finally:
        world.stop()
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


def measure(args: argparse.Namespace) -> None:
    frames: dict[str, list[dict]] = {"bare": [], "c3": []}
    for _ in range(args.runs):
        for kind in ("bare", "c3"):  # interleaved, so load on the machine hits both alike
            frames[kind].append(result(*spawn(kind, "first-frame", 0), timeout=120))
    bare_first = statistics.median(m["first_frame"] for m in frames["bare"])
    c3_first = statistics.median(m["first_frame"] for m in frames["c3"])
    c3_data = statistics.median(m["data_frame"] for m in frames["c3"])
    print(f"cold start → first frame (median of {args.runs}, headless, imports included)")
    print(f"  bare Textual app        {bare_first * 1000:7.0f} ms")
    print(f"  c3 cockpit (8 GPU/16 pods) {c3_first * 1000:4.0f} ms   = {c3_first / bare_first:.2f} × bare   (goal ≤ 1.50 ×)")
    print(f"  c3 with GPUs and pods shown {c3_data * 1000:3.0f} ms   = {c3_data / bare_first:.2f} × bare")

    idle = {kind: spawn(kind, "idle", args.idle_seconds) for kind in ("bare", "c3")}  # side by side
    idle_marks = {kind: result(*pair, timeout=args.idle_seconds + 120) for kind, pair in idle.items()}
    print(f"idle CPU over {args.idle_seconds:.0f} s (% of one core, both running at once)")
    print(f"  bare Textual app        {idle_marks['bare']['idle_cpu_pct']:6.2f} %")
    print(f"  c3 cockpit (8 GPU/16 pods, 1 s + 2 s polls) {idle_marks['c3']['idle_cpu_pct']:5.2f} %   (goal ≤ 3 %)")


if __name__ == "__main__":
    main()
