#!/usr/bin/env python3
"""Router overhead and capacity on loopback: c3 pool beside nginx, vllm-router, sglang-router and LiteLLM.

    .venv/bin/python bench/router.py [--scenario paced,capacity] [--repeats 5] [--duration 4] [--json out.json]

Two scenarios, every target in the same run, repeats interleaved (each repeat runs every target in
turn, so drifting load from other work on the machine hits all alike); medians, with each run's figure
and the load average printed beside them.

- paced (latency): two stub engines stream 16 tokens 10 ms apart (an OpenAI-shaped SSE answer, ~1.7 s
  per request at 64 concurrent streams); a streaming client (asyncio, one connection per session key)
  measures time to first byte (TTFT) and the router's CPU per stream. "added" = routed − direct TTFT.
- capacity: the backends are one nginx worker answering every request with a fixed 16-event SSE body
  (chunked) — they cannot be the bottleneck — and the load comes from `wrk` (C, one thread, 64
  connections, keep-alive): requests/s, latency, router CPU per request.

Placement: the router under test is pinned to the first CPU (figures are per core); backends and the
load generator share the others. Router CPU = utime+stime of its process tree from /proc over the run.
Session keys are random-looking (sha256-derived): every router's split over the two backends is
printed per run, because a skewed key set (e.g. `bench-0..63` under nginx's hash) measures the skew.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import (  # noqa: E402 - bench scripts run from a checkout
    ROOT,
    Procs,
    free_port,
    start_c3,
    start_litellm,
    start_nginx_router,
    start_rust_router,
    start_static_backends,
    wait_http,
)

STUB = ROOT / "backend" / "stub_engine.py"
CLK_TCK = os.sysconf("SC_CLK_TCK")
TOKENS, TOKEN_DELAY = 16, 0.010
ROUTERS = ("c3 pool", "nginx", "vllm-router", "sglang-router", "LiteLLM")


def session_keys(n: int) -> list[str]:
    return [hashlib.sha256(b"c3-bench-key-%d" % i).hexdigest()[:24] for i in range(n)]


def body(max_tokens: int) -> bytes:
    return json.dumps({"model": "stub/model", "stream": True, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": "benchmark " * 200}]}).encode()


# ---------------------------------------------------------------- paced streaming client (subprocess)

async def _read_stream(reader: asyncio.StreamReader, started: float) -> tuple[bytes, bytes, float]:
    head = await reader.readuntil(b"\r\n\r\n")
    ttft = None
    lower = head.lower()
    at = lower.find(b"x-stub-backend:")
    backend = lower[at + 15 : lower.find(b"\r\n", at)].strip() if at >= 0 else b"?"
    if b"transfer-encoding: chunked" in lower:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if ttft is None:
                ttft = time.perf_counter() - started
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass
                break
            await reader.readexactly(size + 2)
    else:
        at = lower.find(b"content-length:")
        await reader.readexactly(int(lower[at + 15 : lower.find(b"\r\n", at)]) if at >= 0 else 0)
        ttft = time.perf_counter() - started
    return head[9:12], backend, ttft


async def _session(key: str, target: tuple[str, int], warm_until: float, deadline: float, out: dict) -> None:
    host, port = target
    data = body(TOKENS)
    request = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
               f"X-Session-ID: {key}\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data
    reader = writer = None
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
            writer.write(request)
            status, backend, ttft = await asyncio.wait_for(_read_stream(reader, started), 30)
            out["all"] += 1
            if started >= warm_until:
                if status == b"200":
                    out["ttft"].append(ttft)
                    out["split"][backend.decode()] = out["split"].get(backend.decode(), 0) + 1
                else:
                    out["errors"].append(status.decode())
        except (OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as exc:
            if time.perf_counter() >= warm_until:
                out["errors"].append(type(exc).__name__)
            if writer is not None:
                writer.transport.abort()
            reader = writer = None
            await asyncio.sleep(0.01)
    if writer is not None:
        writer.transport.abort()


def paced_client_main(spec: dict) -> None:
    out = {"ttft": [], "split": {}, "errors": [], "all": 0}
    start = time.perf_counter()
    warm_until, deadline = start + spec["warmup"], start + spec["warmup"] + spec["duration"]
    targets = [tuple(t) for t in spec["targets"]]

    async def run():
        await asyncio.gather(*(_session(k, targets[i % len(targets)], warm_until, deadline, out)
                               for i, k in enumerate(session_keys(spec["concurrency"]))))

    asyncio.run(run())
    lat = sorted(out["ttft"])
    n = len(lat)
    print(json.dumps({"streams": n, "all_streams": out["all"], "active_s": time.perf_counter() - start, "errors": len(out["errors"]),
                      "error_kinds": sorted(set(out["errors"]))[:4], "split": out["split"],
                      "p50_ms": lat[n // 2] * 1000 if n else None, "p99_ms": lat[min(n - 1, int(n * 0.99))] * 1000 if n else None}))


# ---------------------------------------------------------------- runs

def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def tree_cpu_seconds(pid: int | None) -> float:
    if not pid:
        return 0.0
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))):
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p not in seen and (fields := _stat(p)):
            seen.add(p)
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
            todo.extend(children.get(p, []))
    return total


def run_paced(targets, concurrency, warmup, duration, cpuset, pid) -> dict:
    spec = {"targets": targets, "concurrency": concurrency, "warmup": warmup, "duration": duration}
    before = tree_cpu_seconds(pid)
    out = subprocess.run([sys.executable, __file__, "--paced-client", json.dumps(spec)], capture_output=True, text=True,
                         preexec_fn=lambda: os.sched_setaffinity(0, cpuset), timeout=warmup + duration + 90)
    if out.returncode:
        raise RuntimeError(out.stderr[-400:])
    r = json.loads(out.stdout.strip().splitlines()[-1])
    used = tree_cpu_seconds(pid) - before if pid else None
    r["cpu_pct"] = used / r["active_s"] * 100 if used is not None else None
    # CPU per stream: the router's CPU over the client's whole life / every stream completed in it.
    r["cpu_ms_per_stream"] = used * 1000 / max(1, r["all_streams"]) if used is not None else None
    return r


WRK_LUA = """
local keys = {%s}
local body = %s
local i = 0
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) s0 = 0; s1 = 0; other = 0 end
function request()
  i = i + 1
  return wrk.format("POST", "/v1/chat/completions", {["Content-Type"] = "application/json", ["X-Session-ID"] = keys[(i %% #keys) + 1]}, body)
end
function response(status, headers, body)
  local b = headers["X-Stub-Backend"] or headers["x-stub-backend"]
  if b == "s0" then s0 = s0 + 1 elseif b == "s1" then s1 = s1 + 1 else other = other + 1 end
end
function done(summary, latency, requests)
  local a, b, c = 0, 0, 0
  for _, t in ipairs(threads) do a = a + t:get("s0"); b = b + t:get("s1"); c = c + t:get("other") end
  io.write(string.format("C3JSON {\\"p50_ms\\": %%f, \\"p99_ms\\": %%f, \\"requests\\": %%d, \\"errors\\": %%d, \\"split\\": {\\"s0\\": %%d, \\"s1\\": %%d, \\"other\\": %%d}}\\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.requests,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout, a, b, c))
end
"""


def run_capacity(target, concurrency, warmup, duration, cpuset, pid, work: Path) -> dict:
    host, port = target[0]
    script = work / "wrk.lua"
    keys = ", ".join(f'"{k}"' for k in session_keys(concurrency))
    script.write_text(WRK_LUA % (keys, json.dumps(body(16).decode())))
    pin = lambda: os.sched_setaffinity(0, cpuset)  # noqa: E731
    url = f"http://{host}:{port}"
    subprocess.run(["wrk", "-t1", f"-c{concurrency}", f"-d{max(1, round(warmup))}s", "-s", str(script), url], capture_output=True, preexec_fn=pin, check=False)
    before = tree_cpu_seconds(pid)
    started = time.perf_counter()
    out = subprocess.run(["wrk", "-t1", f"-c{concurrency}", f"-d{max(1, round(duration))}s", "--timeout", "10s", "-s", str(script), url],
                         capture_output=True, text=True, preexec_fn=pin, timeout=duration + 60)
    active = time.perf_counter() - started
    line = next((x for x in out.stdout.splitlines() if x.startswith("C3JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk: {out.stdout[-300:]} {out.stderr[-300:]}")
    r = json.loads(line[7:])
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out.stdout)
    r["rps"] = float(rps.group(1)) if rps else r["requests"] / active
    used = tree_cpu_seconds(pid) - before if pid else None
    r["cpu_pct"] = used / active * 100 if used is not None else None
    r["per_core"] = r["requests"] / used if used else None
    return r


# ---------------------------------------------------------------- orchestration

def start_targets(procs: Procs, work: Path, router_cpu: set[int], ports: list[int], env: dict, wanted: set[str]) -> tuple[list, list[str]]:
    """[(name, [(host, port)], pid, note)] of every router that started; notes for those that did not."""
    targets, notes = [], []
    started = []
    if "c3 pool" in wanted:
        proc, port = start_c3(procs, work, router_cpu, ports, env)
        started.append(("c3 pool", proc, port, "uvloop", f"http://127.0.0.1:{port}/c3/health", work / f"c3-{port}.log"))
    if "nginx" in wanted:
        proc, port = start_nginx_router(procs, work / f"nginx-router-{ports[0]}", router_cpu, ports)
        started.append(("nginx", proc, port, "1 worker, hash $http_x_session_id consistent", f"http://127.0.0.1:{port}/health",
                        work / f"nginx-router-{ports[0]}" / "error.log"))
    for kind in ("vllm-router", "sglang-router"):
        if kind in wanted:
            proc, port, note = start_rust_router(kind, procs, work, router_cpu, ports)
            if proc is None:
                notes.append(note)
            else:
                started.append((kind, proc, port, note, f"http://127.0.0.1:{port}/health", work / f"{kind}.log"))
    if "LiteLLM" in wanted:
        proc, port, note = start_litellm(procs, work, router_cpu, ports)
        if proc is None:
            notes.append(note)
        else:
            started.append(("LiteLLM", proc, port, note, f"http://127.0.0.1:{port}/health/liveliness", work / "litellm.log"))
    for name, proc, port, note, health, log in started:
        if wait_http(health, 120 if name == "LiteLLM" else 30, proc):
            targets.append((name, [("127.0.0.1", port)], proc.pid, note))
        else:
            text = log.read_text(errors="replace")[-300:] if log.exists() else ""
            notes.append(f"{name} did not start: {text!r}")
    return targets, notes


def summarize(name: str, runs: list[dict], keys: tuple[str, ...]) -> dict:
    med = {}
    for k in keys:
        vals = [r[k] for r in runs if r.get(k) is not None]
        med[k] = statistics.median(vals) if vals else None
    med["errors"] = sum(r["errors"] for r in runs)
    med["runs"] = runs
    return med


def fmt(v, d=2) -> str:
    return "-" if v is None else f"{v:.{d}f}"


def split_text(runs: list[dict]) -> str:
    tot: dict[str, int] = {}
    for r in runs:
        for k, v in r.get("split", {}).items():
            tot[k] = tot.get(k, 0) + v
    n = sum(tot.values()) or 1
    return "/".join(f"{100 * tot.get(k, 0) / n:.0f}" for k in ("s0", "s1"))


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--paced-client":
        paced_client_main(json.loads(sys.argv[2]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="paced,capacity")
    ap.add_argument("--routers", default=",".join(ROUTERS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    mine = sorted(os.sched_getaffinity(0))
    router_cpu, other_cpu = {mine[0]}, set(mine[1:] or mine)
    wanted = {r.strip() for r in args.routers.split(",")}
    work = Path(tempfile.mkdtemp(prefix="c3-bench-router-"))
    env = {"C3_HOME": str(work / "home"), "C3_STATE": str(work / "state"), "PYTHONPATH": str(ROOT)}
    print(f"router on CPU {sorted(router_cpu)}, backends + load on CPU {sorted(other_cpu)}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at start; {args.repeats} interleaved repeats", flush=True)
    report: dict = {"load_start": os.getloadavg(), "scenarios": {}}
    for scenario in args.scenario.split(","):
        procs = Procs()
        try:
            if scenario == "paced":
                ports = [free_port(), free_port()]
                for i, p in enumerate(ports):
                    procs.start([sys.executable, str(STUB), "--host", "127.0.0.1", "--port", str(p), "--name", f"s{i}",
                                 "--tokens", str(TOKENS), "--token-delay", str(TOKEN_DELAY)], other_cpu, work / f"stub{i}.log")
                for p in ports:
                    wait_http(f"http://127.0.0.1:{p}/health", 30)
                direct = ("direct", [("127.0.0.1", p) for p in ports], None, "")
            else:
                if not shutil.which("wrk"):
                    print("capacity: wrk not installed (apt-get install wrk); skipped")
                    continue
                ports = start_static_backends(procs, work / f"static-{scenario}", other_cpu, 16)
                direct = ("direct", [("127.0.0.1", ports[0])], None, "one backend")
            targets, notes = start_targets(procs, work, router_cpu, ports, env, wanted)
            targets = [direct, *targets]
            runs: dict[str, list[dict]] = {t[0]: [] for t in targets}
            for rep in range(args.repeats):
                for name, tgt, pid, _note in targets:
                    load = os.getloadavg()[0]
                    try:
                        if scenario == "paced":
                            r = run_paced(tgt, args.concurrency, args.warmup, args.duration, other_cpu, pid)
                        else:
                            r = run_capacity(tgt, args.concurrency, args.warmup, args.duration, other_cpu, pid, work)
                    except (RuntimeError, subprocess.SubprocessError) as exc:
                        notes.append(f"{name} run {rep}: {exc}")
                        continue
                    r["load"] = load
                    runs[name].append(r)
                    main_fig = f"TTFT p50 {fmt(r['p50_ms'])} ms" if scenario == "paced" else f"{fmt(r['rps'], 0)} req/s"
                    print(f"  {scenario} #{rep} {name:<14} {main_fig}  cpu {fmt(r['cpu_pct'], 0)}%  split {split_text([r])}  "
                          f"errors {r['errors']}  load {load:.2f}", flush=True)
            keys = ("p50_ms", "p99_ms", "cpu_pct", "cpu_ms_per_stream") if scenario == "paced" else ("p50_ms", "p99_ms", "rps", "cpu_pct", "per_core")
            res = {name: summarize(name, got, keys) for name, got in runs.items() if got}
            report["scenarios"][scenario] = {"results": res, "notes": notes, "targets": {t[0]: t[3] for t in targets}}
            print_table(scenario, res, {t[0]: t[3] for t in targets}, notes)
        finally:
            procs.stop_all()
    report["load_end"] = os.getloadavg()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end (a busy shared machine skews everything above)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def print_table(scenario: str, res: dict, notes_by: dict, notes: list[str]) -> None:
    base = res.get("direct", {})
    print()
    if scenario == "paced":
        print("| target | TTFT p50 ms | TTFT p99 ms | added p50 | added p99 | router CPU % | router CPU ms per stream | split s0/s1 % | errors | load |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    else:
        print("| target | req/s | p50 ms | p99 ms | router CPU % | req per router CPU-s | split s0/s1 % | errors | load |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, m in res.items():
        loads = [r["load"] for r in m["runs"]]
        load = f"{min(loads):.1f}–{max(loads):.1f}"
        label = f"{name} ({notes_by[name]})" if notes_by.get(name) else name
        if scenario == "paced":
            a50 = m["p50_ms"] - base["p50_ms"] if name != "direct" and m["p50_ms"] is not None and base.get("p50_ms") is not None else None
            a99 = m["p99_ms"] - base["p99_ms"] if name != "direct" and m["p99_ms"] is not None and base.get("p99_ms") is not None else None
            print(f"| {label} | {fmt(m['p50_ms'])} | {fmt(m['p99_ms'])} | {fmt(a50)} | {fmt(a99)} | {fmt(m['cpu_pct'], 0)} | "
                  f"{fmt(m['cpu_ms_per_stream'], 3)} | {split_text(m['runs'])} | {m['errors']} | {load} |")
        else:
            print(f"| {label} | {fmt(m['rps'], 0)} | {fmt(m['p50_ms'])} | {fmt(m['p99_ms'])} | {fmt(m['cpu_pct'], 0)} | "
                  f"{fmt(m['per_core'], 0)} | {split_text(m['runs'])} | {m['errors']} | {load} |")
    for name, m in res.items():
        shares = split_text(m["runs"]).split("/")
        if name != "direct" and shares[0].isdigit() and not 40 <= int(shares[0]) <= 60:
            print(f"note: {name} put {shares[0]}/{shares[1]} % of requests on s0/s1 with this key set: its figures "
                  "include that skew (a policy choice for cache-aware routing, a key-set artefact for hashing)")
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    sys.exit(main())
