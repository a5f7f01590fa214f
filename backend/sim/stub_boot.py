"""The stub engine's log lines and boot log, in vLLM V1's formats (what c3's boot-log readers parse).

Standard library only, like the rest of the stub engine (see `stub_engine.py`).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any


def log(level: str, where: str, message: str, prefix: str = "") -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    print(f"{prefix}{level} {stamp} [{where}] {message}", flush=True)


async def boot(cfg: dict[str, Any]) -> int:
    """Print the boot log across the start-up delay; return non-zero to crash instead of serving."""
    delay, pid, world = cfg["startup_delay"], os.getpid(), cfg["tp"] * cfg["pp"]
    core = f"(EngineCore_DP0 pid={pid}) "
    log("INFO", "__init__.py:241", "Automatically detected platform cuda.")
    log("INFO", "api_server.py:1885", "vLLM API server version 0.11.0 (c3 stub engine)")
    log("INFO", "utils.py:328", f"non-default args: {{'model': {cfg['model']!r}, 'port': {cfg['port']}}}")
    await asyncio.sleep(delay * 0.1)
    log("INFO", "gpu_model_runner.py:2602", f"Starting to load model {cfg['model']}...", core)
    await asyncio.sleep(delay * 0.4)
    if cfg["crash_during_boot"]:
        log("ERROR", "core.py:708", "EngineCore failed to start.", core)
        print(f"{core}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a "
              "total capacity of 23.56 GiB of which 212.00 MiB is free.", flush=True)
        print("RuntimeError: Engine core initialization failed. See root cause above.", flush=True)
        return 1
    weights = cfg["weights_gib"] / max(1, cfg["tp"])
    log("INFO", "gpu_model_runner.py:2653",
        f"Model loading took {weights:.2f} GiB memory and {delay * 0.4:.6f} seconds", core)
    await asyncio.sleep(delay * 0.3)
    total_gib = int(os.environ.get("C3_STUB_GPU_TOTAL_MIB", "24576")) / 1024
    kv_gib = max(0.0, total_gib * cfg["util"] - weights - 0.6)
    for rank in range(world):
        log("INFO", "gpu_worker.py:298", f"Available KV cache memory: {kv_gib:.2f} GiB",
            f"(Worker_TP{rank} pid={pid}) " if world > 1 else core)
    kv_tokens = int(kv_gib * 2**30 * max(1, cfg["tp"]) / cfg["kv_bytes_per_token"]) // 16 * 16
    log("INFO", "kv_cache_utils.py:1087", f"GPU KV cache size: {kv_tokens:,} tokens", core)
    log("INFO", "kv_cache_utils.py:1091", f"Maximum concurrency for {cfg['max_model_len']:,} tokens per "
        f"request: {kv_tokens / cfg['max_model_len']:.2f}x", core)
    await asyncio.sleep(delay * 0.2)
    await _gate(os.environ.get("C3_STUB_BOOT_GATE", ""))
    log("INFO", "core.py:210", f"init engine (profile, create kv cache, warmup model) took {delay * 0.5:.2f} seconds",
        core)
    cfg["kv_tokens"] = kv_tokens
    return 0


async def _gate(path: str, limit_s: float = 300.0) -> None:
    """`C3_STUB_BOOT_GATE=PATH`: stay booting until a test creates PATH (bounded), so that a test can look at the
    booting state for as long as it needs on a machine of any speed instead of racing a start-up delay."""
    if not path:
        return
    deadline = time.monotonic() + limit_s
    while not os.path.exists(path) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
