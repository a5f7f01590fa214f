"""Just enough HTTP/1.1 for a pass-through proxy: parse heads, rewrite hop-by-hop headers, frame bodies.

Bodies are never decoded: chunked bodies are relayed chunk by chunk with their framing bytes intact
(the client receives exactly the bytes the backend sent), so SSE streams stay byte-identical and
unbuffered. Only the head is parsed, with `bytes.split`, which is several times faster than a general
parser (see `proxy.py` for the measurement).
"""

from __future__ import annotations

import asyncio

MAX_HEAD = 64 * 1024
HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer", b"upgrade"}
)
REASONS = {
    100: "Continue", 200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
    413: "Payload Too Large", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
    501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
}


class BadMessage(Exception):
    """A head or body that is not valid HTTP/1.1; the connection cannot be reused."""


class Head:
    """A parsed request or response head: first line, raw header lines and a lower-cased lookup."""

    __slots__ = ("first", "lines", "names", "headers", "a", "b", "version")

    def __init__(self, first: bytes, lines: list[bytes], headers: dict[bytes, bytes], a: bytes, b: bytes, version: bytes,
                 names: list[bytes] | None = None) -> None:
        self.first = first
        self.lines = lines  # raw "Name: value" lines, order and case kept
        self.names = names  # lower-cased name of each line (parsed once, reused when forwarding)
        self.headers = headers  # lower-cased name -> stripped value (last one wins; enough for framing)
        self.a = a  # method, or status code
        self.b = b  # target, or reason phrase
        self.version = version


def _parse(raw: bytes) -> tuple[bytes, list[bytes], dict[bytes, bytes], list[bytes]]:
    parts = raw[:-4].split(b"\r\n") if raw.endswith(b"\r\n\r\n") else raw.rstrip(b"\r\n").split(b"\r\n")
    first = parts[0]
    lines = parts[1:]
    headers: dict[bytes, bytes] = {}
    names: list[bytes] = []
    for line in lines:
        colon = line.find(b":")
        if colon <= 0 or line[0] in b" \t":
            raise BadMessage("malformed header line")
        name = line[:colon].strip().lower()
        names.append(name)
        value = line[colon + 1 :].strip()
        if name in headers and name in (b"content-length", b"transfer-encoding"):
            if name == b"content-length" and headers[name] != value:
                raise BadMessage("conflicting Content-Length")
            if name == b"transfer-encoding":
                value = headers[name] + b", " + value
        headers[name] = value
    return first, lines, headers, names


def parse_request(raw: bytes) -> Head:
    """Parse a request head (`raw` ends with CRLFCRLF)."""
    first, lines, headers, names = _parse(raw)
    pieces = first.split(b" ")
    if len(pieces) != 3 or not pieces[2].startswith(b"HTTP/1.") or not pieces[1]:
        raise BadMessage("malformed request line")
    return Head(first, lines, headers, pieces[0], pieces[1], pieces[2], names)


def parse_response(raw: bytes) -> Head:
    """Parse a response head."""
    first, lines, headers, names = _parse(raw)
    pieces = first.split(b" ", 2)
    if len(pieces) < 2 or not pieces[0].startswith(b"HTTP/1.") or not pieces[1].isdigit():
        raise BadMessage("malformed status line")
    return Head(first, lines, headers, pieces[1], pieces[2] if len(pieces) > 2 else b"", pieces[0], names)


def body_framing(headers: dict[bytes, bytes]) -> tuple[str, int]:
    """('chunked', 0), ('length', n) or ('none', 0) for a request; responses add ('eof', 0) themselves."""
    te = headers.get(b"transfer-encoding")
    if te is not None:
        if te.lower().rsplit(b",", 1)[-1].strip() != b"chunked":
            raise BadMessage("unsupported Transfer-Encoding")
        return "chunked", 0
    cl = headers.get(b"content-length")
    if cl is not None:
        if not cl.isdigit():
            raise BadMessage("bad Content-Length")
        return "length", int(cl)
    return "none", 0


def wants_close(head: Head) -> bool:
    """True when this message ends its connection (HTTP/1.0 without keep-alive, or `Connection: close`)."""
    conn = head.headers.get(b"connection", b"").lower()
    if head.version == b"HTTP/1.0":
        return b"keep-alive" not in conn
    return b"close" in conn


def connection_tokens(head: Head) -> set[bytes]:
    """Headers named in `Connection:` are hop-by-hop too (RFC 9110 §7.6.1)."""
    conn = head.headers.get(b"connection")
    if not conn:
        return set()
    return {t.strip().lower() for t in conn.split(b",") if t.strip()}


def forward_lines(head: Head, drop: frozenset[bytes] | set[bytes]) -> list[bytes]:
    """Header lines minus hop-by-hop ones and any in `drop` (lower-cased names)."""
    extra = connection_tokens(head)
    names = head.names
    if names is None:
        names = [line[: line.find(b":")].strip().lower() for line in head.lines]
    if extra:
        return [line for name, line in zip(names, head.lines, strict=True) if name not in HOP_BY_HOP and name not in drop and name not in extra]
    return [line for name, line in zip(names, head.lines, strict=True) if name not in HOP_BY_HOP and name not in drop]


def simple_response(status: int, body: bytes, content_type: bytes = b"application/json", extra: list[bytes] | None = None, close: bool = False) -> bytes:
    """A complete small response generated by the router itself."""
    lines = [
        b"HTTP/1.1 %d %s" % (status, REASONS.get(status, "Status").encode()),
        b"Content-Type: " + content_type,
        b"Content-Length: %d" % len(body),
    ]
    if extra:
        lines.extend(extra)
    if close:
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def read_head(reader: asyncio.StreamReader) -> bytes:
    """Read up to and including the blank line; IncompleteReadError on a clean EOF, BadMessage when too big."""
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError as exc:
        raise BadMessage("head too large") from exc


class ChunkScanner:
    """Follows chunked framing over arbitrary byte pieces without copying or re-encoding them.

    `feed(piece)` returns how many bytes of `piece` belong to the body (anything after the last chunk
    and trailers is not ours) and sets `boundary` to the offset just after the last complete chunk in
    `piece` (-1 when none ended in it). `done` turns True after the terminating chunk and trailers.
    """

    __slots__ = ("state", "need", "line", "done", "boundary")

    def __init__(self) -> None:
        self.state = 0  # 0 size line, 1 chunk data (+CRLF), 2 trailer lines
        self.need = 0
        self.line = b""
        self.done = False
        self.boundary = -1

    def feed(self, data: bytes) -> int:
        i, n = 0, len(data)
        self.boundary = -1
        while i < n and not self.done:
            if self.state == 1:
                take = self.need if self.need < n - i else n - i
                i += take
                self.need -= take
                if not self.need:
                    self.state = 0
                    self.boundary = i
                continue
            j = data.find(b"\n", i)
            if j < 0:
                self.line += data[i:]
                if len(self.line) > 8192:
                    raise BadMessage("chunk size line too long")
                return n
            line = self.line + data[i : j + 1] if self.line else data[i : j + 1]
            self.line = b""
            i = j + 1
            if self.state == 0:
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError as exc:
                    raise BadMessage("bad chunk size") from exc
                if size:
                    self.need = size + 2
                    self.state = 1
                else:
                    self.state = 2
            elif line in (b"\r\n", b"\n"):
                self.done = True
                self.boundary = i
        return i


HOLD_LIMIT = 64 * 1024


async def relay_chunked(src: asyncio.StreamReader, write, drain=None, prefix: bytes = b"") -> bool:
    """Copy one chunked body verbatim (framing included) as it arrives, ending after the trailers.

    Whatever bytes arrive are written at once, except the unfinished tail of a chunk, which is held
    back until the chunk completes (up to HOLD_LIMIT): then a failure midway leaves the client at a
    chunk boundary, where the proxy can still append an error event. `prefix` (the response head) goes
    out with the first bytes when they are already there. Returns True when the body ended exactly
    (nothing extra followed it, so the connection can be reused). Raises IncompleteReadError on EOF.
    """
    scanner = ChunkScanner()
    held = b""
    clean = True
    while not scanner.done:
        if prefix and not src._buffer:  # noqa: SLF001 - nothing buffered: send the head now, not later
            write(prefix)
            prefix = b""
        data = await src.read(256 * 1024)
        if not data:
            raise asyncio.IncompleteReadError(held, None)
        used = scanner.feed(data)
        if used < len(data):
            data = data[:used]
            clean = False
        cut = scanner.boundary
        if cut >= 0:
            out = held + data[:cut] if held else data[:cut]
            held = data[cut:]
        else:
            out = b""
            held += data
        if len(held) > HOLD_LIMIT:  # a huge chunk: stream it rather than buffer it
            out += held
            held = b""
        if prefix:
            out = prefix + out
            prefix = b""
        if out:
            write(out)
            if drain is not None:
                await drain()
    return clean


async def relay_chunked_exact(src: asyncio.StreamReader, write, drain=None) -> None:
    """Copy one chunked body verbatim, a chunk at a time, never reading past its end.

    For request bodies: a client may pipeline its next request right behind this one.
    """
    while True:
        line = await src.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise BadMessage("bad chunk size") from exc
        if size == 0:
            trailer = line
            while True:
                t = await src.readuntil(b"\r\n")
                trailer += t
                if t == b"\r\n":
                    break
            write(trailer)
            if drain is not None:
                await drain()
            return
        data = await src.readexactly(size + 2)
        if data[-2:] != b"\r\n":
            raise BadMessage("chunk not followed by CRLF")
        write(line + data)
        if drain is not None:
            await drain()


async def relay_length(src: asyncio.StreamReader, write, length: int, drain=None) -> None:
    """Copy exactly `length` body bytes, as they arrive."""
    remaining = length
    while remaining > 0:
        data = await src.read(min(remaining, 256 * 1024))
        if not data:
            raise asyncio.IncompleteReadError(b"", remaining)
        remaining -= len(data)
        write(data)
        if drain is not None:
            await drain()


async def relay_eof(src: asyncio.StreamReader, write, drain=None) -> None:
    """Copy a close-delimited body until the sender closes."""
    while True:
        data = await src.read(256 * 1024)
        if not data:
            return
        write(data)
        if drain is not None:
            await drain()


async def relay_dechunked(src: asyncio.StreamReader, write, drain=None, prefix: bytes = b"") -> bool:
    """Copy a chunked body's data without its framing, for an HTTP/1.0 client (which cannot parse
    chunked encoding; the response is then close-delimited). Each chunk's data goes out as it arrives,
    so SSE stays unbuffered. Never reads past the body; returns True (the connection stays reusable).
    """
    if prefix:
        write(prefix)
    try:
        while True:
            line = await src.readuntil(b"\r\n")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as exc:
                raise BadMessage("bad chunk size") from exc
            if size == 0:
                while await src.readuntil(b"\r\n") != b"\r\n":  # trailers: not forwarded to a 1.0 client
                    pass
                return True
            remaining = size
            while remaining:
                data = await src.read(min(remaining, 256 * 1024))
                if not data:
                    raise asyncio.IncompleteReadError(b"", remaining)
                remaining -= len(data)
                write(data)
            if await src.readexactly(2) != b"\r\n":
                raise BadMessage("chunk not followed by CRLF")
            if drain is not None:
                await drain()
    except asyncio.LimitOverrunError as exc:
        raise BadMessage("chunk size line too long") from exc
