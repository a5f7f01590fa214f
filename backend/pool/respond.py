"""Relaying a backend's answer to the client once the proxy has committed to it (see `proxy.py`).

Bodies go through as raw bytes: chunked framing verbatim (SSE byte-identical and unbuffered), or
de-chunked and close-delimited for an HTTP/1.0 client, which cannot parse chunked encoding.
"""

from __future__ import annotations

import asyncio
import json
import logging
from functools import partial
from typing import cast

from backend.pool.admin import json_error
from backend.pool.client import Client, Server
from backend.pool.heads import Head, HeadError, forward_fields
from backend.pool.http1 import (
    read_response_head,
    relay_chunked,
    relay_dechunked,
    relay_eof,
    relay_length,
)
from backend.pool.upstream import Backend

log = logging.getLogger("c3.pool")

SMALL_BODY = 64 * 1024
READ_ERRORS = (asyncio.IncompleteReadError, ConnectionError, HeadError, OSError)
__all__ = ["READ_ERRORS", "ClientGone", "read_response_head", "relay_response"]


class ClientGone(Exception):
    """The client closed its connection."""


def sse_error(backend: str, chunked: bool = True, why: str = "failed mid-stream", kind: str = "c3_backend_failed", code: int = 502) -> bytes:
    payload = json.dumps({"error": {"message": f"backend {backend} {why}; the response is incomplete", "type": kind, "code": code}})
    event = f"event: error\ndata: {payload}\n\n".encode()
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event) if chunked else event



async def relay_response(server: Server, proto: Client, req: Head, resp: Head, b: Backend, sticky: str, source_b: bytes,
                         up_r: asyncio.StreamReader, up_w: asyncio.StreamWriter, writer: asyncio.StreamWriter, client_close: bool) -> bool:
    """Forward the response head (plus the X-C3-* headers; `X-C3-Sticky` only when `sticky` is not
    empty) and relay the body to the client.

    True when the client connection may carry another request. A backend failing midway: an SSE
    stream ends with an `event: error`; any other body is cut off (the client connection closes).

    Deadlines (`proto.watch`, enforced by the reaper): the first body bytes may take the head timeout
    (a stream's head comes at once, its first token after prefill), each later gap `stream_timeout_s`
    (a stall: the client connection closes after an SSE error event, and it counts against the
    backend), a client not taking bytes `write_timeout_s` (dropped, the backend request closed), and
    the whole response `max_response_time_s` (cut like a stall, but not counted against the backend).
    """
    status = int(resp.a)
    if req.a == b"HEAD" or status in (204, 304):
        framing, length = "none", 0
    else:
        framing, length = resp.framing, resp.length
        if framing == "none":
            framing = "eof"
    close = client_close or framing == "eof" or server.closing
    reusable = framing != "eof" and resp.keep_alive
    old_client = req.version == b"HTTP/1.0"
    dechunk = old_client and framing == "chunked"  # HTTP/1.0 has no chunked encoding: close-delimit instead
    if dechunk:
        close = True
    # Re-serialized from the validated head: the backend's framing and connection headers are replaced
    # by the router's own (the body keeps the framing the router checked).
    out = [b"HTTP/1.1 %s %s\r\n" % (resp.a, resp.b), forward_fields(resp)]
    if framing == "chunked" and not dechunk:
        out.append(b"Transfer-Encoding: chunked\r\n")
    elif framing == "length":
        out.append(b"Content-Length: %d\r\n" % length)
    elif framing == "none" and resp.framing == "length":
        out.append(b"Content-Length: %d\r\n" % resp.length)  # HEAD/304: the length the GET would have
    out.append(b"X-C3-Backend: %s\r\nX-C3-Key-Source: %s\r\n" % (b.name.encode(), source_b))
    if sticky:  # only for the admin token (see `admin.shows_sticky`)
        out.append(b"X-C3-Sticky: %s\r\n" % sticky.encode())
    if close:
        out.append(b"Connection: close\r\n")
    elif old_client:
        out.append(b"Connection: keep-alive\r\n")  # a 1.0 client assumes close unless told otherwise
    out.append(b"\r\n")
    out_head = b"".join(out)

    head_sent = False
    client_write = writer.transport.write  # what StreamWriter.write calls, one Python frame less per chunk

    def write(data: bytes) -> None:
        nonlocal head_sent
        if proto.lost:
            raise ClientGone
        client_write(data)
        head_sent = True

    cfg = server.config
    watch, up_t, client_t = proto.watch, up_w.transport, writer.transport
    stream_s, write_s = cfg.stream_timeout_s, cfg.write_timeout_s
    progress = partial(watch.arm, "stream", stream_s, up_t)  # called per chunk: no wrapper frame

    async def drain() -> None:
        watch.arm("write", write_s, client_t)
        await writer.drain()
        watch.arm("stream", stream_s, up_t)

    watch.arm("stream", cfg.upstream_timeout_s, up_t)  # the first body bytes may wait for prefill
    proto.on_lost = up_w.transport.abort
    try:
        if framing == "none":
            write(out_head)
        elif framing == "length" and length <= SMALL_BODY:
            body = await up_r.readexactly(length) if length else b""
            write(out_head + body)
        elif dechunk:
            reusable = await relay_dechunked(up_r, write, drain, prefix=out_head, progress=progress) and reusable
        elif framing == "chunked":
            reusable = await relay_chunked(up_r, write, drain, prefix=out_head, transport=cast(asyncio.Transport, up_w.transport),
                                           client_buffer=writer.transport.get_write_buffer_size, progress=progress) and reusable
        else:
            write(out_head)
            if framing == "length":
                await relay_length(up_r, write, length, drain, progress)
            else:
                await relay_eof(up_r, write, drain, progress)
        if watch.expired:  # a close-delimited body cut by a deadline must not look complete
            raise ConnectionAbortedError
    except (ClientGone, *READ_ERRORS):
        watch.disarm()
        up_w.transport.abort()
        proto.on_lost = None
        if proto.lost:
            server.router.metrics.client_disconnects += 1
            raise ClientGone from None
        return _cut(server, proto, resp, b, writer, head_sent, dechunk, framing, close)
    watch.disarm()
    proto.on_lost = None
    if reusable:
        b.put_idle(up_r, up_w)
    else:
        up_w.transport.abort()
    return not close


def _cut(server: Server, proto: Client, resp: Head, b: Backend, writer: asyncio.StreamWriter, head_sent: bool, dechunk: bool,
         framing: str, close: bool) -> bool:
    """The backend's answer ended early (it failed, stalled, or the response ran past its cap): tell the
    client what can still be told; True when its connection may carry another request."""
    cfg = server.config
    expired = proto.watch.expired
    if expired == "total":
        why, kind, code = f"ran past --max-response-time ({cfg.max_response_time_s:g}s)", "c3_response_timeout", 504
        log.warning("a response from backend %s ran past --max-response-time (%gs); client connection closed", b.name, cfg.max_response_time_s)
    elif expired == "stream":
        limit = cfg.stream_timeout_s if head_sent else cfg.upstream_timeout_s
        why, kind, code = f"stalled: no bytes for {limit:g}s", "c3_backend_timeout", 504
        b.metrics.stalls += 1
        server.router.passive_failure(b, f"stream stalled: no bytes for {limit:g}s", hard=False)
        log.warning("backend %s stalled mid-response (no bytes for %gs); client connection closed", b.name, limit)
    else:
        why, kind, code = "failed mid-stream", "c3_backend_failed", 502
        server.router.passive_failure(b, "response cut off mid-body", hard=False)
    if not head_sent:  # the client has seen nothing yet: a plain error answer is still possible
        writer.write(json_error(code, f"c3 pool: backend {b.name} {why.replace('mid-stream', 'while answering')}", kind, close=True))
        return False
    if expired != "total":
        server.router.metrics.midstream_failures += 1
    if framing == "chunked" and resp.headers.get(b"content-type", b"").lower().startswith(b"text/event-stream"):
        # The error event and the last chunk end the response cleanly. After a backend's own failure
        # the client connection stays usable (closing it now would race the client's next request on
        # it); after a deadline it closes, as the timeout says.
        writer.write(sse_error(b.name, chunked=not dechunk, why=why, kind=kind, code=code))
        if not expired:
            log.warning("backend %s cut off a stream; the client got an error event", b.name)
        return not close and not expired
    if not expired:
        log.warning("backend %s cut off a response mid-body; client connection closed", b.name)
    if proto.transport is not None:
        proto.transport.abort()  # an incomplete body must never look complete
    return False
