#!/usr/bin/env python3
"""A stand-in for an OpenAI-compatible inference engine (vLLM-like), standard library only.

It runs as a local process (the simulator, tests, benchmarks) and as the entrypoint of the test image
(a bare Debian with python3), so it must never import anything outside the standard library
(and its own `backend.sim.stub_*` modules, which the test image carries along).

It accepts a real engine's argv (`vllm serve MODEL --port 8000 …`, SGLang's `--model-path`,
llama.cpp's `-m`/`--alias`) and ignores flags it does not know. Stub behaviour comes from `--stub`-free
flags (`stub_config.py`) or from `C3_STUB_<FLAG>` environment variables (so a container launched with a real engine
command line can still be told to crash or hang). See scripts/rig/README.md for the whole contract,
including the GPU registration files written when `C3_GPU_REGISTRY` is set.

The code is split by concern into sibling modules, each standard library only too: `stub_config`
(argv and env → config), `stub_gpu_registration`, `stub_boot` (the boot log), `stub_state` (counters,
prefix cache, /metrics text) and `stub_http` (the server side). This module starts it and keeps the
public import path (`backend.sim.stub_engine`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

if __name__ == "__main__" and not __package__:
    # Run as a file (`python3 backend/sim/stub_engine.py`, as the test rig does): Python put this folder on
    # sys.path, not the one holding `backend/`, so the sibling modules would not import as `backend.sim.*`.
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from backend.sim.stub_boot import boot, log  # noqa: E402
from backend.sim.stub_config import parse_config  # noqa: E402
from backend.sim.stub_gpu_registration import Registration, container_id, gpu_tokens  # noqa: E402
from backend.sim.stub_http import Engine  # noqa: E402
from backend.sim.stub_state import EngineState, PrefixCache  # noqa: E402

__all__ = ["Engine", "EngineState", "PrefixCache", "Registration", "boot", "container_id", "gpu_tokens", "log", "main",
           "parse_config", "serve"]


async def serve(cfg: dict[str, Any], env: dict[str, str]) -> int:
    loop = asyncio.get_running_loop()
    engine = Engine(cfg)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, engine.stop.set)
    registration = Registration(cfg, env)
    if cfg["sleep_mode"]:  # without --enable-sleep-mode the routes still work, and free nothing (as on vLLM's CPU build)
        engine.on_sleep = registration.sleep
    try:
        booting = asyncio.create_task(boot(cfg))
        stopping = asyncio.create_task(engine.stop.wait())
        await asyncio.wait({booting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not booting.done():
            booting.cancel()
            print("INFO:     Shutting down during boot", flush=True)
            return 0
        stopping.cancel()
        if booting.result():
            return booting.result()
        try:
            server = await asyncio.start_server(engine.handle, cfg["host"], cfg["port"], limit=1 << 20,
                                                backlog=4096)
        except OSError as exc:
            print(f"ERROR: [Errno {exc.errno}] could not bind {cfg['host']}:{cfg['port']}: {exc.strerror}",
                  flush=True)
            return 1
        log("INFO", "api_server.py:1971", f"Starting vLLM API server 0 on http://{cfg['host']}:{cfg['port']}")
        print(f"INFO:     Started server process [{os.getpid()}]\nINFO:     Waiting for application startup.\n"
              "INFO:     Application startup complete.", flush=True)
        await engine.stop.wait()
        server.close()
        for writer in list(engine.writers):
            writer.transport.abort()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        print("INFO:     Shutting down", flush=True)
        return engine.exit_code
    finally:
        registration.remove()


def main(argv: list[str] | None = None) -> int:
    env = dict(os.environ)
    try:
        cfg = parse_config(sys.argv[1:] if argv is None else argv, env)
    except ValueError as exc:
        print(f"stub_engine: error: {exc}", file=sys.stderr)
        return 2
    try:
        import resource  # 1,000 concurrent streams need more than the usual 1,024 descriptors
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
    except (ImportError, ValueError, OSError):
        pass
    return asyncio.run(serve(cfg, env))


if __name__ == "__main__":
    sys.exit(main())
