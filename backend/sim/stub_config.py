"""The stub engine's configuration: a real engine's argv plus `C3_STUB_*` variables → one dict.

Standard library only, like the rest of the stub engine (see `stub_engine.py`).
"""

from __future__ import annotations

import socket
from typing import Any

# Flags that take a value; everything else starting with "-" is a boolean or an unknown flag.
VALUE_FLAGS = {
    "--host": "host", "--port": "port", "--model": "model", "--model-path": "model", "-m": "model",
    "--served-model-name": "served", "--alias": "served", "-a": "served",
    "--name": "name", "--startup-delay": "startup_delay", "--crash-after": "crash_after",
    "--tokens": "tokens", "--token-delay": "token_delay", "--abort-after-chunks": "abort_after_chunks",
    "--abort-mode": "abort_mode", "--max-model-len": "max_model_len", "--ctx-size": "max_model_len",
    "-c": "max_model_len", "--context-length": "max_model_len",
    "--gpu-memory-utilization": "util", "--mem-fraction-static": "util",
    "--tensor-parallel-size": "tp", "-tp": "tp", "--tp-size": "tp", "--tp": "tp",
    "--pipeline-parallel-size": "pp", "-pp": "pp", "--api-key": "api_key",
    "--weights-gib": "weights_gib", "--kv-bytes-per-token": "kv_bytes_per_token",
}
BOOL_FLAGS = {"--crash-during-boot": "crash_during_boot", "--hang": "hang", "--access-log": "access_log",
              "--enable-sleep-mode": "sleep_mode"}
LAUNCHER_WORDS = {"vllm", "serve", "python", "python3", "-m", "vllm.entrypoints.openai.api_server",
                  "sglang.launch_server", "llama-server", "/app/llama-server"}
DEFAULTS = {
    "host": "0.0.0.0", "port": 8000, "model": "stub/model", "served": None, "name": None,
    "startup_delay": 0.0, "crash_after": 0, "tokens": 16, "token_delay": 0.0, "abort_after_chunks": 0,
    "abort_mode": "close", "max_model_len": 4096, "util": 0.9, "tp": 1, "pp": 1, "api_key": None,
    "weights_gib": 1.0, "kv_bytes_per_token": 131072, "crash_during_boot": False, "hang": False,
    "access_log": False, "sleep_mode": False,
}
NUMERIC = {"port": int, "startup_delay": float, "crash_after": int, "tokens": int, "token_delay": float,
           "abort_after_chunks": int, "max_model_len": int, "util": float, "tp": int, "pp": int,
           "weights_gib": float, "kv_bytes_per_token": int}
TRUE = {"1", "true", "yes", "on"}


def parse_config(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Engine argv + `C3_STUB_*` env → one config dict (argv wins over env, env over defaults)."""
    cfg: dict[str, Any] = dict(DEFAULTS)
    for key in DEFAULTS:
        raw = env.get("C3_STUB_" + key.upper())
        if raw is not None:
            cfg[key] = raw.lower() in TRUE if isinstance(DEFAULTS[key], bool) else raw
    cfg["api_key"] = cfg["api_key"] or env.get("VLLM_API_KEY")
    # vLLM mounts /sleep, /wake_up and /is_sleeping only in dev mode (vllm/entrypoints/openai/api_server.py).
    cfg["dev_mode"] = env.get("VLLM_SERVER_DEV_MODE", "").lower() in TRUE
    served: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if flag in VALUE_FLAGS:
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            i += 1 if eq else 2
            if VALUE_FLAGS[flag] == "served":
                served.append(value)
                while not eq and i < len(argv) and not argv[i].startswith("-"):  # vLLM: nargs="+"
                    served.append(argv[i])
                    i += 1
            elif not (VALUE_FLAGS[flag] == "model" and value in LAUNCHER_WORDS):  # `python3 -m vllm…`
                cfg[VALUE_FLAGS[flag]] = value
            continue
        if flag in BOOL_FLAGS:
            cfg[BOOL_FLAGS[flag]] = True if not eq else inline.lower() in TRUE
        elif arg.startswith("-"):
            boolean_like = eq or flag.startswith(("--no-", "--enable-", "--disable-", "--enforce-"))
            boolean_like = boolean_like or flag in {"--trust-remote-code", "--headless"}
            if not boolean_like and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                i += 1  # an unknown flag with its value: skip both
        elif arg not in LAUNCHER_WORDS and not arg.endswith(("stub_engine.py", "backend.stub_engine", "backend.sim.stub_engine")):
            positional.append(arg)  # (a command that names the stub itself is the image's own entrypoint)
        i += 1
    # Which engine it stands in for decides the /metrics it serves: llama-server's `llamacpp:` set or vLLM's.
    engine = env.get("C3_STUB_ENGINE") or ("llamacpp" if any(a.endswith("llama-server") for a in argv) else "vllm")
    cfg["engine"] = engine if engine in ("vllm", "llamacpp") else "vllm"
    if positional and cfg["model"] == DEFAULTS["model"]:
        cfg["model"] = positional[0]
    for key, kind in NUMERIC.items():
        cfg[key] = kind(cfg[key])
    cfg["served"] = served or ([s for s in cfg["served"].split(",") if s] if cfg["served"] else [cfg["model"]])
    cfg["name"] = cfg["name"] or f"{socket.gethostname()}:{cfg['port']}"
    return cfg
