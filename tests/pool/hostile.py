"""The hostile-HTTP corpus and the helpers that run it: raw bytes a client (or a backend) sends, and
what the router must do with them.

Cases come from RFC 9112 (§2.2 bare CR/LF, §3 request line, §5.1 no whitespace before the colon, §5.2
obs-fold, §6.1 transfer codings, §6.3 CL with TE, §7.1 chunk sizes, §3.2 Host) and from the public
request-smuggling corpora (PortSwigger's HTTP Request Smuggler "TE obfuscation" permutations, the
`http-garden` differential fuzzing findings against llhttp/h11), plus the reproductions of issue #10.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\nX-Marker: smuggled\r\n\r\n"
# A smuggled request that swallows the next client's request as its body (the cross-client attack).
SWALLOW = b"POST /smuggled HTTP/1.1\r\nHost: x\r\nX-Marker: smuggled\r\nContent-Length: 400\r\n\r\n"


def request(headers: bytes, body: bytes = b"", method: bytes = b"POST", target: bytes = b"/v1/case",
            version: bytes = b"HTTP/1.1", host: bytes = b"Host: x\r\n") -> bytes:
    return b"%s %s %s\r\n%s%s\r\n%s" % (method, target, version, host, headers, body)


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def cl(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n" % len(body)


_TE = b"Transfer-Encoding: chunked\r\n"
_B = b"0\r\n\r\n" + SMUGGLED  # a chunked end followed by a request: smuggled if the backend frames by TE

# name -> (raw bytes, statuses the router may answer). Every one of these must be refused before any
# byte reaches a backend, and the connection closed.
REJECT: dict[str, tuple[bytes, set[int]]] = {
    "connection-names-content-length": (request(b"Connection: Content-Length\r\n" + cl(SMUGGLED), SMUGGLED), {400}),
    "connection-names-transfer-encoding": (request(b"Connection: close, Transfer-Encoding\r\n" + _TE, chunked(SMUGGLED)), {400}),
    "connection-names-host": (request(b"Connection: Host\r\n" + cl(b"")), {400}),
    "bare-lf-in-header-value": (request(b"X-A: a\nTransfer-Encoding: chunked\r\n" + cl(_B), _B), {400}),
    "bare-lf-line-end": (request(b"X-A: a\n" + cl(b"")), {400}),
    "bare-cr-in-value": (request(b"X-A: a\rb\r\n" + cl(b"")), {400}),
    "nul-in-value": (request(b"X-A: a\x00b\r\n" + cl(b"")), {400}),
    "nul-in-target": (request(cl(b""), target=b"/v1/a\x00b"), {400}),
    "bare-lf-in-target": (request(cl(b""), target=b"/v1/a\nb"), {400}),
    "space-before-colon-te": (request(b"Transfer-Encoding : chunked\r\n" + cl(_B), _B), {400}),
    "space-before-colon-cl": (request(b"Content-Length : 5\r\n", b"hello"), {400}),
    "tab-before-colon": (request(b"Transfer-Encoding\t: chunked\r\n", chunked(b"hi")), {400}),
    "obs-fold": (request(b"X-A: a\r\n Transfer-Encoding: chunked\r\n" + cl(_B), _B), {400}),
    "obs-fold-te": (request(b"Transfer-Encoding:\r\n chunked\r\n" + cl(_B), _B), {400}),
    "cl-and-te": (request(_TE + cl(_B), _B), {400}),
    "te-and-cl": (request(cl(_B) + _TE, _B), {400}),
    "te-identity-chunked": (request(b"Transfer-Encoding: identity, chunked\r\n", chunked(b"hi")), {501}),
    "te-gzip": (request(b"Transfer-Encoding: gzip\r\n", b"xx"), {501}),
    "te-chunked-not-final": (request(b"Transfer-Encoding: chunked, gzip\r\n", chunked(b"hi")), {400, 501}),
    "te-chunked-twice": (request(_TE + _TE, chunked(b"hi")), {400}),
    "te-xchunked": (request(b"Transfer-Encoding: xchunked\r\n" + cl(_B), _B), {400, 501}),
    "te-chunked-quoted": (request(b'Transfer-Encoding: "chunked"\r\n' + cl(_B), _B), {400, 501}),
    "te-in-http10": (request(_TE + cl(_B), _B, version=b"HTTP/1.0"), {400}),
    "cl-plus-sign": (request(b"Content-Length: +5\r\n", b"hello"), {400}),
    "cl-list": (request(b"Content-Length: 5, 5\r\n", b"hello"), {400}),
    "cl-duplicate": (request(b"Content-Length: 5\r\nContent-Length: 5\r\n", b"hello"), {400}),
    "cl-conflicting": (request(b"Content-Length: 5\r\nContent-Length: 41\r\n", b"hello"), {400}),
    "cl-negative": (request(b"Content-Length: -1\r\n", b"hello"), {400}),
    "cl-hex": (request(b"Content-Length: 0x5\r\n", b"hello"), {400}),
    "two-hosts": (request(cl(b"") + b"Host: evil\r\n"), {400}),
    "no-host-http11": (request(cl(b""), host=b""), {400}),
    "empty-host-http11": (request(cl(b""), host=b"Host: \r\n"), {400}),
    "version-garbage": (request(cl(b""), version=b"HTTP/1.1garbage"), {400}),
    "version-http2": (request(cl(b""), version=b"HTTP/2.0"), {400, 505}),
    "version-http12": (request(cl(b""), version=b"HTTP/1.2"), {400, 505}),
    "version-lowercase": (request(cl(b""), version=b"http/1.1"), {400}),
    "double-space-request-line": (request(cl(b""), method=b"POST "), {400}),
    "absolute-form-target": (request(cl(b""), target=b"http://evil.example/v1/case"), {400}),
    "asterisk-target-on-post": (request(cl(b""), target=b"*"), {400}),
    "empty-header-name": (request(b": x\r\n" + cl(b"")), {400}),
    "header-name-with-slash": (request(b"X/A: x\r\n" + cl(b"")), {400}),
}
# Issue 26: tunnels and loop-backs are never forwarded (CONNECT made an h11 backend fail its
# connection; TRACE echoes the request, headers included, to whoever sent it).
REJECT["connect-origin-form"] = (request(cl(b""), method=b"CONNECT"), {405})
REJECT["connect-authority-form"] = (request(cl(b""), method=b"CONNECT", target=b"evil.example:443"), {405})
REJECT["trace"] = (request(cl(b""), method=b"TRACE"), {405})
REJECT["absolute-form-get"] = (request(b"", method=b"GET", target=b"http://127.0.0.1:1/v1/models"), {400})
REJECT["too-many-header-lines"] = (request(b"".join(b"X-H%d: v\r\n" % i for i in range(101)) + cl(b"")), {431})
REJECT["head-over-32-kib"] = (request(b"X-Big: " + b"a" * (33 * 1024) + b"\r\n" + cl(b"")), {431})
# PortSwigger Web Security Academy's TE.TE obfuscations (each beside a Content-Length that frames differently).
for _name, _te in {
    "xchunked": b"Transfer-Encoding: xchunked\r\n",
    "then-x": b"Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n",
    "then-chunked1": b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked1\r\n",
    "tab-value": b"Transfer-Encoding:\tchunked\r\n",
    "lf-before-colon": b"Transfer-Encoding\n: chunked\r\n",
    "vertical-tab": b"Transfer-Encoding: chunked\x0b\r\n",
    "case-mangled": b"tRaNsFeR-eNcOdInG: ChUnKeD\r\n",
    "gzip-chunked": b"Transfer-Encoding: gzip, chunked\r\n",
}.items():
    REJECT[f"te-obfuscated-{_name}-with-cl"] = (request(_te + cl(_B), _B), {400, 501})
REJECT["leading-space-first-header"] = (b"POST /v1/case HTTP/1.1\r\n Transfer-Encoding: chunked\r\nHost: x\r\n" + cl(_B) + b"\r\n" + _B, {400})
REJECT["te-gzip-chunked"] = (request(b"Transfer-Encoding: gzip, chunked\r\n", chunked(b"hi")), {501})
for _bad in (b"0x5", b"+5", b"-5", b"0_5", b" 5", b"5 ", b"", b"fffffffffffffffffffff", b"-6", b"5;\x00"):
    REJECT[f"request-chunk-size-{_bad.decode('latin-1').encode('unicode_escape').decode() or 'empty'}"] = (
        request(_TE, _bad + b"\r\nhello\r\n0\r\n\r\n"), {400})
REJECT["request-chunk-missing-crlf"] = (request(_TE, b"5\r\nhelloX\r\n0\r\n\r\n"), {400})
REJECT["request-chunk-bare-lf"] = (request(_TE, b"5\nhello\n0\n\n"), {400})
REJECT["request-chunk-trailer-bare-lf"] = (request(_TE, b"5\r\nhello\r\n0\r\nX-T: a\nTransfer-Encoding: chunked\r\n\r\n"), {400})


def read_responses(sock: socket.socket, quiet_s: float = 0.8, total_s: float = 6.0) -> tuple[list[tuple[int, dict, bytes]], bool]:
    """Read what the router answers: (responses, closed). Stops at close, or after `quiet_s` without bytes."""
    sock.settimeout(quiet_s)
    data = b""
    closed = False
    deadline = time.monotonic() + total_s
    while time.monotonic() < deadline:
        try:
            piece = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            closed = True
            break
        if not piece:
            closed = True
            break
        data += piece
    return split_responses(data), closed


def split_responses(data: bytes) -> list[tuple[int, dict, bytes]]:
    """Cut a byte stream of (well-formed, router-generated) responses into (status, headers, body)."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ")[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower().decode()] = value.strip().decode("latin-1")
        if status < 200:
            data = rest
            continue
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                body += rest[:size]
                rest = rest[size + 2:]
                if size == 0:
                    break
        else:
            n = int(headers.get("content-length", len(rest)))
            body, rest = rest[:n], rest[n:]
        out.append((status, headers, body))
        data = rest
    return out


async def _drain_chunked(reader: asyncio.StreamReader) -> int:
    """Read a chunked body and throw its data away; the number of data bytes."""
    total = 0
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass
            return total
        while size:
            got = await reader.read(min(size, 1 << 20))
            if not got:
                raise asyncio.IncompleteReadError(b"", size)
            size -= len(got)
            total += len(got)
        await reader.readexactly(2)


class ThreadServer:
    """An asyncio server on loopback run by a thread of the test process (`_serve`); `close` stops it."""

    port = 0

    def _serve(self, handle) -> None:
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self.loop)
            self.server = self.loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class RawBackend(ThreadServer):
    """Answers every request with `self.answer` (raw bytes in one write, or a list written 0.3 s apart)
    and keeps the connection open, so a router that pooled a broken connection would send the next
    request down it."""

    def __init__(self) -> None:
        self.answer = OK_HEAD + b"Content-Length: 2\r\n\r\nok"
        self.seen: list[tuple[str, int]] = []  # (path, connection id)
        self.conn_ids = 0
        self.body_bytes = 0  # size of the last request body (chunked bodies are read and discarded)

        async def handle(reader, writer):
            self.conn_ids += 1
            conn = self.conn_ids
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    lines = head.split(b"\r\n")
                    path = lines[0].split(b" ")[1].decode()
                    length = next((int(x.split(b":")[1]) for x in lines if x.lower().startswith(b"content-length:")), 0)
                    if b"transfer-encoding: chunked" in head.lower():
                        got = await _drain_chunked(reader)
                    else:
                        await reader.readexactly(length)
                        got = length
                    if path == "/health":
                        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                        continue
                    self.seen.append((path, conn))
                    self.body_bytes = got
                    pieces = self.answer if isinstance(self.answer, list) else [self.answer]
                    for i, piece in enumerate(pieces):
                        if i:
                            await asyncio.sleep(0.3)
                        writer.write(piece)
                        await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
                writer.transport.abort()

        self._serve(handle)


class JsonBackend(ThreadServer):
    """A llama-server-like backend on raw asyncio: a POST body that is not JSON is a 500 (llama-server
    answers its JSON parse error so), valid JSON is a 200 echoing the body's `id` (so a client can
    tell its own answer), GET /health is 200. Methods other than GET/POST are a 500 too. Counts what it
    received by method, in `methods`. With `stray`, every answer is followed (in a write of its own)
    by those bytes: a backend that breaks keep-alive framing after a complete response."""

    def __init__(self, name: str, stray: bytes = b"") -> None:
        self.name = name
        self.methods: dict[str, int] = {}

        async def handle(reader, writer):
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    lines = head.split(b"\r\n")
                    method, path = lines[0].split(b" ")[:2]
                    length = next((int(x.split(b":")[1]) for x in lines if x.lower().startswith(b"content-length:")), 0)
                    body = await reader.readexactly(length)
                    self.methods[method.decode()] = self.methods.get(method.decode(), 0) + 1
                    status, out = 200, b'{"backend":"%s"}' % name.encode()
                    if method == b"POST":
                        try:
                            out = json.dumps({"backend": name, "id": json.loads(body)["id"]}).encode()
                        except (ValueError, KeyError, TypeError):
                            status, out = 500, b'{"error":{"code":500,"message":"parse error","type":"server_error"}}'
                    elif method != b"GET" or path not in (b"/health", b"/v1/models"):
                        status = 500
                    writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (status, len(out), out))
                    if stray:
                        writer.write(stray)  # a send of its own, right after the answer's
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
                writer.transport.abort()

        self._serve(handle)
