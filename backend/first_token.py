"""One `max_tokens: 1` completion through an engine's OpenAI endpoint: phase first_token of `c3 shard start` and `c3 recipes launch`.

`/models` answering only says the API process is up; a pipeline stage on another node can still die on
the first request (vLLM's CPU build with PP and `--enforce-eager`: `EngineDeadError` on the first
completion). So the shard counts as serving only once one real token came back.

The request is written on an asyncio connection (no thread), so Ctrl+C or a dying part cancels it at
once; no proxy applies (the head is on the user's own network, as for every probe). Bounded: at most
`MAX_ANSWER_BYTES` of the answer are read, and the caller's deadline covers the whole exchange.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from backend.errors import terminal_safe

PROMPT = "Hello"
"""What the first request says (any prompt gives one token)."""
MAX_ANSWER_BYTES = 1 << 16
"""A one-token answer is a few hundred bytes; more than this is not one."""
NOT_YET = frozenset({502, 503, 504})
"""Statuses that mean "still loading" (llama-server answers 503 while it loads): asked again."""


@dataclass(frozen=True)
class Answer:
    """One completion attempt's outcome."""

    token: str | None = None
    """The generated text (possibly empty: a first token that is end-of-text) when a token came back."""
    status: int | None = None
    """HTTP status, None when nothing answered."""
    problem: str = ""
    """Why no token came back, one line."""

    @property
    def again(self) -> bool:
        """Nothing answered yet, or the server said it is still loading: worth asking again."""
        return self.token is None and (self.status is None or self.status in NOT_YET)


def _payload(model: str) -> bytes:
    return json.dumps({"model": model, "prompt": PROMPT, "max_tokens": 1, "temperature": 0, "stream": False}).encode()


def _body_of(headers: dict[str, str], raw: bytes) -> bytes:
    """The body as sent: chunked transfer encoding undone (cpp-httplib may chunk)."""
    if "chunked" not in headers.get("transfer-encoding", ""):
        return raw
    out, rest = bytearray(), raw
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            break
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2:]
    return bytes(out)


def _problem(status: int, body: bytes) -> str:
    """An error answer's own message (OpenAI `{"error": {"message"}}`, vLLM's older `{"message"}`), one line."""
    try:
        said = json.loads(body)
        detail = (said.get("error") or {}).get("message") if isinstance(said.get("error"), dict) else said.get("error")
        detail = detail or said.get("message") or said.get("detail")
    except (ValueError, AttributeError):
        detail = None
    text = str(detail or body[:200].decode("utf-8", "replace")).strip().splitlines()
    return f"HTTP {status}" + (f": {terminal_safe(text[0][:200], one_line=True)}" if text else "")


def read_answer(status: int, body: bytes) -> Answer:
    """A completion answer as an Answer: the first choice's text when it is a 2xx with a choice."""
    if not 200 <= status < 300:
        return Answer(status=status, problem=f"answered {_problem(status, body)}")
    try:
        choice = json.loads(body)["choices"][0]
        text = choice["text"]
    except (ValueError, KeyError, IndexError, TypeError):
        return Answer(status=status, problem=f"answered HTTP {status} without a completion choice")
    if not isinstance(text, str):
        return Answer(status=status, problem=f"answered HTTP {status} with a choice that holds no text")
    return Answer(token=text, status=status)


async def ask(base_url: str, model: str, api_key: str | None = None) -> Answer:
    """POST one `max_tokens: 1` completion to `base_url`/completions (`api_key` as a bearer token when the engine
    wants one; TLS for an https URL); never raises for a network problem (the caller bounds it with its deadline and
    cancels it when a part dies)."""
    url = urlsplit(f"{base_url}/completions")
    tls = url.scheme == "https"
    host, port = url.hostname or "", url.port or (443 if tls else 80)
    data = _payload(model)
    auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
    head = (f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n{auth}"
            f"Content-Length: {len(data)}\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n").encode()
    try:
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl.create_default_context() if tls else None)
    except OSError as error:
        return Answer(problem=f"nothing answers on {url.netloc} ({error.strerror or type(error).__name__})")
    try:
        writer.write(head + data)
        await writer.drain()
        raw = await reader.read(MAX_ANSWER_BYTES + 1)
        while raw and len(raw) <= MAX_ANSWER_BYTES and (more := await reader.read(MAX_ANSWER_BYTES + 1 - len(raw))):
            raw += more
    except OSError as error:
        return Answer(problem=f"the head broke off its answer ({error.strerror or type(error).__name__})")
    finally:
        writer.close()
    if len(raw) > MAX_ANSWER_BYTES:
        return Answer(problem=f"the answer was over {MAX_ANSWER_BYTES} bytes: not a one-token completion")
    header_block, _, body = raw.partition(b"\r\n\r\n")
    lines = header_block.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        return Answer(problem="the head's answer was not HTTP" if raw else "the head closed the connection without an answer")
    headers = {k.strip().lower(): v.strip().lower() for k, _, v in (line.partition(":") for line in lines[1:])}
    return read_answer(int(parts[1]), _body_of(headers, body))
