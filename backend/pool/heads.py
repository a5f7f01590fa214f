"""Strict HTTP/1.1 heads for the router: parsed by llhttp (through `httptools`, the parser Node.js,
uvicorn and aiohttp use), checked against what a proxy must refuse, and re-serialized from the
validated fields — a raw line from a client or a backend is never forwarded.

Why this matters: the router pools upstream connections across clients, so any head the router frames
one way and a backend another lets one client place a request (or another client's answer) on a
shared connection. RFC 9112 rules enforced here on top of llhttp's own (which already refuses bare
CR/LF, NUL, whitespace before the colon, obs-fold, CL with TE, duplicate or signed Content-Length and
malformed versions):

- requests: no CONNECT or TRACE (405), exactly one non-empty `Host` on HTTP/1.1 (at most one on 1.0),
  an origin-form target (`/…`: absolute and authority forms are refused), single spaces in the request line, version 1.0 or 1.1, no Transfer-Encoding on 1.0;
- Transfer-Encoding must be exactly `chunked`: an unknown coding is 501 (RFC 9112 §6.1), anything
  else (chunked twice or not final) is 400;
- a framing header (`Content-Length`, `Transfer-Encoding`, `Host`) named in `Connection:` is refused:
  dropping it as hop-by-hop would leave body bytes without framing;
- at most `MAX_HEADERS` header lines.

Cost: ~8 µs per 16-header head including these checks, ~11 µs with the forwarded head rebuilt
(`bench/heads.py`; the split parser it replaced took ~5.5 µs / ~8.7 µs; h11 ~26 µs).
"""

from __future__ import annotations

import httptools

MAX_HEADERS = 100
HOP_BY_HOP = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authenticate", b"proxy-authorization", b"te", b"trailer",
     b"upgrade", b"transfer-encoding", b"content-length"}
)
"""Never copied from one side to the other: the router writes its own framing and connection headers."""
FRAMING = frozenset({b"content-length", b"transfer-encoding", b"host"})
REFUSED_METHODS = frozenset({b"CONNECT", b"TRACE"})
"""Never forwarded (405): CONNECT asks for a tunnel (an h11 backend fails the connection over it), TRACE
echoes the request back, headers and all. Neither is part of an OpenAI API."""
ALLOWED = b"Allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
"""The `Allow` line a 405 for a refused method carries (RFC 9110 §15.5.6)."""


class HeadError(Exception):
    """A head the router refuses; `status` is what the client gets (400, 431, 501, or 502 for a backend's)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Head:
    """A validated request or response head.

    `a`/`b` are method and target (request) or status code and reason (response); `fields` keeps
    every header as (lower-cased name, name, value) in order; `headers` maps a lower-cased name to its
    value (comma-joined when repeated) for lookups.
    """

    __slots__ = ("a", "b", "version", "fields", "headers", "keep_alive", "framing", "length", "connection")

    def __init__(self) -> None:
        self.a = b""
        self.b = b""
        self.version = b"HTTP/1.1"
        self.fields: list[tuple[bytes, bytes, bytes]] = []
        self.headers: dict[bytes, bytes] = {}
        self.keep_alive = True
        self.framing = "none"  # "none", "length", "chunked" ("eof" is decided by the response relay)
        self.length = 0
        self.connection: frozenset[bytes] | None = None
        """The `Connection:` tokens once the parse checked them (None: not parsed here, work them out)."""


class _Collect:
    """httptools callbacks: collect the target/reason and the raw header pairs.

    A callback only appends; the pairs are lower-cased, stripped and indexed in one loop afterwards
    (`_index`): per-header work inside a callback cost ~1 µs a header more (issue 26, router CPU)."""

    __slots__ = ("target", "pairs", "parser", "version", "method", "status", "keep_alive", "request")

    def __init__(self, request: bool) -> None:
        self.target = b""
        self.pairs: list[tuple[bytes, bytes]] = []
        self.parser: httptools.HttpRequestParser | httptools.HttpResponseParser | None = None
        self.version = ""
        self.method = b""
        self.status = 0
        self.keep_alive = True
        self.request = request

    def on_headers_complete(self) -> None:
        # Read here: llhttp resets its state once a message without a body completes.
        parser = self.parser
        assert parser is not None  # set before the first feed
        self.keep_alive = parser.should_keep_alive()
        self.version = parser.get_http_version()
        if self.request:
            self.method = parser.get_method()  # type: ignore[union-attr]  # a request parser
        else:
            self.status = parser.get_status_code()  # type: ignore[union-attr]  # a response parser

    def on_url(self, url: bytes) -> None:
        self.target += url

    def on_status(self, reason: bytes) -> None:
        self.target += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        pairs = self.pairs
        if len(pairs) >= MAX_HEADERS:
            raise HeadError(431, f"more than {MAX_HEADERS} header lines")
        pairs.append((name, value))


def _index(head: Head, pairs: list[tuple[bytes, bytes]]) -> int:
    """Fill `head.fields` and `head.headers` from the raw pairs; the number of `Host` lines."""
    fields, headers, hosts = head.fields, head.headers, 0
    for name, value in pairs:
        lname = name.lower()
        value = value.strip(b" \t")
        fields.append((lname, name, value))
        if lname in headers:
            headers[lname] += b", " + value
        else:
            headers[lname] = value
        if lname == b"host":
            hosts += 1
    return hosts


def _feed(collect: _Collect, head: Head, raw: bytes, status: int, status_unknown: int) -> int:
    """Run llhttp over `raw` and index the headers; the number of `Host` lines (HeadError on a bad head)."""
    parser = collect.parser
    assert parser is not None
    try:
        parser.feed_data(raw)
    except httptools.HttpParserUpgrade:
        pass  # Upgrade/CONNECT: the head is complete; the router never upgrades (Upgrade is hop-by-hop)
    except httptools.HttpParserError as exc:
        cause = exc.__context__
        if isinstance(cause, HeadError):
            raise cause from None
        _index(head, collect.pairs)
        if b"transfer-encoding" in head.headers and b"content-length" not in head.headers:
            _codings(head, status_unknown, status)  # an unknown coding is 501, not llhttp's generic error
        raise HeadError(status, str(exc) or type(exc).__name__) from None
    finally:
        # The parser holds the collector's bound methods and the collector the parser: without this
        # cut, each head left a reference cycle of ~20 objects for the garbage collector (its gen-0
        # passes were ~5 % of the router's CPU under load).
        collect.parser = None
    head.b = collect.target
    head.keep_alive = collect.keep_alive
    return _index(head, collect.pairs)


def _codings(head: Head, status_unknown: int, status_bad: int) -> None:
    te = head.headers.get(b"transfer-encoding")
    if te is None:
        cl = head.headers.get(b"content-length")
        if cl is not None:
            head.framing, head.length = "length", int(cl)  # llhttp checked: digits only, one value
        return
    if te == b"chunked":  # the common case, decided as the general rule below would
        head.framing = "chunked"
        return
    codings = [c.strip().lower() for c in te.split(b",")]
    if codings == [b"chunked"]:
        head.framing = "chunked"
        return
    if any(c != b"chunked" for c in codings):
        raise HeadError(status_unknown, "unsupported Transfer-Encoding (only `chunked` is accepted)")
    raise HeadError(status_bad, "Transfer-Encoding must name `chunked` once, last")


_COMMON_CONNECTION = {b"keep-alive": frozenset({b"keep-alive"}), b"close": frozenset({b"close"})}


def _connection_tokens(head: Head, status: int) -> frozenset[bytes]:
    conn = head.headers.get(b"connection")
    if not conn:
        return frozenset()
    common = _COMMON_CONNECTION.get(conn)
    if common is not None:
        return common
    tokens = frozenset(t.strip().lower() for t in conn.split(b",") if t.strip())
    named = tokens & FRAMING
    if named:
        raise HeadError(status, f"`Connection` names a framing header ({b', '.join(sorted(named)).decode('latin-1')})")
    return tokens


_VERSIONS = {"1.1": b"HTTP/1.1", "1.0": b"HTTP/1.0"}


def parse_request(raw: bytes) -> Head:
    """Parse and check a request head (`raw` ends with CRLFCRLF); raises HeadError."""
    head = Head()
    end = raw.find(b"\r\n")
    if raw.count(b" ", 0, end) != 2:
        raise HeadError(400, "malformed request line")
    collect = _Collect(True)
    collect.parser = httptools.HttpRequestParser(collect)
    hosts = _feed(collect, head, raw, 400, 501)
    version = collect.version
    if not version:
        raise HeadError(400, "incomplete request head")
    as_bytes = _VERSIONS.get(version)
    if as_bytes is None:
        raise HeadError(400, f"unsupported HTTP version {version}")
    head.version = as_bytes
    head.a = collect.method
    if head.a in REFUSED_METHODS:
        raise HeadError(405, f"{head.a.decode('latin-1')} is not served through this router")
    if not head.b.startswith(b"/"):
        raise HeadError(400, "the request target must be a path (origin-form)")
    if hosts > 1 or (version == "1.1" and (hosts == 0 or not head.headers[b"host"])):
        raise HeadError(400, "HTTP/1.1 needs exactly one non-empty Host header")
    if version == "1.0" and b"transfer-encoding" in head.headers:
        raise HeadError(400, "Transfer-Encoding is not defined for HTTP/1.0")
    _codings(head, 501, 400)
    head.connection = _connection_tokens(head, 400)
    return head


def parse_response(raw: bytes) -> Head:
    """Parse and check a backend's response head; a problem raises HeadError(502)."""
    head = Head()
    collect = _Collect(False)
    collect.parser = httptools.HttpResponseParser(collect)
    _feed(collect, head, raw, 502, 502)
    if not collect.version:
        raise HeadError(502, "incomplete response head")
    version = collect.version
    as_bytes = _VERSIONS.get(version)
    if as_bytes is None:
        raise HeadError(502, f"unsupported HTTP version {version}")
    head.version = as_bytes
    status = collect.status
    if not 100 <= status <= 599:
        raise HeadError(502, f"invalid status {status}")
    head.a = b"%d" % status
    _codings(head, 502, 502)
    head.connection = _connection_tokens(head, 502)
    return head


RESPONSE_CACHE = 256
"""Distinct response heads remembered by `parse_response_cached`."""
CACHED_HEAD = 1024
"""Longest response head it remembers (so the cache holds well under 1 MiB)."""
_RESPONSES: dict[bytes, Head] = {}


def parse_response_cached(raw: bytes) -> Head:
    """`parse_response`, remembered for recent heads: a backend's heads repeat byte for byte (an engine's
    SSE answers differ only by `Date`, once a second), and the parse is ~4 µs of a request's router CPU.
    Only a head that parsed cleanly is kept, keyed by its exact bytes, so a hit is the parse those bytes
    give; a head that fails is parsed (and refused) every time. The Head is shared: its users only read it.
    """
    head = _RESPONSES.get(raw)
    if head is None:
        head = parse_response(raw)
        if len(raw) <= CACHED_HEAD:
            if len(_RESPONSES) >= RESPONSE_CACHE:
                del _RESPONSES[next(iter(_RESPONSES))]  # the oldest entry: a churning backend costs nothing more
            _RESPONSES[raw] = head
    return head


def connection_tokens(head: Head) -> frozenset[bytes]:
    """Lower-cased tokens of `Connection:` (headers it names are hop-by-hop, RFC 9110 §7.6.1)."""
    if head.connection is not None:
        return head.connection
    return _connection_tokens(head, 400)


_SKIP: dict[frozenset[bytes], frozenset[bytes]] = {}
"""HOP_BY_HOP plus a caller's constant drop set, made once per drop set (a handful in all)."""


def forward_fields(head: Head, drop: frozenset[bytes] | set[bytes] = frozenset()) -> bytes:
    """The head's end-to-end headers, re-serialized as `Name: value\\r\\n` lines (no framing, no hop-by-hop)."""
    if isinstance(drop, frozenset):
        skip = _SKIP.get(drop)
        if skip is None:
            skip = _SKIP[drop] = HOP_BY_HOP | drop
    else:
        skip = HOP_BY_HOP | drop
    named = connection_tokens(head) if b"connection" in head.headers else frozenset()
    if not named <= skip:
        skip = skip | named
    return b"".join([name + b": " + value + b"\r\n" for lname, name, value in head.fields if lname not in skip])
