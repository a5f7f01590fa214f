#!/usr/bin/env python3
"""A stand-in for an OpenAI-compatible inference engine (vLLM-like), standard library only.

It runs as a local process (the simulator, tests, benchmarks) and as the entrypoint of the test image
(a bare Debian with python3), so it must never import anything outside the standard library.

It accepts a real engine's argv (`vllm serve MODEL --port 8000 …`, SGLang's `--model-path`,
llama.cpp's `-m`/`--alias`) and ignores flags it does not know. Stub behaviour comes from `--stub`-free
flags below or from `C3_STUB_<FLAG>` environment variables (so a container launched with a real engine
command line can still be told to crash or hang). See scripts/rig/README.md for the whole contract,
including the GPU registration files written when `C3_GPU_REGISTRY` is set.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import os
import re
import signal
import socket
import sys
import time
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
BOOL_FLAGS = {"--crash-during-boot": "crash_during_boot", "--hang": "hang", "--access-log": "access_log"}
LAUNCHER_WORDS = {"vllm", "serve", "python", "python3", "-m", "vllm.entrypoints.openai.api_server",
                  "sglang.launch_server", "llama-server", "/app/llama-server"}
DEFAULTS = {
    "host": "0.0.0.0", "port": 8000, "model": "stub/model", "served": None, "name": None,
    "startup_delay": 0.0, "crash_after": 0, "tokens": 16, "token_delay": 0.0, "abort_after_chunks": 0,
    "abort_mode": "close", "max_model_len": 4096, "util": 0.9, "tp": 1, "pp": 1, "api_key": None,
    "weights_gib": 1.0, "kv_bytes_per_token": 131072, "crash_during_boot": False, "hang": False,
    "access_log": False,
}
NUMERIC = {"port": int, "startup_delay": float, "crash_after": int, "tokens": int, "token_delay": float,
           "abort_after_chunks": int, "max_model_len": int, "util": float, "tp": int, "pp": int,
           "weights_gib": float, "kv_bytes_per_token": int}
WORDS = ("the", "quick", "stub", "engine", "streams", "tokens", "to", "a", "patient", "router",
         "over", "loopback", "while", "pods", "keep", "serving")
TRUE = {"1", "true", "yes", "on"}
SECRET_HEADERS = {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"}


def parse_config(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Engine argv + `C3_STUB_*` env → one config dict (argv wins over env, env over defaults)."""
    cfg: dict[str, Any] = dict(DEFAULTS)
    for key in DEFAULTS:
        raw = env.get("C3_STUB_" + key.upper())
        if raw is not None:
            cfg[key] = raw.lower() in TRUE if isinstance(DEFAULTS[key], bool) else raw
    cfg["api_key"] = cfg["api_key"] or env.get("VLLM_API_KEY")
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


# ---------------------------------------------------------------- GPU registration (see README)

def gpu_tokens(env: dict[str, str], world_size: int) -> list[str]:
    """The GPUs this process would land on, as UUIDs or indices ("all" = every GPU)."""
    def split(v: str) -> list[str]:
        return [t.strip() for t in v.split(",") if t.strip()]
    if env.get("C3_STUB_GPUS"):  # simulates a runtime that ignored the mask
        return split(env["C3_STUB_GPUS"])
    nv, cuda = env.get("NVIDIA_VISIBLE_DEVICES"), env.get("CUDA_VISIBLE_DEVICES")
    visible = None if nv is None else ([] if nv.strip() in ("", "void", "none") else split(nv))
    if cuda is not None:
        chosen = split(cuda)
        if visible is None or visible == ["all"]:
            visible = chosen
        else:  # CUDA_VISIBLE_DEVICES indexes into what the container was given
            visible = [visible[int(t)] if t.isdigit() and int(t) < len(visible) else t for t in chosen]
    return visible if visible is not None else [str(i) for i in range(world_size)]


def container_id() -> str | None:
    """This process's container id when inside Docker (from mountinfo, else cgroup), else None."""
    if not os.path.exists("/.dockerenv"):
        return None
    for source, pattern in (("/proc/self/mountinfo", r"/containers/([0-9a-f]{64})/"),
                            ("/proc/self/cgroup", r"([0-9a-f]{64})")):
        try:
            with open(source) as fh:
                found = re.search(pattern, fh.read())
        except OSError:
            continue
        if found:
            return found.group(1)
    return socket.gethostname()


class Registration:
    """One file in `$C3_GPU_REGISTRY` saying which GPUs this process holds and how much memory."""

    def __init__(self, cfg: dict[str, Any], env: dict[str, str]):
        self.path = None
        directory = env.get("C3_GPU_REGISTRY")
        if not directory:
            return
        cid, pid = container_id(), os.getpid()
        mib = int(env.get("C3_STUB_MEM_MIB", "0") or 0)
        try:
            pidns = os.readlink("/proc/self/ns/pid")  # a reader in the same namespace can trust `pid`
        except OSError:
            pidns = "unknown"
        lines = ["# c3 gpu registration v1", f"pid {pid}", f"pidns {pidns}", f"name {cfg['name']}",
                 f"port {cfg['port']}", f"hostname {socket.gethostname()}"] + ([f"container {cid}"] if cid else [])
        lines += [f"gpu {t} {mib} {0 if mib else cfg['util']:.4f}" for t in gpu_tokens(env, cfg["tp"] * cfg["pp"])]
        path = os.path.join(directory, f"{(cid or 'host')[:12]}-{pid}.gpu")
        try:
            os.makedirs(directory, exist_ok=True)
            with open(path + ".tmp", "w") as fh:
                fh.write("\n".join(lines) + "\n")
            os.replace(path + ".tmp", path)
            self.path = path
        except OSError as exc:  # the engine still boots; only the simulated GPU view misses it
            print(f"WARNING: cannot write GPU registration {path}: {exc}", flush=True)

    def remove(self) -> None:
        if self.path:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self.path = None


# ---------------------------------------------------------------- boot log (vLLM V1 formats)

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
    log("INFO", "core.py:210", f"init engine (profile, create kv cache, warmup model) took {delay * 0.5:.2f} seconds",
        core)
    cfg["kv_tokens"] = kv_tokens
    return 0


# ---------------------------------------------------------------- HTTP/1.1

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
           413: "Payload Too Large"}


class PrefixCache:
    """vLLM-style automatic prefix caching, in the stub's own units (a whitespace word is a token).

    A prompt is cut into full blocks of BLOCK tokens, each hashed with all the blocks before it; a
    request counts its prompt tokens as queries and BLOCK hits for every leading block already seen.
    Oldest blocks fall out past `capacity`. What it gives a router test: sticky routing of a growing
    conversation shows hits, scattering it over replicas does not — as with a real engine.
    """

    BLOCK = 16

    def __init__(self, capacity: int = 65536):
        self.blocks: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self.capacity = capacity

    def lookup_and_insert(self, tokens: list[str]) -> int:
        """Tokens of `tokens` served from cache; the prompt's blocks are cached afterwards."""
        digest, hits, missed = hashlib.sha256(), 0, False
        for start in range(0, len(tokens) - self.BLOCK + 1, self.BLOCK):
            digest.update("\x00".join(tokens[start:start + self.BLOCK]).encode() + b"\x01")
            key = digest.copy().digest()
            if not missed and key in self.blocks:
                hits += self.BLOCK
                self.blocks.move_to_end(key)
            else:
                missed = True
                self.blocks[key] = None
                if len(self.blocks) > self.capacity:
                    self.blocks.popitem(last=False)
        return hits


class Engine:
    def __init__(self, cfg: dict[str, Any]):
        self.cfg = cfg
        self.started = int(time.time())
        self.records: collections.deque[dict[str, Any]] = collections.deque(maxlen=2000)
        self.seq = 0
        self.counts: collections.Counter[str] = collections.Counter()
        self.running = 0
        self.inflight_tokens = 0
        self.prefix_cache = PrefixCache()
        self.writers: set[asyncio.StreamWriter] = set()
        self.stop = asyncio.Event()
        self.exit_code = 0
        self.gates: dict[str, asyncio.Event] = {}
        """Hold gates by name (`X-Stub-Hold`), opened by `POST /debug/release/<name>`."""
        self.held: collections.Counter[str] = collections.Counter()
        """Requests waiting at each closed gate now."""

    async def hold(self, name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Wait at gate `name` until a test releases it (a gate released first lets requests straight
        through), so a test waits on a signal instead of sizing a slow stream by guess. The client
        going away ends the wait with ConnectionResetError, as a write would."""
        gate = self.gates.setdefault(name, asyncio.Event())
        self.held[name] += 1
        try:
            while not gate.is_set():
                if reader.at_eof() or writer.is_closing():
                    raise ConnectionResetError
                try:  # wake up now and then only to see a client that went away
                    await asyncio.wait_for(gate.wait(), 0.05)
                except TimeoutError:
                    pass
        finally:
            self.held[name] -= 1
            if not self.held[name]:
                del self.held[name]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            if self.cfg["hang"]:
                while await reader.read(65536):
                    pass
                return
            while await self.one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            pass  # shutdown: the connection task ends here (a re-raise only makes asyncio print noise)
        finally:
            self.writers.discard(writer)
            if not writer.is_closing():
                writer.transport.abort()

    async def one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                body += (await reader.readexactly(size + 2))[:size]
                if size == 0:
                    break
        else:
            if headers.get("expect", "").lower() == "100-continue":  # curl sends this for bodies > 1 KiB
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
        conn = headers.get("connection", "").lower()
        keep = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
        path = target.split("?", 1)[0]
        if path.startswith("/debug/"):
            return await self.debug(writer, method, path, keep)
        self.seq += 1
        shown = {k: (f"<redacted sha256:{hashlib.sha256(v.encode()).hexdigest()[:12]}>" if k in SECRET_HEADERS else v)
                 for k, v in headers.items()}  # keys never reach logs or test output; the digest still compares
        rec = {"n": self.seq, "method": method, "path": path, "headers": shown, "body_bytes": len(body),
               "peer": str(writer.get_extra_info("peername")), "t": time.time(), "status": 200}
        self.records.append(rec)
        self.counts["requests"] += 1
        keep = await self.route(reader, writer, method, path, headers, body, rec, keep)
        if self.cfg["access_log"]:
            print(f'INFO:     {rec["peer"]} - "{method} {target} {version}" {rec["status"]}', flush=True)
        return keep

    def send(self, writer: asyncio.StreamWriter, status: int, body: bytes, keep: bool, ctype: str = "application/json",
             rec: dict[str, Any] | None = None) -> bool:
        if rec is not None:
            rec["status"] = status
        head = (f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\ncontent-type: {ctype}\r\n"
                f"content-length: {len(body)}\r\nx-stub-backend: {self.cfg['name']}\r\n"
                + ("" if keep else "connection: close\r\n") + "\r\n")
        writer.write(head.encode("latin-1") + body)
        return keep

    def error(self, writer: asyncio.StreamWriter, status: int, message: str, kind: str, keep: bool, rec: dict[str, Any]) -> bool:
        body = {"object": "error", "message": message, "type": kind, "param": None, "code": status}
        return self.send(writer, status, json.dumps(body).encode(), keep, rec=rec)

    async def route(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str, path: str, headers: dict[str, str], body: bytes,
                    rec: dict[str, Any], keep: bool) -> bool:
        routes = {"/health": "GET", "/v1/models": "GET", "/metrics": "GET", "/version": "GET",
                  "/v1/chat/completions": "POST", "/v1/completions": "POST"}
        if path not in routes:
            keep = self.send(writer, 404, b'{"detail":"Not Found"}', keep, rec=rec)
        elif method != routes[path]:
            keep = self.send(writer, 405, b'{"detail":"Method Not Allowed"}', keep, rec=rec)
        elif self.cfg["api_key"] and path.startswith("/v1/") and \
                headers.get("authorization") != f"Bearer {self.cfg['api_key']}":
            keep = self.send(writer, 401, b'{"error":"Unauthorized"}', keep, rec=rec)
        elif path == "/health":
            keep = self.send(writer, 200, b"", keep, rec=rec)
        elif path == "/version":
            keep = self.send(writer, 200, b'{"version":"0.11.0+c3stub"}', keep, rec=rec)
        elif path == "/metrics":
            keep = self.send(writer, 200, self.metrics().encode(), keep, "text/plain; version=0.0.4", rec)
        elif path == "/v1/models":
            data = [{"id": s, "object": "model", "created": self.started, "owned_by": "vllm",
                     "root": self.cfg["model"], "parent": None, "max_model_len": self.cfg["max_model_len"]}
                    for s in self.cfg["served"]]
            keep = self.send(writer, 200, json.dumps({"object": "list", "data": data}).encode(), keep, rec=rec)
        else:
            keep = await self.complete(reader, writer, path, body, rec, keep)
        await writer.drain()
        return keep

    async def complete(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str, body: bytes, rec: dict[str, Any], keep: bool) -> bool:
        try:
            req = json.loads(body or b"{}")
            assert isinstance(req, dict)
        except (ValueError, AssertionError):
            return self.error(writer, 400, "Request body is not a JSON object.", "BadRequestError", keep, rec)
        model = req.get("model") or self.cfg["served"][0]
        if model not in self.cfg["served"]:
            return self.error(writer, 404, f"The model `{model}` does not exist.", "NotFoundError", keep, rec)
        chat = path.endswith("chat/completions")
        prompt = json.dumps(req.get("messages") if chat else req.get("prompt", ""))
        limit = req.get("max_completion_tokens") or req.get("max_tokens")
        n = int(limit) if limit else self.cfg["tokens"]
        seed = sum(prompt.encode()) % len(WORDS)
        pieces = [WORDS[(seed + i) % len(WORDS)] + " " for i in range(n)]
        prompt_tokens = prompt.split() or [""]
        cached = self.prefix_cache.lookup_and_insert(prompt_tokens)
        self.counts["prefix_queries"] += len(prompt_tokens)
        self.counts["prefix_hits"] += cached
        usage = {"prompt_tokens": len(prompt_tokens), "completion_tokens": n}
        usage["total_tokens"] = usage["prompt_tokens"] + n
        finish = "length" if limit and n == int(limit) else "stop"
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{os.getpid():x}{self.seq:08x}"
        base = {"id": rid, "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()), "model": model, "system_fingerprint": self.cfg["name"]}
        rec.update(model=model, stream=bool(req.get("stream")), chunks=0, tokens=n)
        hold = rec["headers"].get("x-stub-hold")
        self.counts["inference"] += 1
        self.running += 1
        self.inflight_tokens += usage["prompt_tokens"]
        try:
            if req.get("stream"):
                keep = await self.stream(reader, writer, chat, base, pieces, finish, usage, req, rec, keep, hold)
            else:
                if hold:
                    try:
                        await self.hold(hold, reader, writer)
                    except ConnectionError:
                        rec.update(disconnected=True, finish="abort")
                        self.counts["disconnects"] += 1
                        return False
                await asyncio.sleep(self.cfg["token_delay"] * n)
                text = "".join(pieces)
                choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                           "finish_reason": finish} if chat else
                          {"index": 0, "text": text, "logprobs": None, "finish_reason": finish})
                keep = self.send(writer, 200, json.dumps({**base, "choices": [choice], "usage": usage}).encode(),
                                 keep, rec=rec)
            self.counts["prompt_tokens"] += usage["prompt_tokens"]
            self.counts["generation_tokens"] += rec.get("chunks", n) if rec["stream"] else n
            self.counts["finished_" + rec.get("finish", finish)] += 1
        finally:
            self.running -= 1
            self.inflight_tokens -= usage["prompt_tokens"] + rec.get("chunks", 0)
        if self.cfg["crash_after"] and self.counts["inference"] >= self.cfg["crash_after"]:
            try:
                await writer.drain()  # the Nth reply goes out whole; then the engine "dies"
            except ConnectionError:
                pass
            print(f"ERROR {time.strftime('%m-%d %H:%M:%S')} [core.py:720] EngineCore encountered a fatal "
                  f"error (stub --crash-after {self.cfg['crash_after']}).", flush=True)
            self.exit_code = 1
            self.stop.set()
        return keep

    async def stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, chat: bool, base: dict[str, Any], pieces: list[str], finish: str,
                     usage: dict[str, int], req: dict[str, Any], rec: dict[str, Any], keep: bool, hold: str | None = None) -> bool:
        writer.write(("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                      f"cache-control: no-cache\r\ntransfer-encoding: chunked\r\nx-stub-backend: {self.cfg['name']}\r\n"
                      + ("" if keep else "connection: close\r\n") + "\r\n").encode("latin-1"))
        base = {**base, "object": "chat.completion.chunk" if chat else "text_completion"}

        def event(payload: bytes | dict[str, Any]) -> bytes:
            data = b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"
            return b"%x\r\n%s\r\n" % (len(data), data)

        def choice(delta_text: str | None, reason: str | None = None, role: bool = False) -> dict[str, Any]:
            if chat:
                delta = {"role": "assistant", "content": ""} if role else \
                    ({"content": delta_text} if delta_text is not None else {})
                return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]}
            return {**base, "choices": [{"index": 0, "text": delta_text or "", "logprobs": None,
                                         "finish_reason": reason}]}

        try:
            if chat:
                writer.write(event(choice(None, role=True)))
            if hold:  # the head (and a chat's role chunk) are out: the stream has visibly started
                await writer.drain()
                await self.hold(hold, reader, writer)
            for i, piece in enumerate(pieces):
                if self.cfg["abort_after_chunks"] and i >= self.cfg["abort_after_chunks"]:
                    rec.update(aborted=True, finish="abort")
                    self.counts["aborted"] += 1
                    writer.transport.abort()
                    if self.cfg["abort_mode"] == "exit":
                        self.exit_code = 1
                        self.stop.set()
                    return False
                await asyncio.sleep(self.cfg["token_delay"])
                if reader.at_eof() or writer.is_closing():  # the client half-closed or went away
                    raise ConnectionResetError
                writer.write(event(choice(piece)))
                rec["chunks"] = i + 1
                self.inflight_tokens += 1
                await writer.drain()
            writer.write(event(choice(None, finish)))
            if (req.get("stream_options") or {}).get("include_usage"):
                writer.write(event({**base, "choices": [], "usage": usage}))
            writer.write(event(b"[DONE]") + b"0\r\n\r\n")
            await writer.drain()
        except ConnectionError:
            rec.update(disconnected=True, finish="abort")
            self.counts["disconnects"] += 1
            log("INFO", "async_llm.py:430", f"Aborted request {base['id']} (client disconnected).")
            return False
        return keep

    def metrics(self) -> str:
        """The engine's Prometheus text: vLLM 0.32's names, or llama-server's `llamacpp:` set.

        Names, types and label sets follow the real engines' own /metrics (recorded in
        tests/fixtures/engines/ by scripts/rig/record_engine_fixtures.py; a test fails on drift).
        """
        if self.cfg.get("engine") == "llamacpp":
            return self.llamacpp_metrics()
        label = f'{{engine="0",model_name="{self.cfg["served"][0]}"}}'
        kv = min(1.0, self.inflight_tokens / max(1, self.cfg.get("kv_tokens") or 1))
        rows = [("num_requests_running", "gauge", "Number of requests in model execution batches.", self.running),
                ("num_requests_waiting", "gauge", "Number of requests waiting to be processed.", 0),
                ("kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", kv),
                ("prefix_cache_queries_total", "counter",
                 "Prefix cache queries, in terms of number of queried tokens.", self.counts["prefix_queries"]),
                ("prefix_cache_hits_total", "counter",
                 "Prefix cache hits, in terms of number of cached tokens.", self.counts["prefix_hits"]),
                ("num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", 0),
                ("prompt_tokens_total", "counter", "Number of prefill tokens processed.",
                 self.counts["prompt_tokens"]),
                ("prompt_tokens_cached_total", "counter", "Number of cached prompt tokens (local + external).",
                 self.counts["prefix_hits"]),
                ("generation_tokens_total", "counter", "Number of generation tokens processed.",
                 self.counts["generation_tokens"])]
        out = []
        for name, kind, help_text, value in rows:
            out += [f"# HELP vllm:{name} {help_text}", f"# TYPE vllm:{name} {kind}",
                    f"vllm:{name}{label} {float(value)}"]
        out += ["# HELP vllm:request_success_total Count of successfully processed requests.",
                "# TYPE vllm:request_success_total counter"]
        for reason in ("stop", "length", "abort"):
            out.append(f'vllm:request_success_total{{engine="0",finished_reason="{reason}",model_name='
                       f'"{self.cfg["served"][0]}"}} {float(self.counts["finished_" + reason])}')
        return "\n".join(out) + "\n"

    def llamacpp_metrics(self) -> str:
        """llama-server's `--metrics` text: unlabelled, integers printed without a decimal point."""
        counters = [("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens",
                     self.counts["prompt_tokens"] - self.counts["prefix_hits"]),
                    ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache",
                     self.counts["prefix_hits"]),
                    ("tokens_predicted_total", "Number of generation tokens processed", self.counts["generation_tokens"]),
                    ("n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and "
                     "multimodal decoding", self.counts["generation_tokens"])]
        gauges = [("requests_processing", "Number of requests processing", self.running),
                  ("requests_deferred", "Number of requests deferred", 0)]
        out = []
        for kind, rows in (("counter", counters), ("gauge", gauges)):
            for name, help_text, value in rows:
                out += [f"# HELP llamacpp:{name} {help_text}", f"# TYPE llamacpp:{name} {kind}",
                        f"llamacpp:{name} {value:g}"]
        return "\n".join(out) + "\n"

    async def debug(self, writer: asyncio.StreamWriter, method: str, path: str, keep: bool) -> bool:
        status, body = 200, b'{"cleared":true}'
        if path == "/debug/requests" and method == "DELETE":
            self.records.clear()
            self.counts.clear()
        elif path == "/debug/requests" and method == "GET":
            body = json.dumps({"name": self.cfg["name"], "pid": os.getpid(), "count": self.counts["requests"],
                               "inference": self.counts["inference"], "running": self.running,
                               "disconnects": self.counts["disconnects"], "aborted": self.counts["aborted"],
                               "held": dict(self.held), "requests": list(self.records)}).encode()
        elif path.startswith("/debug/release/") and method == "POST":
            name = path.removeprefix("/debug/release/")
            self.gates.setdefault(name, asyncio.Event()).set()
            body = json.dumps({"released": name, "were_held": self.held.get(name, 0)}).encode()
        else:
            status, body = 404, b'{"detail":"Not Found"}'
        self.send(writer, status, body, keep)
        await writer.drain()
        return keep


async def serve(cfg: dict[str, Any], env: dict[str, str]) -> int:
    loop = asyncio.get_running_loop()
    engine = Engine(cfg)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, engine.stop.set)
    registration = Registration(cfg, env)
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
