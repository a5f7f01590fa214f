"""The stub engine's HTTP/1.1 side: the connections, the OpenAI-compatible routes (completions and
chat completions, streamed as SSE or whole), /health, /v1/models, /metrics, /version, and the /debug
routes tests use to read what it served and to release held requests.

Standard library only, like the rest of the stub engine (see `stub_engine.py`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from typing import Any

from backend.sim.stub_boot import log
from backend.sim.stub_state import EngineState

WORDS = ("the", "quick", "stub", "engine", "streams", "tokens", "to", "a", "patient", "router",
         "over", "loopback", "while", "pods", "keep", "serving")
SECRET_HEADERS = {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"}
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
           413: "Payload Too Large"}


class Engine(EngineState):
    """The stub engine's HTTP/1.1 server side: one `handle` per client connection, the OpenAI routes,
    SSE streaming and the /debug routes tests drive it with."""

    def __init__(self, cfg: dict[str, Any]):
        super().__init__(cfg)
        self.writers: set[asyncio.StreamWriter] = set()
        self.stop = asyncio.Event()
        self.exit_code = 0

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
        path, _, query = target.partition("?")
        if path.startswith("/debug/"):
            return await self.debug(writer, method, path, keep)
        self.seq += 1
        shown = {k: (f"<redacted sha256:{hashlib.sha256(v.encode()).hexdigest()[:12]}>" if k in SECRET_HEADERS else v)
                 for k, v in headers.items()}  # keys never reach logs or test output; the digest still compares
        rec = {"n": self.seq, "method": method, "path": path, "headers": shown, "body_bytes": len(body),
               "peer": str(writer.get_extra_info("peername")), "t": time.time(), "status": 200}
        self.records.append(rec)
        self.counts["requests"] += 1
        keep = await self.route(reader, writer, method, path, headers, body, rec, keep, query)
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
                    rec: dict[str, Any], keep: bool, query: str = "") -> bool:
        routes = {"/health": "GET", "/v1/models": "GET", "/metrics": "GET", "/version": "GET",
                  "/v1/chat/completions": "POST", "/v1/completions": "POST"}
        if self.cfg.get("dev_mode") and self.cfg.get("engine") == "vllm":
            routes.update({"/sleep": "POST", "/wake_up": "POST", "/is_sleeping": "GET"})
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
        elif path in ("/sleep", "/wake_up", "/is_sleeping"):
            keep = self.sleep_route(writer, path, query, keep, rec)
        elif path == "/v1/models":
            data = [{"id": s, "object": "model", "created": self.started, "owned_by": "vllm",
                     "root": self.cfg["model"], "parent": None, "max_model_len": self.cfg["max_model_len"]}
                    for s in self.cfg["served"]]
            keep = self.send(writer, 200, json.dumps({"object": "list", "data": data}).encode(), keep, rec=rec)
        else:
            keep = await self.complete(reader, writer, path, body, rec, keep)
        await writer.drain()
        return keep

    def sleep_route(self, writer: asyncio.StreamWriter, path: str, query: str, keep: bool, rec: dict[str, Any]) -> bool:
        """vLLM's dev-mode sleep routes as a state machine (what the CPU build does: it frees nothing either)."""
        if path == "/is_sleeping":
            return self.send(writer, 200, json.dumps({"is_sleeping": self.sleep_level > 0}).encode(), keep, rec=rec)
        if path == "/wake_up":
            self.sleep_level = 0
            if self.on_sleep is not None:
                self.on_sleep(False)
            self.awake.set()
            log("INFO", "api_server.py:1040", "wake up the engine with tags: None")
            return self.send(writer, 200, b"", keep, rec=rec)
        level = dict(p.partition("=")[::2] for p in query.split("&") if p).get("level", "1")
        if level not in ("0", "1", "2"):
            return self.error(writer, 400, f"invalid sleep level {level!r}", "BadRequestError", keep, rec)
        self.sleep_level = max(1, int(level))
        self.awake.clear()
        if self.on_sleep is not None:
            self.on_sleep(True)
        log("INFO", "api_server.py:1030", f"sleep the engine with level {level}")
        return self.send(writer, 200, b"", keep, rec=rec)

    async def complete(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str, body: bytes, rec: dict[str, Any], keep: bool) -> bool:
        try:
            req = json.loads(body or b"{}")
            assert isinstance(req, dict)
        except (ValueError, AssertionError):
            return self.error(writer, 400, "Request body is not a JSON object.", "BadRequestError", keep, rec)
        model = req.get("model") or self.cfg["served"][0]
        if model not in self.cfg["served"]:
            return self.error(writer, 404, f"The model `{model}` does not exist.", "NotFoundError", keep, rec)
        await self.awake.wait()  # asleep: held until `POST /wake_up`, as vLLM holds it
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
