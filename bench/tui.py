#!/usr/bin/env python3
"""What the cockpit costs, beside a bare Textual app and beside nvitop, on the same GPUs.

    .venv/bin/python bench/tui.py [--runs 5] [--idle-seconds 30]      # needs `pip install -e .[bench]`

The world: tests/cockpit/world.py's `bench` scenario — 16 pods, 8 of them serving as stub engines
that register their GPU memory (the rig's GPU registration files), and a fake libnvidia-ml.so.1
(scripts/rig/fake_nvml.py) with the scenario's 8 GPUs that reads those registrations. nvitop and the
cockpit both read GPUs through that one fake NVML (pynvml over LD_LIBRARY_PATH); the cockpit runs its
real facade (sim runtime, NVML probe), its live hub polling GPUs (1 s), workloads, endpoint health,
placement and every serving pod's engine /metrics (2 s).

1. cold start → first frame (headless, fresh subprocesses, imports included), bare app vs cockpit
   (on the scenario's simulated rig, as before, so the figure compares with older runs);
2. idle CPU: bare app, cockpit and nvitop (its default 2 s interval, and 1 s: the cockpit's GPU
   period) each in its own pseudo-terminal (120×40, TERM=xterm-256color), all four at once; user+system CPU of each process from /proc over `--idle-seconds` after a settle,
   % of one core; medians over `--runs` runs, the ratio to nvitop, load average per run;
3. keypress → frame: the cockpit's terminal is then resized to 80×24 and j/k pressed alternately (each
   moves the pod highlight): the time from writing the key to the pty until the first byte of the
   frame it causes comes back (a key is sent only after the output has been quiet for 150 ms, so
   periodic repaints are not mistaken for it); p50 and p90 over every press of every run.
Goals (issue 14): idle ≤ 3 % of one core with metrics polled, and below nvitop; keypress p50 ≤ 50 ms.

Where the time goes: `--threads` prints the cockpit's idle CPU per thread (from /proc: the event loop,
each live-hub source, Textual's input/output threads) and how many GPU and pod changes the hub pushed
in the window; `--py-spy FILE` records run 1's idle window with py-spy and groups the samples by place.
`--settle S` (default 10 s) is when the window starts: the GPU sparklines fill for their first ~20 s
(a visible change every second), so `--settle 30` measures the steady state.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import signal
import statistics
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(kind: str, mode: str, idle_s: float, report: str | None = None) -> None:
    """Runs inside the subprocess. `first-frame`/`idle`: headless, one JSON line of timings on stdout.
    `tty`: the cockpit on its pseudo-terminal over the fake NVML; writes what it shows to `report`."""
    sys.path.insert(0, str(ROOT))
    from textual.app import App
    from textual.widgets import Footer, Static

    marks: dict[str, float] = {}
    started: dict[str, int] = {}
    _start = threading.Thread.start

    def start(thread: threading.Thread) -> None:  # which threads start (the report lists them by name)
        name = thread.name.split("-")[0].split("_")[0]
        started[name] = started.get(name, 0) + 1
        _start(thread)

    threading.Thread.start = start  # type: ignore[method-assign]

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

            # headless modes: the scenario's simulated rig; tty: NVML (the fake library), sim runtime
            return RealServices(demo=mode != "tty")

        class Counted(C3App):
            """Counts what the live hub pushed (Textual also runs C3App's own handler: it walks the MRO)."""

            def on_gpus_read(self, message) -> None:
                marks["gpu_pushes"] = marks.get("gpu_pushes", 0) + 1

            def on_pods_read(self, message) -> None:
                marks["pod_pushes"] = marks.get("pod_pushes", 0) + 1

        app = Counted(facade)

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

    def write_report() -> None:  # what the cockpit shows, so the parent can check it measured the right thing
        orch = app._orchestration() if kind == "c3" else None
        hub = getattr(app.services, "_hub", None)
        shown = {"gpus": len(orch.gpus) if orch else 0, "pods": len(orch.pods) if orch else 0,
                 "serving": sum(p.state == "serving" for p in orch.pods) if orch else 0,
                 "with_metrics": sum(p.metrics is not None for p in orch.pods) if orch else 0,
                 "gpu_processes": sum(len(s.processes) for s in orch.gpus.values()) if orch else 0,
                 "probe": getattr(getattr(hub, "ctx", None), "probe", None).__class__.__name__,
                 "hub_threads": sorted(t.name for t in threading.enumerate() if t.name.startswith("c3-live-")),
                 "threads": {str(t.native_id): t.name for t in threading.enumerate()},
                 "pushed": getattr(app, "pushed", None), "gpu_pushes": marks.get("gpu_pushes", 0), "pod_pushes": marks.get("pod_pushes", 0),
                 "started": dict(started)}
        partial = Path(f"{report}.partial")
        partial.write_text(json.dumps(shown))
        partial.replace(report)  # type: ignore[arg-type]  # whole: the parent reads it at any moment

    def on_ready() -> None:
        app.call_after_refresh(first_paint)
        if mode == "first-frame":
            timer = app.set_interval(0.01, lambda: (watch_data(), ("data_frame" in marks) and app.exit()))
            app.set_timer(20, timer.stop)
        elif mode == "idle":
            app.run_worker(idle_then_exit(), exit_on_error=False)
        elif report:
            app.set_interval(2.0, write_report)

    app.call_later(on_ready)
    if mode == "tty":
        app.run()
        return
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


# -- pseudo-terminals ------------------------------------------------------------------------------

class Tty:
    """A program on its own pseudo-terminal; a thread drains (and timestamps) everything it writes."""

    def __init__(self, argv: list[str], env: dict[str, str], size: tuple[int, int]) -> None:
        self.master, slave = pty.openpty()
        self.resize(*size, fd=slave)
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ROOT, start_new_session=True)
        os.close(slave)
        self.chunks: list[tuple[float, int]] = []
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def resize(self, columns: int, rows: int, fd: int | None = None) -> None:
        fcntl.ioctl(self.master if fd is None else fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        if fd is None:
            os.killpg(self.proc.pid, signal.SIGWINCH)

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.chunks.append((time.monotonic(), len(data)))

    def thread_cpu_s(self) -> dict[int, float]:
        """User + system CPU seconds of each live thread, by native id (a thread that ended is not listed)."""
        out: dict[int, float] = {}
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(task.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return out

    def cpu_s(self) -> float:
        """User + system CPU seconds of the process (all its threads) so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def quiet_for(self, seconds: float, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            last = self.chunks[-1][0] if self.chunks else 0.0
            if time.monotonic() - last >= seconds:
                return
            time.sleep(0.01)

    def key_to_frame_ms(self, key: bytes, timeout: float = 2.0) -> float | None:
        """Write `key`; ms until the first byte of output after it (None: no frame within `timeout`)."""
        self.quiet_for(0.15)
        seen = len(self.chunks)
        sent = time.monotonic()
        os.write(self.master, key)
        while time.monotonic() - sent < timeout:
            if len(self.chunks) > seen:
                return 1000.0 * (self.chunks[seen][0] - sent)
            time.sleep(0.0005)
        return None

    def stop(self) -> None:
        from scripts.rig.netns_cleanup import stop_child

        stop_child(self.proc, grace_s=5)  # no program measured here starts children of its own
        os.close(self.master)


def fake_nvml_env(world_env: dict[str, str], workdir: Path) -> dict[str, str]:
    """The fake NVML with the bench scenario's 8 GPUs, reading the world's GPU registrations (so the
    serving stubs show up as NVML processes), and the environment that makes pynvml load it."""
    import yaml

    from scripts.rig.fake_nvml import FakeGpu, FakeNvmlState, build_library

    rig = yaml.safe_load(Path(world_env["C3_RIG"]).read_text())
    registry = Path(world_env.get("C3_GPU_REGISTRY") or Path(world_env["C3_STATE"]) / "sim" / "gpu-registry")
    state = FakeNvmlState(path=workdir / "nvml-state", registry=registry, gpus=[
        FakeGpu(name=g["name"], total_mib=g["total_mib"], sm=g["sm"], reserved_mib=g["reserved_mib"], used_mib=g["used_mib"],
                limit_w=float(g["power_limit_w"])) for g in rig["gpus"]])
    state.write()
    env = {k: v for k, v in world_env.items() if k != "C3_RIG"}
    ld = os.environ.get("LD_LIBRARY_PATH", "")
    env.update(C3_RUNTIME="sim", C3_FAKE_NVML_STATE=str(state.path), C3_GPU_REGISTRY=str(registry),
               LD_LIBRARY_PATH=f"{build_library().parent}{os.pathsep}{ld}" if ld else str(build_library().parent))
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--keys", type=int, default=30, help="j/k presses per run for keypress → frame")
    parser.add_argument("--child", choices=["c3", "bare"])
    parser.add_argument("--mode", choices=["first-frame", "idle", "tty"], default="first-frame")
    parser.add_argument("--report")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds from start to the idle window (the GPU sparklines fill for the"
                        " first ~20 s: a longer settle measures the steady state)")
    parser.add_argument("--threads", action="store_true", help="print the cockpit's idle CPU per thread (from /proc) after each run")
    parser.add_argument("--no-first-frame", action="store_true", help="skip the cold-start measurement")
    parser.add_argument("--py-spy", metavar="FILE", help="record the cockpit with py-spy over run 1's idle window (raw collapsed "
                        "stacks to FILE) and print where its CPU went")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.mode, args.idle_seconds, args.report)
        return

    sys.path.insert(0, str(ROOT))
    from tests.cockpit.world import World

    world = World.build("bench")
    WORLD_ENV.update(world.env)
    try:
        if not args.no_first_frame:
            measure_first_frame(args)
        measure_idle_and_keys(args, fake_nvml_env(world.env, world.base))
    finally:
        world.stop()


def measure_first_frame(args: argparse.Namespace) -> None:
    frames: dict[str, list[dict]] = {"bare": [], "c3": []}
    for _ in range(args.runs):
        for kind in ("bare", "c3"):  # interleaved, so load on the machine hits both alike
            frames[kind].append(result(*spawn(kind, "first-frame", 0), timeout=120))
    bare_first = statistics.median(m["first_frame"] for m in frames["bare"])
    c3_first = statistics.median(m["first_frame"] for m in frames["c3"])
    c3_data = statistics.median(m["data_frame"] for m in frames["c3"])
    print(f"cold start → first frame (median of {args.runs}, headless, imports included; load {_load()})")
    print(f"  bare Textual app        {bare_first * 1000:7.0f} ms")
    print(f"  c3 cockpit (8 GPU/16 pods) {c3_first * 1000:4.0f} ms   = {c3_first / bare_first:.2f} × bare   (goal ≤ 1.50 ×)")
    print(f"  c3 with GPUs and pods shown {c3_data * 1000:3.0f} ms   = {c3_data / bare_first:.2f} × bare", flush=True)


def _py_spy(pid: int, seconds: float, out: str) -> subprocess.Popen:
    """py-spy sampling the cockpit (every thread, idle frames excluded, without pausing it) for `seconds`."""
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        raise SystemExit("py-spy is not installed in this environment: pip install -e '.[bench]'")
    return subprocess.Popen([str(spy), "record", "--format", "raw", "--threads", "--nonblocking", "--rate", "200",
                             "--duration", str(int(seconds)), "--pid", str(pid), "--output", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


PLACES = (  # (label, a frame that marks it), the first label whose frame is on the stack
    ("hub: GPU reading (NVML)", "_read_gpus (backend/live/hub.py"),
    ("hub: health probes", "_read_health (backend/live/hub.py"),
    ("hub: /metrics scrapes", "_read_metrics (backend/live/hub.py"),
    ("hub: placement", "_read_placement (backend/live/hub.py"),
    ("hub: workload events", "backend/live/events.py"),
    ("hub: snapshot assembly + subscribers", "_changed (backend/live/hub.py"),
    ("cockpit: facade calls in workers", "work (c3/screens/base.py"),
    ("Textual: compositor/render", "textual/_compositor.py"),
    ("Textual: widget render", "render_lines (textual/"),
    ("Textual: styles/layout", "textual/css/"),
    ("Textual: timers", "textual/timer.py"),
    ("Textual: message pump", "textual/message_pump.py"),
    ("Textual: driver (terminal I/O)", "textual/drivers/"),
)


def per_thread(before: dict[int, float], after: dict[int, float], names: dict[str, str], total_pct: float, span: float) -> str:
    """The cockpit's idle CPU split by thread (% of one core); the rest of the process total is threads
    that ended in the window and the kernel's per-thread tick accounting (it does not add up exactly)."""
    rows: dict[str, float] = {}
    for tid, cpu in after.items():
        name = names.get(str(tid), f"thread {tid}")
        name = "Textual worker pool" if name.startswith(("ThreadPoolExecutor", "asyncio_")) else name
        rows[name] = rows.get(name, 0.0) + 100.0 * (cpu - before.get(tid, 0.0)) / span
    rows["(not in any live thread's count: ended threads, tick rounding)"] = max(0.0, total_pct - sum(rows.values()))
    return "  per thread: " + ", ".join(f"{name} {pct:.2f} %" for name, pct in sorted(rows.items(), key=lambda kv: -kv[1]) if pct >= 0.005)


WAITS = (".select", ".wait", "Queue.get", "_acquire_restore", ".recv_into", ".recv", "sleep", ".poll", "lock.acquire", ".readline")


def where_it_went(raw: Path) -> str:
    """py-spy's collapsed stacks grouped by PLACES (share of all non-idle samples of the cockpit)."""
    counts: dict[str, int] = {}
    total = waiting = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        frames = stack.split(";")
        if frames[-1].split(" (")[0].endswith(WAITS):  # py-spy's idle detection misses these under --nonblocking
            waiting += int(n)
            continue
        total += int(n)
        label = next((name for name, mark in PLACES if any(mark in f for f in frames)), "other: " + (frames[-1][:70] if frames else "?"))
        counts[label] = counts.get(label, 0) + int(n)
    lines = [f"where the cockpit's CPU went (py-spy, {total} samples, {waiting} more waiting in a blocking call left out; {raw}):"]
    for label, n in sorted(counts.items(), key=lambda kv: -kv[1])[:25]:
        lines.append(f"  {100.0 * n / max(total, 1):5.1f} %  {label}")
    return "\n".join(lines)


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def measure_idle_and_keys(args: argparse.Namespace, env: dict[str, str]) -> None:
    base = dict(os.environ, TEXTUAL_ANIMATIONS="none", PYTHONPATH=str(ROOT), TERM="xterm-256color", COLORTERM="truecolor", **env)
    nvitop = Path(sys.executable).with_name("nvitop")
    if not nvitop.exists():
        raise SystemExit("nvitop is not installed in this environment: pip install -e '.[bench]'")
    report = Path(env["C3_STATE"]) / "bench-report.json"
    commands = {
        "bare": [sys.executable, __file__, "--child", "bare", "--mode", "tty"],
        "c3": [sys.executable, __file__, "--child", "c3", "--mode", "tty", "--report", str(report)],
        "nvitop": [str(nvitop)],  # its default: a snapshot every 2 s
        "nvitop-1s": [str(nvitop), "--interval", "1"],  # c3's own GPU period
    }
    idle: dict[str, list[float]] = {name: [] for name in commands}
    keys: list[float] = []
    missed = 0
    print(f"idle CPU over {args.idle_seconds:.0f} s, % of one core, all four at once in 120×40 ptys on the same fake NVML")
    for run in range(args.runs):
        ttys = {name: Tty(argv, base, (120, 40)) for name, argv in commands.items()}
        try:
            time.sleep(args.settle)  # settle: imports, the facade, first polls, nvitop's first snapshot
            shown = json.loads(report.read_text()) if report.exists() else {}
            if not (shown.get("gpus") == 8 and shown.get("pods") == 16 and shown.get("with_metrics") == shown.get("serving") == 8):
                raise SystemExit(f"the cockpit does not show what the bench measures: {shown}")
            dead = [name for name, tty in ttys.items() if tty.proc.poll() is not None]
            if dead:
                raise SystemExit(f"exited before the measurement: {dead}")
            load_before = _load()
            spy = _py_spy(ttys["c3"].proc.pid, args.idle_seconds, args.py_spy) if args.py_spy and run == 0 else None
            start = {name: tty.cpu_s() for name, tty in ttys.items()}
            threads_before = ttys["c3"].thread_cpu_s()
            began = time.monotonic()
            time.sleep(args.idle_seconds)
            span = time.monotonic() - began
            threads_after = ttys["c3"].thread_cpu_s()
            during = json.loads(report.read_text()) if report.exists() else {}
            pct = {name: 100.0 * (tty.cpu_s() - start[name]) / span for name, tty in ttys.items()}
            for name, value in pct.items():
                idle[name].append(value)
            c3 = ttys["c3"]
            c3.resize(80, 24)
            time.sleep(1.0)
            for n in range(args.keys):
                ms = c3.key_to_frame_ms(b"j" if n % 2 == 0 else b"k")
                if ms is None:
                    missed += 1
                else:
                    keys.append(ms)
            print(f"  run {run + 1}: " + "  ".join(f"{name} {value:5.2f} %" for name, value in pct.items())
                  + f"   load {load_before} → {_load()}   cockpit showed {shown['gpus']} GPUs, {shown['pods']} pods,"
                  f" {shown['with_metrics']} with engine metrics, {shown['gpu_processes']} GPU processes ({shown['probe']})", flush=True)
            if args.threads:
                print(f"  pushed: {during.get('pushed')}; in the window: {during.get('gpu_pushes', 0) - shown.get('gpu_pushes', 0)} GPU and"
                      f" {during.get('pod_pushes', 0) - shown.get('pod_pushes', 0)} pod pushes; threads started: {shown.get('started')} → {during.get('started')}", flush=True)
                names = during.get("threads", {})
                print(per_thread(threads_before, threads_after, names, pct["c3"], span), flush=True)
            if spy is not None:
                spy.wait(timeout=args.idle_seconds + 30)
                print(where_it_went(Path(args.py_spy)), flush=True)
        finally:
            for tty in ttys.values():
                tty.stop()
    med = {name: statistics.median(values) for name, values in idle.items()}
    print(f"idle CPU, median of {args.runs} runs:")
    print(f"  bare Textual app   {med['bare']:5.2f} %")
    print(f"  c3 cockpit         {med['c3']:5.2f} %   (goal ≤ 3 %; 16 pods, 8 serving, each one's /metrics every 2 s)")
    for name, label in (("nvitop", "nvitop 1.7.2 (2 s)"), ("nvitop-1s", "nvitop 1.7.2 (-i 1)")):
        ratio = f"c3 / it = {med['c3'] / med[name]:.2f}" if med[name] else ""
        print(f"  {label:<19}{med[name]:5.2f} %   {ratio}")
    if keys:
        ordered = sorted(keys)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        print(f"keypress → first byte of its frame at 80×24 (j/k in the pod list, {len(keys)} presses, {missed} without a frame):"
              f" p50 {statistics.median(keys):.1f} ms, p90 {p90:.1f} ms   (goal p50 ≤ 50 ms)")
    print(f"load average at the end: {_load()}")


if __name__ == "__main__":
    main()
