"""A client's request body as the router takes it in: read (and decoded) strictly, bounded, on a deadline.

The router never forwards a client's body framing: a body it holds whole is sent with its own
`Content-Length`; a larger one is streamed and re-chunked from the decoded data. So the backend frames
the body exactly as the router did, whatever the client's bytes said.

- `Content-Length` up to `retry_body_limit`: read whole (it can be retried on another backend);
- chunked: decoded until it ends or passes `retry_body_limit`; a body that ended is held whole and
  sent with `Content-Length`, a longer one is streamed as `Transfer-Encoding: chunked`;
- larger `Content-Length`: streamed as it arrives.

All held bodies together stay under one cap (`budget.HeldBytes`, `--max-buffered-bytes`): a body that
would pass it streams as if it were over `retry_body_limit`. A body being read is charged twice its
size (its pieces and the joined copy live together for a moment: with one charge, 48 uploads of 8 MB
grew the router by 108 MiB under a 64 MiB cap), then once. Whoever took the body calls
`Body.release()` once it can no longer be retried (the reservation and the bytes go).

Every read waits at most `body_timeout_s` for the next bytes, and the whole body at most
`max_body_s` (a slow but steady upload is fine; a trickle cannot hold a connection for ever). The
reaper in `proxy.py` enforces the deadline in `proto.body_deadline` (no timer is armed per read); then
the client gets 408 and the connection closes.
"""

from __future__ import annotations

import asyncio
import time

from backend.pool.budget import HeldBytes
from backend.pool.client import Client
from backend.pool.heads import Head
from backend.pool.http1 import READ_SIZE, ChunkedBody


class Body:
    """The request body: what is held, and what is still to come from the client."""

    __slots__ = ("framing", "data", "length", "streamed", "done", "chunks", "budget", "reserved")

    def __init__(self, framing: str, length: int = 0) -> None:
        self.framing = framing  # "none", "length" (data holds it, or it streams) or "chunked" (streams)
        self.data = b""  # held bytes (the whole body unless streamed)
        self.length = length  # Content-Length to send upstream (length framing)
        self.streamed = False
        self.done = framing == "none"  # read to its end
        self.chunks: ChunkedBody | None = None
        self.budget: HeldBytes | None = None  # where `reserved` bytes were taken from
        self.reserved = 0

    def hold(self, n: int) -> bool:
        """Reserve `n` more held bytes; False when the aggregate cap would pass (then stream)."""
        if self.budget is None:
            return True
        if not self.budget.take(n):
            self.budget.spilled += 1
            return False
        self.reserved += n
        return True

    def joined(self) -> None:
        """The pieces were joined into `data`: only the joined copy is held now (half the read charge)."""
        if self.budget is not None:
            half = self.reserved // 2
            self.budget.give(half)
            self.reserved -= half

    def release(self) -> None:
        """Drop what is held (the body can no longer be retried) and return its reservation."""
        if not self.streamed:
            self.data = b""
        if self.budget is not None and self.reserved:
            self.budget.give(self.reserved)
        self.reserved = 0

    def framing_header(self) -> bytes:
        """The framing line the router sends upstream (its own, never the client's)."""
        if self.framing == "chunked":
            return b"Transfer-Encoding: chunked\r\n"
        if self.framing == "length":
            return b"Content-Length: %d\r\n" % self.length
        return b""


def _bump(proto: Client, timeout_s: float) -> None:
    proto.body_deadline = min(time.monotonic() + timeout_s, proto.body_cap)


async def take_body(proto: Client, req: Head, reader: asyncio.StreamReader, limit: int, timeout_s: float, max_body_s: float,
                    *, budget: HeldBytes | None = None) -> Body:
    """Read what the router holds of the body before choosing a backend (see the module doc).

    With `budget`, held bytes are reserved there; the caller must `release()` the body."""
    if req.framing == "none":
        return Body("none")
    proto.body_cap = time.monotonic() + max_body_s
    if req.framing == "length":
        body = Body("length", req.length)
        body.budget = budget
        if req.length > limit or not body.hold(2 * req.length):
            body.streamed = True
            return body
        if req.length:
            pieces: list[bytes] = []
            left = req.length
            try:
                while left:  # the deadline is between reads, not for the whole body
                    _bump(proto, timeout_s)
                    data = await reader.read(left)
                    if not data:
                        raise asyncio.IncompleteReadError(b"".join(pieces), req.length)
                    pieces.append(data)
                    left -= len(data)
            except BaseException:
                body.release()
                raise
            finally:
                proto.body_deadline = 0.0
            body.data = b"".join(pieces)
            del pieces
            body.joined()
        body.done = True
        return body
    chunks = ChunkedBody(reader)
    held: list[bytes] = []
    body = Body("chunked")
    body.budget = budget
    try:
        while True:
            _bump(proto, timeout_s)
            piece = await chunks.piece()
            if not piece:
                break
            held.append(piece)
            if chunks.size > limit or not body.hold(2 * len(piece)):
                body.data, body.streamed, body.chunks = b"".join(held), True, chunks
                body.joined()
                return body
    except BaseException:
        body.release()
        raise
    finally:
        proto.body_deadline = 0.0
    data = b"".join(held)
    del held
    body.joined()
    body.framing, body.length, body.data, body.done = "length", len(data), data, True
    return body


async def send_rest(proto: Client, body: Body, reader: asyncio.StreamReader, up_w: asyncio.StreamWriter, timeout_s: float) -> None:
    """Stream the part of a body that was not held to the backend (after the head and held bytes)."""
    try:
        if body.framing == "chunked":
            assert body.chunks is not None
            if body.data:
                up_w.write(b"%x\r\n%s\r\n" % (len(body.data), body.data))
            while True:
                _bump(proto, timeout_s)
                piece = await body.chunks.piece()
                if not piece:
                    break
                up_w.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await up_w.drain()
            up_w.write(b"0\r\n\r\n")
        else:
            remaining = body.length - len(body.data)
            if body.data:
                up_w.write(body.data)
            while remaining > 0:
                _bump(proto, timeout_s)
                data = await reader.read(min(remaining, READ_SIZE))
                if not data:
                    raise asyncio.IncompleteReadError(b"", remaining)
                remaining -= len(data)
                up_w.write(data)
                await up_w.drain()
        body.done = True
    finally:
        proto.body_deadline = 0.0
