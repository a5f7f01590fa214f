"""The routers `bench/router.py` compares, started the same way: pinned to one CPU, stopped by pid.

c3 pool (uvloop, its default), nginx (`hash $http_x_session_id consistent`, one worker), vllm-router
(`--policy consistent_hash`) and sglang-router (`--policy cache_aware`) from a bench venv
(`.rig/bench-venv`: `pip install vllm-router sglang-router`), LiteLLM from `.rig/litellm-venv`
(`pip install 'litellm[proxy]'`). A peer that is not installed or does not start is reported with the
reason, never silently dropped. Also the capacity backends: nginx serving a fixed SSE answer.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH_VENV = ROOT / ".rig" / "bench-venv"
LITELLM_VENV = ROOT / ".rig" / "litellm-venv"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


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


class Procs:
    """Processes the bench started; each in its own session, stopped by its pid (process group)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], cpuset: set[int], log: Path, env: dict | None = None) -> subprocess.Popen:
        with open(log, "ab") as fh:
            proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **(env or {})}, preexec_fn=lambda: os.sched_setaffinity(0, cpuset),
                                    start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                    proc.wait(timeout=15)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait(timeout=5)


def _nginx_dirs(work: Path) -> str:
    for sub in ("client", "proxy", "fastcgi", "uwsgi", "scgi"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    return (f"client_body_temp_path {work}/client; proxy_temp_path {work}/proxy; fastcgi_temp_path {work}/fastcgi;"
            f" uwsgi_temp_path {work}/uwsgi; scgi_temp_path {work}/scgi;")


def _nginx_main(work: Path, http: str) -> str:
    return (f"worker_processes 1;\ndaemon off;\npid {work}/nginx.pid;\nerror_log {work}/error.log warn;\n"
            f"events {{ worker_connections 8192; }}\nhttp {{\n  access_log off;\n  {_nginx_dirs(work)}\n"
            f"  keepalive_requests 1000000;\n{http}}}\n")


def sse_body(tokens: int) -> str:
    """A fixed OpenAI-shaped SSE answer (what the capacity backends serve for every request)."""
    event = '{"id":"c","object":"chat.completion.chunk","model":"stub/model","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}'
    return "".join(f"data: {event}\\n\\n" for _ in range(tokens)) + "data: [DONE]\\n\\n"


def start_static_backends(procs: Procs, work: Path, cpuset: set[int], tokens: int) -> list[int]:
    """Two ports on one nginx worker answering every request with a fixed SSE body (chunked, via sub_filter)."""
    work.mkdir(parents=True, exist_ok=True)
    ports = [free_port(), free_port()]
    servers = "".join(
        f"  server {{ listen 127.0.0.1:{p} backlog=4096; location / {{ default_type text/event-stream; add_header X-Stub-Backend s{i};"
        f" sub_filter_types text/event-stream; sub_filter 'zz-never' 'x'; return 200 '{sse_body(tokens)}'; }} }}\n"
        for i, p in enumerate(ports))
    conf = work / "nginx.conf"
    conf.write_text(_nginx_main(work, servers))
    proc = procs.start([NGINX, "-c", str(conf), "-p", str(work), "-e", str(work / "error.log")], cpuset, work / "nginx.out")
    for p in ports:
        if not wait_http(f"http://127.0.0.1:{p}/health", 15, proc):
            raise RuntimeError("static nginx backends did not start: " + (work / "error.log").read_text()[-300:])
    return ports


def start_c3(procs: Procs, work: Path, cpuset: set[int], ports: list[int], env: dict) -> tuple[subprocess.Popen, int]:
    sys.path.insert(0, str(ROOT))
    os.environ.update(env)
    from backend.nodes.registry import add_node, load_registry

    names = []
    for i, port in enumerate(ports):
        name = f"b{port}"
        if not any(n.name == name for n in load_registry().nodes):
            add_node(name, f"http://127.0.0.1:{port}", "bench@localhost")
        names.append(name)
        del i
    port = free_port()
    proc = procs.start([sys.executable, "-m", "c3", "pool", "serve", "--nodes", ",".join(names), "--bind", f"127.0.0.1:{port}",
                        "--sticky", "auto"], cpuset, work / f"c3-{port}.log", env)
    return proc, port


def start_nginx_router(procs: Procs, work: Path, cpuset: set[int], ports: list[int]) -> tuple[subprocess.Popen, int]:
    work.mkdir(parents=True, exist_ok=True)
    port = free_port()
    servers = "\n".join(f"    server 127.0.0.1:{p};" for p in ports)
    conf = work / "nginx.conf"
    conf.write_text(_nginx_main(work, f"""  upstream pool {{
    hash $http_x_session_id consistent;
{servers}
    keepalive 512;
    keepalive_requests 1000000;
  }}
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
"""))
    return procs.start([NGINX, "-c", str(conf), "-p", str(work), "-e", str(work / "error.log")], cpuset, work / "nginx.out"), port


def start_rust_router(kind: str, procs: Procs, work: Path, cpuset: set[int], ports: list[int]) -> tuple[subprocess.Popen | None, int, str]:
    exe = BENCH_VENV / "bin" / kind
    if not exe.exists():
        return None, 0, f"{kind} not installed: run `python3 -m venv .rig/bench-venv && .rig/bench-venv/bin/pip install {kind}`"
    port, metrics = free_port(), free_port()
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    if kind == "vllm-router":
        argv = [str(exe), "--host", "127.0.0.1", "--port", str(port), "--worker-urls", *urls, "--policy", "consistent_hash",
                "--prometheus-port", str(metrics), "--log-level", "warning"]
        note = "--policy consistent_hash"
    else:
        argv = [str(exe), "launch", "--host", "127.0.0.1", "--port", str(port), "--worker-urls", *urls, "--policy", "cache_aware",
                "--prometheus-port", str(metrics), "--log-level", "warn"]
        note = "--policy cache_aware"
    return procs.start(argv, cpuset, work / f"{kind}.log"), port, note


def start_litellm(procs: Procs, work: Path, cpuset: set[int], ports: list[int]) -> tuple[subprocess.Popen | None, int, str]:
    exe = LITELLM_VENV / "bin" / "litellm"
    if not exe.exists():
        return None, 0, "LiteLLM not installed: python3 -m venv .rig/litellm-venv && .rig/litellm-venv/bin/pip install 'litellm[proxy]'"
    port = free_port()
    cfg = work / "litellm.yaml"
    models = "\n".join(f"  - model_name: stub/model\n    litellm_params:\n      model: openai/stub/model\n"
                       f"      api_base: http://127.0.0.1:{p}/v1\n      api_key: sk-bench-not-secret" for p in ports)
    cfg.write_text(f"model_list:\n{models}\nlitellm_settings:\n  telemetry: false\n  drop_params: true\n")
    env = {"LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False", "DISABLE_SCHEMA_UPDATE": "True",
           "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true"}
    proc = procs.start([str(exe), "--config", str(cfg), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
                       cpuset, work / "litellm.log", env)
    return proc, port, "1 worker"
