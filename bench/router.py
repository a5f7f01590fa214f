#!/usr/bin/env python3
"""Router overhead on loopback: the stub engine direct, through `c3 pool`, through nginx and LiteLLM.

    .venv/bin/python bench/router.py [--duration 2] [--repeats 3] [--no-litellm] [--json out.json]

Method (after vllm-project/router's overhead harness): the same request corpus at the same concurrency
is sent directly to the backends and through each router; "added" = routed − direct, on medians of
≥3 repeats. Requests are streaming chat completions (`stream: true`, ~2 KB body, 4 tokens, SSE back),
each of C client connections keyed by its own `X-Session-ID`, run closed-loop for `--duration` seconds
after a warm-up. Two stub engines serve; the direct baseline spreads connections over both.

CPU placement: the router under test is pinned to CPU 0 (one core: the req/s figure is per core);
backends and the load generator share the other CPUs. Router CPU comes from /proc/<pid>/stat
(utime+stime of the router and its children) over the run, as % of one core.

LiteLLM is installed at bench time into a throwaway venv (.rig/litellm-venv) with
`pip install 'litellm[proxy]'`; if that fails or it does not start, the reason is printed and the
bench goes on without it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "backend" / "sim" / "stub_engine.py"
LITELLM_VENV = ROOT / ".rig" / "litellm-venv"
CLK_TCK = os.sysconf("SC_CLK_TCK")
CONCURRENCY = (1, 64, 256)


# ---------------------------------------------------------------- load generator (runs in a subprocess)

def build_request(session: str, host: str) -> bytes:
    content = "benchmark " * 200  # ~2 KB body
    body = json.dumps({"model": "stub/model", "stream": True, "max_tokens": 4,
                       "messages": [{"role": "user", "content": content}]}).encode()
    return (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"X-Session-ID: {session}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def _read_response(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";")[0], 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass
                break
            await reader.readexactly(size + 2)
    else:
        at = lower.find(b"content-length:")
        length = int(lower[at + 15 : lower.find(b"\r\n", at)]) if at >= 0 else 0
        await reader.readexactly(length)
    return head[9:12]


REQUEST_TIMEOUT_S = 30.0


async def _connection(index: int, targets: list[tuple[str, int]], warm_until: float, deadline: float, lat: list, errors: list, total: list) -> None:
    """Closed loop: no new request after `deadline`, but the one in flight is waited for; every answer
    completed after the warm-up counts (a slow router would otherwise show no completions at all)."""
    host, port = targets[index % len(targets)]
    request = build_request(f"bench-{index}", f"{host}:{port}")
    reader = writer = None
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
            writer.write(request)
            status = await asyncio.wait_for(_read_response(reader), REQUEST_TIMEOUT_S)
            done = time.perf_counter()
            total[0] += 1
            if done >= warm_until:  # completed inside the window (a slow router's first answers count too)
                if status == b"200":
                    lat.append(done - started)
                else:
                    errors.append(status.decode())
        except (OSError, asyncio.IncompleteReadError, ValueError, TimeoutError) as exc:
            if time.perf_counter() >= warm_until:
                errors.append(type(exc).__name__)
            if writer is not None:
                writer.transport.abort()
            reader = writer = None
            await asyncio.sleep(0.01)
    if writer is not None:
        writer.transport.abort()


async def _loadgen(targets: list[tuple[str, int]], concurrency: int, warmup: float, duration: float) -> dict:
    lat: list[float] = []
    errors: list[str] = []
    total = [0]
    start = time.perf_counter()
    warm_until = start + warmup
    deadline = warm_until + duration
    await asyncio.gather(*(_connection(i, targets, warm_until, deadline, lat, errors, total) for i in range(concurrency)))
    end = time.perf_counter()
    elapsed = max(end - warm_until, 1e-9)
    lat.sort()
    n = len(lat)
    return {"n": n, "total": total[0], "active_s": end - start, "errors": len(errors), "error_kinds": sorted(set(errors))[:5], "rps": n / elapsed,
            "p50_ms": lat[n // 2] * 1000 if n else None, "p99_ms": lat[min(n - 1, int(n * 0.99))] * 1000 if n else None}


def loadgen_main(argv: list[str]) -> None:
    spec = json.loads(argv[0])
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ImportError, ValueError, OSError):
        pass
    result = asyncio.run(_loadgen([tuple(t) for t in spec["targets"]], spec["concurrency"], spec["warmup"], spec["duration"]))
    print(json.dumps(result))


# ---------------------------------------------------------------- orchestration

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, timeout: float, proc: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback only
                if resp.status < 500:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def cpus() -> tuple[set[int], set[int]]:
    """(router CPUs, everything-else CPUs)."""
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        return set(mine), set(mine)
    return {mine[0]}, set(mine[1:])


def pinned(cpuset: set[int]):
    return lambda: os.sched_setaffinity(0, cpuset)


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def tree_cpu_seconds(pid: int) -> float:
    """utime+stime of `pid` and its live descendants (found through each process's ppid)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    total = 0.0
    todo, seen = [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        fields = _stat(p)
        if fields:
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
        todo.extend(children.get(p, []))
    return total


class Procs:
    """Processes the bench started; stopped by pid."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], cpuset: set[int], log: Path, env: dict | None = None) -> subprocess.Popen:
        with open(log, "ab") as fh:
            proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **(env or {})}, preexec_fn=pinned(cpuset), start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)  # its own session: only what it started
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            self.stop(proc)


def run_load(targets, concurrency, warmup, duration, cpuset, router_pid) -> dict:
    spec = json.dumps({"targets": targets, "concurrency": concurrency, "warmup": warmup, "duration": duration})
    before = tree_cpu_seconds(router_pid) if router_pid else 0.0
    out = subprocess.run([sys.executable, __file__, "--loadgen", spec], capture_output=True, text=True,
                         preexec_fn=pinned(cpuset), timeout=warmup + duration + REQUEST_TIMEOUT_S + 60)
    if out.returncode != 0:
        raise RuntimeError(f"load generator failed: {out.stderr[-500:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    used = tree_cpu_seconds(router_pid) - before if router_pid else None
    # CPU over the load generator's active time (its own start-up excluded); capacity per core is
    # requests per router CPU-second, which holds even when other tenants share the router's core.
    result["cpu_pct"] = used / result["active_s"] * 100 if used is not None else None
    result["per_core"] = result["total"] / used if used else None
    return result


def nginx_conf(work: Path, port: int, backends: list[int]) -> Path:
    for sub in ("client", "proxy", "fastcgi", "uwsgi", "scgi"):
        (work / sub).mkdir(exist_ok=True)
    servers = "\n".join(f"    server 127.0.0.1:{p};" for p in backends)
    conf = work / "nginx.conf"
    conf.write_text(f"""worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {work}/client; proxy_temp_path {work}/proxy;
  fastcgi_temp_path {work}/fastcgi; uwsgi_temp_path {work}/uwsgi; scgi_temp_path {work}/scgi;
  upstream pool {{
    hash $http_x_session_id consistent;
{servers}
    keepalive 512;
    keepalive_requests 1000000;
  }}
  keepalive_requests 1000000;
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    location / {{
      proxy_pass http://pool;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 300s;
    }}
  }}
}}
""")
    return conf


def ensure_litellm(log: Path) -> tuple[Path | None, str]:
    exe = LITELLM_VENV / "bin" / "litellm"
    if exe.exists():
        return exe, "cached venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", str(LITELLM_VENV)], check=True, capture_output=True, timeout=120)
        with open(log, "ab") as fh:
            subprocess.run([str(LITELLM_VENV / "bin" / "pip"), "install", "-q", "litellm[proxy]"], check=True,
                           stdout=fh, stderr=subprocess.STDOUT, timeout=900)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"pip install 'litellm[proxy]' failed: {exc}"
    return (exe, "installed") if exe.exists() else (None, "litellm installed no `litellm` script")


def fmt(value, digits=2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--loadgen":
        loadgen_main(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=2.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)))
    parser.add_argument("--no-litellm", action="store_true")
    parser.add_argument("--no-nginx", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the raw results here")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    router_cpu, other_cpu = cpus()
    work = Path(tempfile.mkdtemp(prefix="c3-bench-router-"))
    procs = Procs()
    results: dict[str, dict] = {}
    notes: list[str] = []
    env = {"C3_HOME": str(work / "home"), "C3_STATE": str(work / "state"), "PYTHONPATH": str(ROOT)}
    print(f"router on CPU {sorted(router_cpu)}, backends + load generator on CPU {sorted(other_cpu)}; "
          f"load average {os.getloadavg()[0]:.2f} at start; work dir {work}", flush=True)
    try:
        ports = [free_port(), free_port()]
        for i, port in enumerate(ports):
            procs.start([sys.executable, str(STUB), "--host", "127.0.0.1", "--port", str(port), "--name", f"s{i}", "--tokens", "4"],
                        other_cpu, work / f"stub{i}.log")
        for port in ports:
            if not wait_http(f"http://127.0.0.1:{port}/health", 30):
                print("stub engine did not start", file=sys.stderr)
                return 1
        direct = [("127.0.0.1", p) for p in ports]
        targets: list[tuple[str, list, int | None, str]] = [("direct", direct, None, "")]

        # c3 pool
        sys.path.insert(0, str(ROOT))
        os.environ.update(env)
        from backend.nodes.registry import add_node

        for i, port in enumerate(ports):
            add_node(f"s{i}", f"http://127.0.0.1:{port}", "bench@localhost")
        pool_port = free_port()
        pool = procs.start([sys.executable, "-m", "c3", "pool", "serve", "--nodes", "s0,s1", "--bind", f"127.0.0.1:{pool_port}", "--sticky", "auto"],
                           router_cpu, work / "pool.log", env)
        if wait_http(f"http://127.0.0.1:{pool_port}/c3/health", 30, pool):
            targets.append(("c3 pool", [("127.0.0.1", pool_port)], pool.pid, ""))
        else:
            notes.append("c3 pool did not start: " + (work / "pool.log").read_text()[-300:])

        if not args.no_nginx:
            nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
            if nginx:
                nport = free_port()
                conf = nginx_conf(work, nport, ports)
                proc = procs.start([nginx, "-c", str(conf), "-p", str(work), "-e", str(work / "error.log")], router_cpu, work / "nginx.out")
                if wait_http(f"http://127.0.0.1:{nport}/health", 15, proc):
                    targets.append(("nginx", [("127.0.0.1", nport)], proc.pid, "hash $http_x_session_id consistent"))
                else:
                    notes.append("nginx did not start: " + (work / "nginx.out").read_text()[-300:])
            else:
                notes.append("nginx not installed (apt-get install nginx-light)")

        if not args.no_litellm:
            exe, how = ensure_litellm(work / "litellm-install.log")
            if exe is None:
                notes.append(f"LiteLLM skipped: {how}")
            else:
                lport = free_port()
                cfg = work / "litellm.yaml"
                models = "\n".join(
                    f"  - model_name: stub/model\n    litellm_params:\n      model: openai/stub/model\n"
                    f"      api_base: http://127.0.0.1:{p}/v1\n      api_key: sk-bench-not-secret" for p in ports)
                cfg.write_text(f"model_list:\n{models}\nlitellm_settings:\n  telemetry: false\n  drop_params: true\n")
                # Loopback-only throwaway instance: no master key, like the other routers measured here.
                lenv = {"LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False", "DISABLE_SCHEMA_UPDATE": "True",
                        "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true"}
                proc = procs.start([str(exe), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(lport), "--num_workers", "1"],
                                   router_cpu, work / "litellm.log", lenv)
                if wait_http(f"http://127.0.0.1:{lport}/health/liveliness", 120, proc):
                    targets.append(("LiteLLM", [("127.0.0.1", lport)], proc.pid, how))
                else:
                    notes.append("LiteLLM did not start: " + (work / "litellm.log").read_text(errors="replace")[-400:].replace("\n", " | "))

        # Interleaved (each repeat runs every target in turn) so drifting load from other work on the
        # machine hits all targets alike.
        runs: dict[tuple[str, int], list[dict]] = {}
        for conc in levels:
            for _ in range(args.repeats):
                for name, tgt, pid, _note in targets:
                    runs.setdefault((name, conc), []).append(run_load(tgt, conc, args.warmup, args.duration, other_cpu, pid))
            for name, _tgt, _pid, _note in targets:
                got = runs[(name, conc)]
                med = {k: statistics.median([r[k] for r in got if r[k] is not None]) if any(r[k] is not None for r in got) else None
                       for k in ("p50_ms", "p99_ms", "rps", "cpu_pct", "per_core")}
                med["errors"] = sum(r["errors"] for r in got)
                med["error_kinds"] = sorted({k for r in got for k in r["error_kinds"]})
                med["spread_p50_ms"] = [round(r["p50_ms"], 3) if r["p50_ms"] else None for r in got]
                results.setdefault(name, {})[conc] = med
                print(f"  {name:<8} c={conc:<4} p50 {fmt(med['p50_ms'])} ms  p99 {fmt(med['p99_ms'])} ms  "
                      f"{fmt(med['rps'], 0)} req/s  cpu {fmt(med['cpu_pct'], 0)}%  {fmt(med['per_core'], 0)} req/CPU-s  "
                      f"errors {med['errors']}  (p50 runs {med['spread_p50_ms']})", flush=True)
    finally:
        procs.stop_all()

    base = results.get("direct", {})
    print()
    print("| target | conc | p50 ms | p99 ms | added p50 ms | added p99 ms | req/s | router CPU % of 1 core | req per router CPU-s | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, rows in results.items():
        for conc, med in rows.items():
            b = base.get(conc, {})
            add50 = med["p50_ms"] - b["p50_ms"] if name != "direct" and med["p50_ms"] is not None and b.get("p50_ms") is not None else None
            per_core = med.get("per_core")
            add99 = med["p99_ms"] - b["p99_ms"] if name != "direct" and med["p99_ms"] is not None and b.get("p99_ms") is not None else None
            print(f"| {name} | {conc} | {fmt(med['p50_ms'])} | {fmt(med['p99_ms'])} | {fmt(add50)} | {fmt(add99)} | "
                  f"{fmt(med['rps'], 0)} | {fmt(med['cpu_pct'], 0)} | {fmt(per_core, 0)} | {med['errors']} |")
    for note in notes:
        print(f"note: {note}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end (other work on this machine skews everything above)")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "notes": notes}, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
