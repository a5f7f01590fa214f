"""The gateway's HTTP front: the pool router's strict head parser and limits, then routing by `model`.

Heads are read and checked by the pool's own code (`http1.read_head`, `heads.parse_request`: llhttp
plus the pool's proxy rules, 431 past 100 lines or 32 KiB), so the gateway refuses exactly what the
pool refuses. A request body is held whole (the `model` field is in it), decoded strictly (`ChunkedBody`
for chunked bodies), at most `body_limit` bytes (then 413) and with `body_timeout_s` between pieces
(then 408); any answer given before the body was read to its end closes the connection.

Routes: `GET /v1/models` (every pod and every model name a pod serves, with the pod's state) and
`POST /v1/chat/completions`, `/v1/completions`, `/v1/embeddings` (forwarded to the pod `model`
names, which is started first when it is stopped: `slots.py`). Anything else is 404, in OpenAI's
error JSON like every answer the gateway gives itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time

from backend.gateway.config import GatewayConfig, GatewayPod, PodControl, route_names
from backend.gateway.relay import ClientGone, Unreachable, forward
from backend.gateway.slots import Busy, NotReady, Overloaded, Slot, Slots, SwapTimeout
from backend.pool.admin import json_error
from backend.pool.heads import ALLOWED, Head, HeadError, parse_request
from backend.pool.http1 import MAX_HEAD, READ_SIZE, BadMessage, ChunkedBody, read_head, simple_response
from backend.pool.listener import Listener

log = logging.getLogger("c3.gateway")

PROXIED = frozenset({b"/v1/chat/completions", b"/v1/completions", b"/v1/embeddings"})
NAMES_SHOWN = 8
"""Messages list at most this many names (DESIGN.md, hostile files: bounds)."""
RELOAD_EVERY_S = 1.0
"""An unknown model re-reads the estate file at most this often (a pod created since start is found)."""


class ClientReader(asyncio.StreamReader):
    """A client connection's reader that says when the client has gone (EOF or a reset), so a request held
    for a start or a swap is dropped when nobody waits for its answer any more."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit=limit)
        self.closed = asyncio.Event()

    def feed_eof(self) -> None:
        super().feed_eof()
        self.closed.set()

    def set_exception(self, exc: Exception) -> None:
        super().set_exception(exc)
        self.closed.set()


class TooLarge(Exception):
    """The request body is over `body_limit`."""


def names_line(names: list[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN]) or "none"
    more = len(names) - NAMES_SHOWN
    return shown + (f" (and {more} more: GET /v1/models)" if more > 0 else "")


class Gateway:
    """The listening socket and everything one request needs."""

    def __init__(self, config: GatewayConfig, control: PodControl) -> None:
        self.config = config
        self.control = control
        self.slots = Slots(config, control)
        self.by_name: dict[str, list[str]] = {}
        self.listener: Listener | None = None
        self.port = 0
        self.closing = False
        self.tasks: set[asyncio.Task[None]] = set()
        self._reloaded = 0.0
        self._key = config.api_key.get_secret_value().encode() if config.api_key is not None and config.api_key.get_secret_value() else None

    @property
    def auth_required(self) -> bool:
        """Every request needs the gateway's API key."""
        return self._key is not None

    # -- the estate ---------------------------------------------------------------------------------------

    async def reload(self) -> None:
        """Read the estate's pods and which of them run (in a thread: both block)."""
        pods = await asyncio.to_thread(self.control.pods)
        running = await asyncio.to_thread(self.control.running)
        # A sleep-mode pod may have been left asleep (by a gateway since stopped): a request forwarded to it would
        # wait inside the engine, so its state is asked instead of assumed (only where this gateway does not know it).
        unknown = [p.name for p in pods if p.sleep_mode and p.name in running
                   and (p.name not in self.slots.slots or self.slots.slots[p.name].state == "stopped")]
        asleep = {n for n in unknown if await asyncio.to_thread(self.control.sleeping, n)}
        self.slots.load(pods, running, asleep)
        self.by_name = route_names(pods)
        self._reloaded = time.monotonic()

    def resolve(self, model: str) -> Slot | None:
        """The pod `model` names: a pod's name, else a running pod serving it, else the first that does."""
        names = self.by_name.get(model)
        if not names:
            return None
        slots = [self.slots.slots[n] for n in names if n in self.slots.slots]
        if not slots:
            return None
        if slots[0].pod.name == model:
            return slots[0]
        return next((s for s in slots if s.state == "running"), slots[0])

    # -- listening ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.reload()
        self.listener = Listener(self.config.host, self.config.port, self._protocol)
        self.listener.start()
        self.port = self.listener.port

    def _protocol(self) -> asyncio.Protocol:
        return asyncio.StreamReaderProtocol(ClientReader(limit=MAX_HEAD), self._client)

    async def close(self) -> None:
        self.closing = True
        if self.listener is not None:
            self.listener.close()
        for task in list(self.tasks):
            task.cancel()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        try:
            while not self.closing:
                try:
                    raw = await asyncio.wait_for(read_head(reader), self.config.idle_timeout_s)
                except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                    break
                except HeadError as exc:
                    writer.write(json_error(exc.status, f"malformed request: {exc.reason}", "invalid_request_error", close=True))
                    break
                try:
                    req = parse_request(raw)
                except HeadError as exc:
                    kind = "malformed request" if exc.status != 405 else "method not allowed"
                    writer.write(json_error(exc.status, f"{kind}: {exc.reason}", "invalid_request_error", close=True,
                                            extra=[ALLOWED] if exc.status == 405 else None))
                    break
                try:
                    keep = await self.handle(req, reader, writer)
                except BadMessage as exc:
                    writer.write(json_error(exc.status, f"malformed request body: {exc.reason}", "invalid_request_error", close=True))
                    keep = False
                except (ClientGone, asyncio.IncompleteReadError, ConnectionError):
                    keep = False
                except Exception:  # one bad request must not take the gateway down
                    log.exception("internal error while serving %s", req.b[:200].decode("latin-1"))
                    writer.write(json_error(500, "internal gateway error", "c3_gateway_error", close=True))
                    keep = False
                try:
                    await writer.drain()
                except ConnectionError:
                    break
                if not keep:
                    break
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()
            if task is not None:
                self.tasks.discard(task)

    # -- one request --------------------------------------------------------------------------------------

    async def handle(self, req: Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; True when the connection may carry another."""
        unread = req.framing != "none" and not (req.framing == "length" and req.length == 0)
        client_close = not req.keep_alive or self.closing

        def answer(status: int, message: str, kind: str, extra: list[bytes] | None = None, read: bool = False) -> bool:
            close = client_close or (unread and not read)
            writer.write(json_error(status, message, kind, close=close, extra=extra))
            return not close

        if self._key is not None and not self._authorized(req):
            return answer(401, "c3 gateway: this endpoint needs `Authorization: Bearer KEY` (the gateway's API key)", "authentication_error",
                          [b"WWW-Authenticate: Bearer"])
        path = req.b.partition(b"?")[0]
        if path == b"/v1/models":
            if req.a not in (b"GET", b"HEAD"):
                return answer(405, "GET /v1/models", "invalid_request_error", [b"Allow: GET, HEAD"])
            body = json.dumps(await self.models()).encode()
            writer.write(simple_response(200, b"" if req.a == b"HEAD" else body, close=client_close or unread))
            return not (client_close or unread)
        if path not in PROXIED:
            return answer(404, f"c3 gateway: no route {path[:200].decode('latin-1')} (try /v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings)",
                          "invalid_request_error")
        if req.a != b"POST":
            return answer(405, f"{path.decode('latin-1')} takes POST", "invalid_request_error", [b"Allow: POST"])
        if req.version == b"HTTP/1.1" and unread and req.headers.get(b"expect", b"").lower() == b"100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            body = await self.read_body(req, reader)
        except TooLarge:
            return answer(413, f"c3 gateway: request body over {self.config.body_limit} bytes", "invalid_request_error")
        except TimeoutError:
            return answer(408, f"c3 gateway: request body stalled for {self.config.body_timeout_s:g}s", "invalid_request_error")
        model = _model_of(body)
        if isinstance(model, Exception):
            return answer(400, f"c3 gateway: {model}", "invalid_request_error", read=True)
        slot = self.resolve(model)
        if slot is None and time.monotonic() - self._reloaded > RELOAD_EVERY_S:
            await self.reload()
            slot = self.resolve(model)
        if slot is None:
            known = list(self.by_name)
            return answer(404, f"c3 gateway: no pod serves model `{model[:200]}`; known: {names_line(known)}", "invalid_request_error", read=True)
        if slot.pod.serves and model not in slot.pod.serves:
            body = _renamed(body, slot.pod.serves[0])  # named by pod or slug: the engine knows its own name only
        for last in (False, True):
            try:
                if not await self._ready_unless_gone(slot, reader):
                    return False  # the client left while its request was held: nothing to answer
            except Overloaded as exc:
                if exc.held:
                    return answer(503, f"c3 gateway: pod {slot.pod.name} waits for its GPUs and {slot.waiting} request(s) are already held for it "
                                       f"(--queue {self.config.queue_limit})", "c3_queue_full", [b"Retry-After: 5"], read=True)
                return answer(429, f"c3 gateway: pod {slot.pod.name} is starting and {self.config.queue_limit} requests already wait for it",
                              "rate_limit_error", [b"Retry-After: 5"], read=True)
            except SwapTimeout as exc:
                return answer(503, f"c3 gateway: {exc.message}", "c3_swap_timeout", [b"Retry-After: %d" % exc.retry_after_s], read=True)
            except Busy as exc:
                return answer(429, f"c3 gateway: {exc.message}", "rate_limit_error", [b"Retry-After: %d" % exc.retry_after_s], read=True)
            except NotReady as exc:
                return answer(503, f"c3 gateway: {exc.message}", "c3_not_ready", [b"Retry-After: 10"], read=True)
            try:
                return await self._forward(slot, req, body, writer, client_close, raise_unreachable=not last)
            except Unreachable:
                # Refused before a byte was sent: the pod stopped since it was last seen running (`c3 pod down`
                # from a shell, or it died). Ask the runtime again, boot it if it is stopped, and send once more.
                log.info("pod %s refused a connection while thought running: asking the runtime again", slot.pod.name)
                self.slots.forget_running(slot)
        raise AssertionError("unreachable: the last attempt answers 502 itself")

    async def _forward(self, slot: Slot, req: Head, body: bytes, writer: asyncio.StreamWriter, client_close: bool, *, raise_unreachable: bool = False) -> bool:
        drop = {b"host", b"expect"}
        extra = b""
        if self._key is not None:  # the client's credential is the gateway's; the engine gets its own, if c3 has one
            drop.add(b"authorization")
            engine = self.config.engine_key.get_secret_value() if self.config.engine_key is not None else ""
            if engine:
                extra = b"Authorization: Bearer " + engine.encode("latin-1") + b"\r\n"
        slot.in_flight += 1
        self.slots.used(slot)
        try:
            return await forward(req, body, slot.pod.name, slot.pod.port, writer, timeout_s=self.config.upstream_timeout_s,
                                 client_close=client_close, drop=frozenset(drop), extra=extra, raise_unreachable=raise_unreachable)
        finally:
            slot.in_flight -= 1
            self.slots.used(slot)

    async def _ready_unless_gone(self, slot: Slot, reader: asyncio.StreamReader) -> bool:
        """`slots.ready(slot)`, given up when the client disconnects meanwhile (its place in the queue is freed,
        and a swap nobody waits for any more is not started); False when it left. A running pod is not watched:
        its request is forwarded at once, and a client that only half-closed still gets its answer."""
        gone = reader.closed if isinstance(reader, ClientReader) else None
        if gone is None or slot.state == "running":
            await self.slots.ready(slot)
            return True
        ready = asyncio.ensure_future(self.slots.ready(slot))
        watch = asyncio.ensure_future(gone.wait())
        try:
            await asyncio.wait((ready, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not ready.done():
                ready.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await ready
        if ready.cancelled():
            log.info("a client left while its request for pod %s was held", slot.pod.name)
            return False
        ready.result()
        return True

    def _authorized(self, req: Head) -> bool:
        assert self._key is not None
        scheme, _, given = req.headers.get(b"authorization", b"").partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._key)

    async def read_body(self, req: Head, reader: asyncio.StreamReader) -> bytes:
        """The whole request body, bounded and on a deadline (see the module doc)."""
        limit, wait = self.config.body_limit, self.config.body_timeout_s
        if req.framing == "none":
            return b""
        if req.framing == "length":
            if req.length > limit:
                raise TooLarge
            parts: list[bytes] = []
            left = req.length
            while left > 0:
                data = await asyncio.wait_for(reader.read(min(left, READ_SIZE)), wait)
                if not data:
                    raise asyncio.IncompleteReadError(b"", left)
                parts.append(data)
                left -= len(data)
            return b"".join(parts)
        chunks = ChunkedBody(reader)
        held: list[bytes] = []
        while piece := await asyncio.wait_for(chunks.piece(), wait):
            held.append(piece)
            if chunks.size > limit:
                raise TooLarge
        return b"".join(held)

    async def models(self) -> dict[str, object]:
        """`GET /v1/models`: every pod by name, then every model name, each with its pod's state."""
        if time.monotonic() - self._reloaded > RELOAD_EVERY_S:
            await self.reload()
        else:
            await self.slots.refresh_running()
        data: list[dict[str, object]] = []
        for name, pods in self.by_name.items():
            slot = self.resolve(name)
            if slot is None:
                continue
            kind = "pod" if slot.pod.name == name else "model"
            data.append({"id": name, "object": "model", "created": 0, "owned_by": "c3",
                         "c3": {"kind": kind, "pod": slot.pod.name, "pods": pods if kind == "model" else [name], "slug": slot.pod.slug,
                                "state": slot.state}})
        return {"object": "list", "data": data}


def _renamed(body: bytes, model: str) -> bytes:
    doc = json.loads(body)
    doc["model"] = model
    return json.dumps(doc).encode()


def _model_of(body: bytes) -> str | ValueError:
    """The request's `model`, or why there is none (bad JSON, not an object, missing, not a string)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return ValueError("the request body is not JSON")
    if not isinstance(doc, dict):
        return ValueError("the request body is not a JSON object")
    model = doc.get("model")
    if not isinstance(model, str) or not model:
        return ValueError("the request has no `model` (a pod's name or a model a pod serves; see GET /v1/models)")
    return model


__all__ = ["Gateway", "GatewayPod"]
