"""Watching a real engine beside the cockpit: its own /metrics read every ~0.1 s in a thread, each
reading with when it was sent and when it was answered, so a cockpit reading (sent at `taken_at`,
answered `scrape_ms` later) can be compared with the engine readings that bracket it in time."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from scripts.rig.prefix_workload import scrape


@dataclass(frozen=True)
class Reading:
    """One scrape of the engine's /metrics: its values are the engine's at some moment in [sent, got]."""

    sent: datetime
    got: datetime
    values: dict[str, float]


class Timeline:
    """The engine's own /metrics, read back to back (with the plain line parser of
    scripts/rig/prefix_workload, not c3's) until the `with` block ends."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

        self.stalls: list[str] = []
        """When this process got no CPU for over 1 s (a thread that sleeps 0.1 s woke late and the process
        had run meanwhile for under 50 ms): said in the failure messages — a starved process can show and
        announce nothing, whatever the cockpit's code does."""
        self._heartbeat = threading.Thread(target=self._beat, daemon=True)

    def __enter__(self) -> Timeline:
        self._thread.start()
        self._heartbeat.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(35)
        self._heartbeat.join(5)

    def _beat(self) -> None:
        import time

        last, cpu, seen = time.monotonic(), time.process_time(), _machine()
        procs, procs_at = _cpu_by_process(), last
        while not self._stop.wait(0.1):
            now, used, saw = time.monotonic(), time.process_time(), _machine()
            if now - last > 1.0 and used - cpu < 0.05:
                self.stalls.append(f"{datetime.now(UTC):%H:%M:%S} no CPU for {now - last:.1f} s ({_why(seen, saw)}; "
                                   f"CPU since {now - procs_at:.0f} s before: {_top(procs, _cpu_by_process())})")
            last, cpu, seen = now, used, saw
            if now - procs_at > 2.0:
                procs, procs_at = _cpu_by_process(), now

    def _run(self) -> None:
        while not self._stop.is_set():
            sent = datetime.now(UTC)
            try:
                values = scrape(self.url)
            except OSError:
                values = None
            if values is not None:
                self.readings.append(Reading(sent, datetime.now(UTC), values))
            self._stop.wait(0.1)

    def bracket(self, sent: datetime, answered: datetime) -> list[Reading] | None:
        """The engine's readings from the last one answered before `sent` to the first one sent after
        `answered` (None until that one exists). One thread reads them one after another, so whatever
        the engine showed a scrape taken between `sent` and `answered` happened inside this span: if
        every reading in it agrees, that scrape must have read the same."""
        readings = list(self.readings)
        before = [i for i, r in enumerate(readings) if r.got <= sent]
        after = [i for i, r in enumerate(readings) if r.sent >= answered]
        if not before or not after:
            return None
        return readings[before[-1]: after[0] + 1]


def _machine() -> dict[str, float]:
    """What the kernel counts that tells a starved process from a blocked one: the machine's CPU seconds
    (busy, idle, iowait, steal: the hypervisor ran someone else), this process's major page faults, and
    how long this thread waited on a run queue (runnable, not run)."""
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq, steal = (int(v) / tick for v in open("/proc/stat").readline().split()[1:9])
    majflt = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[9])
    waited = int(open("/proc/thread-self/schedstat").read().split()[1]) / 1e9
    return {"busy": user + nice + system + irq + softirq, "idle": idle, "iowait": iowait, "steal": steal, "majflt": majflt, "queued": waited}


def _cpu_by_process() -> dict[int, tuple[str, float]]:
    """pid → (command, CPU seconds so far), for every process on the machine."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                text = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue  # gone meanwhile
            comm, rest = text[text.index("(") + 1: text.rindex(")")], text.rsplit(")", 1)[1].split()
            found[int(entry)] = (comm, (int(rest[11]) + int(rest[12])) / tick)
    return found


def _top(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], n: int = 5) -> str:
    used = sorted(((cpu - before.get(pid, (comm, 0.0))[1], comm, pid) for pid, (comm, cpu) in after.items()), reverse=True)[:n]
    return ", ".join(f"{comm}[{pid}] {cpu:.1f}" for cpu, comm, pid in used if cpu > 0.05) or "nothing"


def _why(before: dict[str, float], after: dict[str, float]) -> str:
    d = {k: after[k] - before[k] for k in after}
    return (f"machine: busy {d['busy']:.1f} idle {d['idle']:.1f} iowait {d['iowait']:.1f} steal {d['steal']:.1f} CPU-s; "
            f"this process: {d['majflt']:.0f} major faults; heartbeat runnable but not run {d['queued']:.1f} s")


@contextlib.asynccontextmanager
async def cockpit_on(name: str) -> AsyncIterator[Any]:
    """The cockpit on the real facade (`RealServices`), run for a test until pod `name` is listed and the
    workers have settled; yields the pilot (its `app` is the cockpit). The facade is closed on the way out."""
    from c3.app import C3App
    from c3.services_real import RealServices
    from tests.cockpit.conftest import orchestration, settle, wait_for

    svc = await asyncio.to_thread(RealServices)
    app = C3App(svc)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: name in [p.name for p in orchestration(app).pods], timeout=30, what="the pod listed")
            await settle(pilot)
            yield pilot
    finally:
        await asyncio.to_thread(svc.close)


async def boot_pod(pod_rig, name: str, slug: str) -> str:
    """`c3 pod create` + `c3 pod up` on GPU 0 and a free port (the pod is removed at teardown); its URL."""
    from tests.runtime.helpers import c3, free_port

    port = free_port()
    created = await asyncio.to_thread(c3, "pod", "create", name, "--gpus", "0", "--slug", slug, "--port", str(port), "--force")
    assert created.returncode == 0, created.stdout + created.stderr
    pod_rig.append(name)
    up = await asyncio.to_thread(c3, "pod", "up", name, "--force", timeout=600)
    assert up.returncode == 0, up.stdout + up.stderr
    await asyncio.to_thread(_keep_a_cpu_from, f"c3-{name}")
    return f"http://127.0.0.1:{port}"


def _keep_a_cpu_from(container: str) -> None:
    """Pin the engine's container to every CPU but the last one, which is left to this process (the
    harness and the cockpit under test). A CPU engine under load takes every core it can get: on the
    2-core test machine this process was then runnable but not run for up to 17 s at a time (measured by
    the Timeline's heartbeat: run-queue wait from /proc/thread-self/schedstat, the machine 100 % busy, no
    steal or I/O wait), so whole rounds of load passed with no cockpit reading to compare. On a GPU rig
    the engine's work is on the GPU; here the CPU is its GPU, so it gets its own cores, as a GPU would be."""
    import docker

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return  # nothing to keep: the stalls say so if it matters
    client = docker.from_env()
    try:
        client.containers.get(container).update(cpuset_cpus=",".join(map(str, cpus[:-1])))
    finally:
        client.close()


def answered(metrics) -> datetime:
    """When the cockpit's scrape was answered (c3 stamps the send time and how long the answer took)."""
    return metrics.taken_at + timedelta(milliseconds=metrics.scrape_ms or 0.0)


class Load:
    """Streaming requests sent by `curl` processes, read to the end and thrown away. Not threads of this
    process: the cockpit under test shares this process (and its GIL) with the harness, and 6 streams
    of ~1,800 tokens/s parsed here starved it on the loaded 2-core machine (whole-process stalls of
    ~10 s: no cockpit reading, no GPU tick, no test step)."""

    def __init__(self, url: str, bodies: list[dict]) -> None:
        self._procs = [subprocess.Popen(["curl", "-sS", "-N", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Content-Type: application/json",
                                         "--max-time", "600", "--data-binary", "@-", url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                       for _ in bodies]
        self._said: list[str | None] = [None] * len(bodies)
        for proc, body in zip(self._procs, bodies, strict=True):
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(body).encode())
            proc.stdin.close()

    def wait(self, timeout_s: float) -> None:
        for proc in self._procs:
            proc.wait(timeout_s)

    def alive(self) -> bool:
        return any(p.poll() is None for p in self._procs)

    def outcomes(self) -> list[str]:
        """`HTTP 200` per finished request (with curl's own complaint when it failed); `running` else."""
        for i, proc in enumerate(self._procs):
            if self._said[i] is None and proc.poll() is not None:
                code = proc.stdout.read().decode() if proc.stdout else ""
                err = proc.stderr.read().decode().strip() if proc.stderr else ""
                self._said[i] = f"HTTP {code}" + (f" ({err})" if err else "")
        return [said or "running" for said in self._said]

    def stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        self.outcomes()
        for proc in self._procs:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()


def shown(app, pod: str, line: re.Pattern[str]) -> tuple[re.Match | None, object]:
    """The pod's engine line as the pod view renders it, and the reading (PodState) it was rendered from."""
    from c3.screens.pod_view import PodList
    from tests.cockpit.conftest import orchestration

    orch = orchestration(app)
    state = next((p for p in orch.pods if p.name == pod), None)
    if state is None or state.metrics is None:
        return None, state
    pods = orch.query_one(PodList)
    texts = [pods.get_option_at_index(i).prompt for i in range(pods.option_count) if pods.get_option_at_index(i).id == pod]
    return line.search(texts[0].plain if texts else ""), state


async def compare_until_steady(pilot, app, pod: str, line: re.Pattern[str], engine: Timeline, *, send_load: Callable[[int], Load],
                               not_steady: Callable[[Timeline, list[Reading], Any, Any], str | None], check: Callable[[re.Match, Any, list[Reading]], None],
                               rounds: int = 4, deadline_s: float = 480.0) -> tuple[list[str], int]:
    """Send the load (round 1, 2, …; each a `Load`; a round during which this process was starved of CPU — a
    new entry in `engine.stalls` — is sent again without counting, up to 2 × `rounds` in all) and compare each new cockpit reading with the engine readings that
    bracket it, until one taken in the steady phase was compared (`check` asserts it). `not_steady(engine,
    span, metrics, previous cockpit metrics)` says why a reading cannot be compared; those reasons, and every
    state the pod view showed, are in the failure message. Returns (what was compared, rounds sent)."""
    loop = asyncio.get_running_loop()
    started, sent = loop.time(), 1
    loads = [send_load(sent)]
    try:
        return await _compare(pilot, app, pod, line, engine, loads, started, send_load=send_load, not_steady=not_steady, check=check, rounds=rounds, deadline_s=deadline_s)
    finally:
        for load in loads:
            load.stop()


async def _compare(pilot, app, pod, line, engine, loads, started, *, send_load, not_steady, check, rounds, deadline_s) -> tuple[list[str], int]:
    from tests.cockpit.conftest import orchestration

    loop = asyncio.get_running_loop()
    sent = counted = 1
    stalls_before = len(engine.stalls)  # when the current round was sent
    compared: list[str] = []
    trail: list[str] = []
    pending: list[tuple[re.Match, Any, Any]] = []  # (line, metrics, the cockpit's reading before it)
    last = None
    while not compared:
        assert loop.time() - started < deadline_s, f"no steady reading compared within {deadline_s:.0f} s ({sent} rounds); stalls {engine.stalls}; trail: {trail}"
        await pilot.pause(0.1)
        if not compared and not pending and not loads[-1].alive():
            if len(engine.stalls) > stalls_before:
                counted -= 1  # starved: this round showed nothing about the cockpit's code
                trail.append(f"round {sent} not counted: {engine.stalls[stalls_before:]}")
            assert counted < rounds and sent < 2 * rounds, (
                f"{sent} rounds of load ({counted} not starved) and no steady reading compared; outcomes {[o for load in loads for o in load.outcomes()]}; "
                f"stalls {engine.stalls}; trail: {trail}")
            sent, counted, stalls_before = sent + 1, counted + 1, len(engine.stalls)
            loads.append(send_load(sent))
        state = next((p for p in orchestration(app).pods if p.name == pod), None)
        if not pending and trail and last is not None and state is not None and state.metrics is not None and state.metrics.taken_at == last.taken_at:
            continue  # nothing new: the pod view is not rendered again for the harness (this process is the cockpit's too)
        match, state = shown(app, pod, line)
        metrics = getattr(state, "metrics", None)
        error = getattr(state, "metrics_error", None)
        said = f"{getattr(state, 'state', None)} {match.group(0) if match else None} error={error}"
        if not trail or not trail[-1].endswith(said):
            trail.append(f"{loop.time() - started:.1f}s {said}")
        if match is not None and metrics is not None and (last is None or metrics.taken_at > last.taken_at):
            assert (int(match["running"]), int(match["waiting"])) == (metrics.running, metrics.waiting)  # the line is this reading
            if not error:  # numbers carried past a failed scrape are an older reading, not a new one
                pending.append((match, metrics, last))
            last = metrics
        for item in list(pending):
            match_, m, previous = item
            span = engine.bracket(m.taken_at, answered(m))
            if span is None:
                continue  # the engine reading after it is not in yet
            pending.remove(item)
            why = not_steady(engine, span, m, previous)
            if why:
                trail.append(f"  {match_.group(0)} (scrape {m.scrape_ms} ms) not compared: {why}")
                continue
            check(match_, m, span)
            compared.append(f"{match_.group(0)} (scrape {m.scrape_ms} ms, {len(span)} engine readings around it)")
    return compared, sent


async def kill_and_expect_the_announcement(pilot, app, svc, pod: str, toasts: list[tuple[float, str]], stalls: list[str]) -> tuple[float, str, str]:
    """SIGKILL the pod's engine (the pid c3's runtime reports: the container's main process) and wait for
    the cockpit's toast; returns (seconds to it, its message, the mode bar then). Docker restarts a
    container that served (`unless-stopped`) within ~0.1 s: its RestartCount grows (`restarted`), and
    until the engine answers again it is `unhealthy`; `failed` if the exit itself is seen."""
    from tests.cockpit.conftest import wait_for

    loop = asyncio.get_running_loop()
    workload = await asyncio.to_thread(svc.ctx.runtime.workload, pod)
    assert workload.running and workload.pids, workload
    assert toasts == [], toasts  # nothing called for attention while the engine was only busy
    killed = loop.time()
    os.kill(workload.pids[0], signal.SIGKILL)
    await wait_for(pilot, lambda: any(m.startswith(f"{pod}: ") for _, m in toasts), timeout=30, what="the toast")
    announced, message = next((t, m) for t, m in toasts if m.startswith(f"{pod}: "))
    assert announced - killed <= 2.0, f"announced after {announced - killed:.2f} s: {message} (stalls {stalls})"
    kind = message.removeprefix(f"{pod}: ").split(" ")[0]
    assert kind in ("restarted", "unhealthy", "failed"), message
    await pilot.pause(0.2)
    bar = str(app.screen.query_one("#modebar").render())
    assert "⚠" in bar and f"1 {kind}" in bar, bar
    return announced - killed, message, bar


def spy_on_toasts(app) -> list[tuple[float, str]]:
    """Every notification the app posts from now on, with the event loop's time."""
    toasts: list[tuple[float, str]] = []
    loop = asyncio.get_running_loop()
    notify = app.notify

    def spy(message, **kwargs):
        toasts.append((loop.time(), str(message)))
        return notify(message, **kwargs)

    app.notify = spy
    return toasts


async def watch_compare_and_kill(url: str, pod: str, line: re.Pattern[str], *, send_load: Callable[[int], Load],
                                 not_steady: Callable[[Timeline, list[Reading], Any, Any], str | None],
                                 check: Callable[[re.Match, Any, list[Reading]], None], rounds: int = 4) -> str:
    """The cockpit (real facade, headless, 120×40) beside the engine's own /metrics: compare until a steady
    reading matched (`compare_until_steady`), then SIGKILL the engine and expect the announcement within 2 s.
    Returns a one-line summary to print."""
    from c3.app import C3App
    from c3.services_real import RealServices
    from tests.cockpit.conftest import wait_for

    svc = await asyncio.to_thread(RealServices)
    app = C3App(svc)
    try:
        with Timeline(url) as engine:
            async with app.run_test(size=(120, 40)) as pilot:
                toasts = spy_on_toasts(app)
                await wait_for(pilot, lambda: shown(app, pod, line)[0] is not None, timeout=30, what="the engine line in the pod view")
                compared, sent = await compare_until_steady(pilot, app, pod, line, engine, send_load=send_load, not_steady=not_steady, check=check, rounds=rounds)
                took, message, bar = await kill_and_expect_the_announcement(pilot, app, svc, pod, toasts, engine.stalls)
    finally:
        svc.close()
    return (f"compared: {compared} after {sent} round(s); announced after {took:.2f} s: {message!r}; mode bar: {bar.strip()!r}; "
            f"engine readings: {len(engine.readings)}; stalls: {engine.stalls}")
