"""Forwarding one request to a pod's engine on loopback and relaying its answer.

The forwarded head is rebuilt from the validated fields (the pool's `forward_fields`), with the
gateway's own Host, framing (`Content-Length` of the held body) and `Connection: close`: one engine
connection per request, so no answer can ever reach another client. The answer's head is parsed by the
pool's strict parser and its body relayed with the pool's checked framing (`http1`), chunk by chunk as
it arrives, so an SSE stream passes through byte-identical and unbuffered. An HTTP/1.0 client gets a
chunked answer de-chunked and close-delimited.
"""

from __future__ import annotations

import asyncio
import json

from backend.pool.admin import json_error
from backend.pool.heads import Head, HeadError, forward_fields
from backend.pool.http1 import read_response_head, relay_chunked, relay_dechunked, relay_eof, relay_length

UPSTREAM_DROP = frozenset({b"host", b"expect"})
READ_ERRORS = (asyncio.IncompleteReadError, ConnectionError, HeadError, OSError)


class ClientGone(Exception):
    """The client went away mid-answer."""


class Unreachable(Exception):
    """The pod refused the connection (or did not accept it in time): nothing was sent, so asking again is safe."""


def _sse_error(pod: str, chunked: bool) -> bytes:
    payload = json.dumps({"error": {"message": f"pod {pod} failed mid-stream; the response is incomplete", "type": "c3_backend_failed", "code": 502}})
    event = f"event: error\ndata: {payload}\n\n".encode()
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(event), event) if chunked else event


async def forward(req: Head, body: bytes, pod: str, port: int, writer: asyncio.StreamWriter, *, timeout_s: float, client_close: bool,
                  drop: frozenset[bytes] = UPSTREAM_DROP, extra: bytes = b"", raise_unreachable: bool = False) -> bool:
    """Send `req` with `body` to 127.0.0.1:`port` and relay the answer; True when the client connection may carry another.
    With `raise_unreachable`, a connection that fails raises `Unreachable` instead of answering 502."""
    try:
        up_r, up_w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout=10.0)
    except (OSError, TimeoutError) as exc:
        if raise_unreachable:
            raise Unreachable(type(exc).__name__) from exc
        writer.write(json_error(502, f"c3 gateway: cannot reach pod {pod} on port {port}: {type(exc).__name__}", "c3_backend_failed", close=client_close))
        return not client_close
    try:
        head = b"%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s%sContent-Length: %d\r\nConnection: close\r\n\r\n" % (
            req.a, req.b, port, forward_fields(req, drop), extra, len(body))
        up_w.write(head + body)
        try:
            resp = await asyncio.wait_for(read_response_head(up_r), timeout=timeout_s)
        except TimeoutError:
            writer.write(json_error(504, f"c3 gateway: pod {pod} sent no response head within {timeout_s:g}s", "c3_backend_timeout", close=True))
            return False
        except READ_ERRORS as exc:
            reason = exc.reason if isinstance(exc, HeadError) else f"closed before answering ({type(exc).__name__})"
            writer.write(json_error(502, f"c3 gateway: pod {pod}: {reason}", "c3_backend_failed", close=True))
            return False
        return await _relay(req, resp, pod, up_r, writer, client_close)
    finally:
        up_w.transport.abort()


async def _relay(req: Head, resp: Head, pod: str, up_r: asyncio.StreamReader, writer: asyncio.StreamWriter, client_close: bool) -> bool:
    status = int(resp.a)
    framing, length = ("none", 0) if req.a == b"HEAD" or status in (204, 304) else (resp.framing, resp.length)
    if framing == "none" and not (req.a == b"HEAD" or status in (204, 304)):
        framing = "eof"
    old_client = req.version == b"HTTP/1.0"
    dechunk = old_client and framing == "chunked"
    close = client_close or framing == "eof" or dechunk
    out = [b"HTTP/1.1 %s %s\r\n" % (resp.a, resp.b), forward_fields(resp), b"X-C3-Pod: %s\r\n" % pod.encode()]
    if framing == "chunked" and not dechunk:
        out.append(b"Transfer-Encoding: chunked\r\n")
    elif framing == "length":
        out.append(b"Content-Length: %d\r\n" % length)
    out.append(b"Connection: close\r\n" if close else (b"Connection: keep-alive\r\n" if old_client else b""))
    out.append(b"\r\n")
    prefix = b"".join(out)
    sent = False

    def write(data: bytes) -> None:
        nonlocal sent
        if writer.transport.is_closing():
            raise ClientGone
        writer.write(data)
        sent = True

    try:
        if framing == "none":
            write(prefix)
        elif dechunk:
            await relay_dechunked(up_r, write, writer.drain, prefix=prefix)
        elif framing == "chunked":
            await relay_chunked(up_r, write, writer.drain, prefix=prefix)
        else:
            write(prefix)
            if framing == "length":
                await relay_length(up_r, write, length, writer.drain)
            else:
                await relay_eof(up_r, write, writer.drain)
    except ClientGone:
        return False
    except READ_ERRORS:
        if writer.transport.is_closing():
            return False
        if not sent:
            writer.write(json_error(502, f"c3 gateway: pod {pod} failed while answering", "c3_backend_failed", close=True))
            return False
        if framing == "chunked" and resp.headers.get(b"content-type", b"").lower().startswith(b"text/event-stream"):
            writer.write(_sse_error(pod, chunked=not dechunk))  # ends the response cleanly: the client sees why
            return not close
        writer.transport.abort()  # an incomplete body must never look complete
        return False
    return not close
