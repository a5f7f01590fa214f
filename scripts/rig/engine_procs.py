"""Start and stop the real engines the rig builds (scripts/rig/real_engines.py) as local processes.

    srv = start_vllm(models_dir() / "dense", scratch, kv_space_gib=1)        # vllm serve on 127.0.0.1
    srv.wait_healthy(180); …; srv.stop()                                     # SIGTERM by pid, then SIGKILL
    srv = start_llama(models_dir() / "tiny.gguf", scratch)                   # llama-server --metrics

Each server gets a free loopback port, its own scratch folder (vLLM's temp files go there, not to /tmp) and a log
file; vLLM's cache root is one folder beside the built engine (`vllm_cache_root`), as a user's ~/.cache/vllm is, so
that every boot after the first reads its model-class inspection from there (vllm/model_executor/models/registry.py
`_load_modelinfo_from_cache`, written atomically) instead of importing the model in a fresh subprocess (measured
2026-12-07, dense tiny model, quiet 2-core box: 30 → 21 s to the KV line); `stop()` signals only the pid it started (vLLM's API server
takes its EngineCore and Worker down with it on SIGTERM).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from scripts.rig.real_engines import OFFLINE_ENV, llama_server, vllm_cache_root, vllm_dir

KV_LINE = re.compile(r"CPU KV cache size: ([\d,]+) tokens")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def free_port_run(count: int, low: int = 20000, high: int = 30000) -> int:
    """The first of `count` consecutive ports free on loopback, below the kernel's ephemeral range (32768+): a port
    the kernel hands out (`free_port`) says nothing of the one after it, which any outgoing connection may take — a
    cold CI saw an rpc-server's `Failed to create server socket` on the port after a `free_port`."""
    import random

    for _ in range(200):
        first = random.randrange(low, high - count)
        held = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                held.append(sock)
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports in {low}-{high}")


@dataclass
class EngineProcess:
    """One real engine started by this module."""

    popen: subprocess.Popen
    port: int
    log_path: Path
    argv: list[str]
    name: str = "tiny"
    env: dict[str, str] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        """Poll `predicate()` until true; raise with the log tail when the engine dies or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if not self.alive():
                raise RuntimeError(f"engine pid {self.pid} exited ({self.popen.returncode}) before {what}:\n{self.log()[-3000:]}")
            time.sleep(0.25)
        raise RuntimeError(f"engine pid {self.pid}: no {what} within {timeout:.0f}s:\n{self.log()[-3000:]}")

    def wait_healthy(self, timeout: float = 240) -> None:
        def healthy() -> bool:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as reply:
                    return reply.status == 200
            except (OSError, ValueError):
                return False

        self.wait_for(healthy, timeout, "/health 200")

    def wait_kv_tokens(self, timeout: float = 240) -> int:
        """vLLM CPU's `CPU KV cache size: N tokens` (printed before the port opens)."""
        self.wait_for(lambda: KV_LINE.search(self.log()) is not None, timeout, "`CPU KV cache size` line")
        return int(KV_LINE.search(self.log()).group(1).replace(",", ""))

    def kill(self) -> None:
        """SIGKILL the engine and all its processes at once, as when its machine dies (no waiting)."""
        _signal_group(self.popen.pid, signal.SIGKILL)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Stop the engine and every process it spawned (its own session, so its process group).

        vLLM's API server takes its EngineCore and Worker down on SIGTERM once it serves, but not when it
        is stopped mid-boot or SIGKILLed (a test that kills a replica): those children would live on
        holding ~2 GiB. So the whole group gets the signal, then SIGKILL for whatever is left.
        """
        group = self.popen.pid  # start_new_session: the leader's pid is the group id
        _signal_group(group, sig)
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(group, signal.SIGKILL)
            code = self.popen.wait(timeout=timeout)
        deadline = time.monotonic() + timeout
        while _group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.2)
        _signal_group(group, signal.SIGKILL)
        return code


def _signal_group(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        pass


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
        return True
    except ProcessLookupError:
        return False


def _spawn(argv: list[str], env: dict[str, str], log_path: Path, port: int, name: str) -> EngineProcess:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env={**os.environ, **env}, start_new_session=True)
    return EngineProcess(popen=popen, port=port, log_path=log_path, argv=argv, name=name, env=env)


def vllm_env(scratch: Path, kv_space_gib: int | None = 1, *, in_process: bool = False) -> dict[str, str]:
    """Offline, loopback-only, temp files in `scratch` (REAL-ENGINE-NOTES.md). `kv_space_gib` None leaves
    `VLLM_CPU_KVCACHE_SPACE` out, so that `--kv-cache-memory-bytes` sizes the pool (vllm/platforms/cpu.py lets the
    variable override the flag, and its worker cannot parse it empty).

    `in_process`: the engine core and its one worker run inside the API server's process
    (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, which vllm/platforms/cpu.py answers by keeping the `uni` executor) instead of
    two more processes that each import torch and vLLM again: 21 → 14 s to the KV line for the dense tiny model. For
    tests whose claim is the engine's arithmetic (KV pool, auto-fit, prefix-cache counters), which is the same code
    in either layout; a test about what users' logs and process trees look like keeps the default layout."""
    (scratch / "tmp").mkdir(parents=True, exist_ok=True)
    space = {} if kv_space_gib is None else {"VLLM_CPU_KVCACHE_SPACE": str(kv_space_gib)}
    layout = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"} if in_process else {}
    return {**OFFLINE_ENV, **space, **layout, "VLLM_CACHE_ROOT": str(vllm_cache_root()), "TMPDIR": str(scratch / "tmp"),
            "OMP_NUM_THREADS": "1"}


def vllm_argv(model: Path | str, port: int, *extra: str, name: str = "tiny", max_model_len: int | str = 2048) -> list[str]:
    return [str(vllm_dir() / "bin" / "vllm"), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
            "--served-model-name", name, "--max-model-len", str(max_model_len), "--enforce-eager", *extra]


def start_vllm(model: Path, scratch: Path, *extra: str, kv_space_gib: int | None = 1, name: str = "tiny",
               max_model_len: int | str = 2048, log_name: str | None = None, in_process: bool = False,
               env: dict[str, str] | None = None) -> EngineProcess:
    """`env`: more variables for the engine (e.g. `VLLM_SERVER_DEV_MODE=1`, which mounts the sleep routes)."""
    port = free_port()
    argv = vllm_argv(model, port, *extra, name=name, max_model_len=max_model_len)
    env = {**vllm_env(scratch, kv_space_gib, in_process=in_process), **(env or {})}
    return _spawn(argv, env, scratch / (log_name or f"vllm-{port}.log"), port, name)


def llama_argv(gguf: Path | str, port: int, *extra: str, name: str = "tiny") -> list[str]:
    return [str(llama_server()), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "-c", "4096", "-np", "2",
            "--metrics", "--alias", name, "-t", "1", *extra]


def start_llama(gguf: Path, scratch: Path, *extra: str, name: str = "tiny", log_name: str | None = None) -> EngineProcess:
    port = free_port()
    argv = llama_argv(gguf, port, *extra, name=name)
    return _spawn(argv, {"LLAMA_ARG_HOST": "127.0.0.1"}, scratch / (log_name or f"llama-{port}.log"), port, name)
