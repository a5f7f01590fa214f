"""One test prompt to a serving engine (`c3 pod try`, the cockpit's `t`): a streaming chat request — or a
completion, when the engine has no chat endpoint or no chat template — timed from the request to the
first token (TTFT) and over the tokens after it.

Plain HTTP to this machine's own port (a pod publishes its engine on 127.0.0.1), on the standard
library's `http.client` like the live hub's loopback probes, so no proxy can apply. Bounded: one
deadline covers the model list, the request and every read of the stream (the socket's timeout is set
to what is left before each read), and at most `MAX_ANSWER_CHARS` of the answer are kept. An API key
(`VLLM_API_KEY`) goes only into the `Authorization` header; it never appears in a result or a message.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from backend.errors import Refused

DEFAULT_PROMPT = "Say hello in one short sentence."
"""What `c3 pod try NAME` and the cockpit's `t` send when no prompt is given."""
MAX_ANSWER_CHARS = 65536
"""The answer kept (the rest is still read and counted, so the numbers stay true)."""
MAX_LINE_BYTES = 1 << 20
"""One SSE line longer than this is not an engine's answer: refused."""


class TryResult(BaseModel):
    """One test prompt's answer and how fast it came (`c3 pod try --json`)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    pod: str
    """The pod asked."""
    url: str
    """The endpoint the request went to (`http://127.0.0.1:PORT/v1/chat/completions` or `/v1/completions`)."""
    api: Literal["chat", "completion"]
    """Which OpenAI API answered: chat, or a plain completion when the engine serves no chat."""
    model: str
    """The served model name the request named (the first of the engine's `/v1/models`)."""
    answer: str
    """The generated text (cut at 65536 characters)."""
    ttft_ms: float
    """Time to first token: from sending the request to the first generated text, in ms."""
    tokens: int
    """Tokens generated: the engine's own `usage.completion_tokens` when it reports it, else one per
    streamed piece of text."""
    tokens_per_s: float
    """Generation speed: the tokens after the first over the time from the first to the last (a single
    token: tokens over the whole request)."""
    total_ms: float
    """The whole request, from sending it to the stream's end, in ms."""
    finish_reason: str | None
    """Why the engine stopped (`stop`, `length`…), as it said; null when it did not say."""


def _fail(pod: str, what: str, hint: str | None = None) -> Refused:
    return Refused(f"pod {pod}: {what}", hint=hint or f"`c3 pod status` shows whether {pod} serves; `c3 pod logs {pod}` its engine's output")


class _Deadline:
    def __init__(self, pod: str, timeout_s: float) -> None:
        self.pod, self.timeout_s = pod, timeout_s
        self.at = time.monotonic() + timeout_s

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise self.expired()
        return left

    def expired(self) -> Refused:
        return _fail(self.pod, f"no complete answer within {self.timeout_s:g} s", hint="a larger --timeout, or fewer --max-tokens; `c3 pod logs` shows what the engine does")


def _connect(pod: str, port: int, deadline: _Deadline) -> Any:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=deadline.left())
    try:
        conn.connect()
    except TimeoutError:
        raise deadline.expired() from None
    except OSError as error:
        raise _fail(pod, f"nothing answers on http://127.0.0.1:{port} ({type(error).__name__})") from None
    return conn


def _request(pod: str, port: int, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str], deadline: _Deadline) -> tuple[Any, Any, Any]:
    """Send one request; the connection, its socket (kept: http.client drops it on `connection: close`) and the response."""
    import http.client

    conn = _connect(pod, port, deadline)
    sock = conn.sock
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={**headers, **({"Content-Type": "application/json"} if data else {})})
        sock.settimeout(deadline.left())
        return conn, sock, conn.getresponse()
    except TimeoutError:
        conn.close()
        raise deadline.expired() from None
    except (OSError, http.client.HTTPException) as error:
        conn.close()
        raise _fail(pod, f"the engine on port {port} broke off ({type(error).__name__})") from None


def _status_problem(pod: str, status: int, body: bytes) -> Refused:
    from backend.http_probe import AUTH_HINT

    if status in (401, 403):
        return _fail(pod, f"the engine wants an API key (HTTP {status})", hint=AUTH_HINT)
    try:
        said = json.loads(body)
        detail = said.get("message") or (said.get("error") or {}).get("message") or said.get("detail") if isinstance(said, dict) else None
    except (ValueError, AttributeError):
        detail = None
    text = str(detail or body[:200].decode("utf-8", "replace")).strip().splitlines()
    return _fail(pod, f"the engine answered HTTP {status}" + (f": {text[0][:200]}" if text else ""))


def served_model(pod: str, port: int, headers: dict[str, str], deadline: _Deadline) -> str:
    """The first model the engine lists at /v1/models."""
    conn, _, response = _request(pod, port, "GET", "/v1/models", None, headers, deadline)
    try:
        body = response.read(MAX_LINE_BYTES)
    except TimeoutError:
        raise deadline.expired() from None
    except OSError as error:
        raise _fail(pod, f"the engine broke off its model list ({type(error).__name__})") from None
    finally:
        conn.close()
    if response.status != 200:
        raise _status_problem(pod, response.status, body)
    try:
        return str(json.loads(body)["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise _fail(pod, "the engine's /v1/models lists no model") from None


def try_prompt(pod: str, port: int, prompt: str, *, max_tokens: int, timeout_s: float, api_key: str | None = None) -> TryResult:
    """Send `prompt` to the engine on 127.0.0.1:`port` as one streaming request and measure it.
    Raises Refused (nothing answers, an HTTP error, no answer within `timeout_s`)."""
    deadline = _Deadline(pod, timeout_s)
    headers = {"Accept-Encoding": "identity", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    model = served_model(pod, port, headers, deadline)
    attempts: tuple[tuple[Literal["chat", "completion"], str, dict[str, Any]], ...] = (
        ("chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}]}),
        ("completion", "/v1/completions", {"prompt": prompt}),
    )
    for api, path, body in attempts:
        payload = {"model": model, "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}, **body}
        started = time.monotonic()
        conn, sock, response = _request(pod, port, "POST", path, payload, headers, deadline)
        try:
            if response.status != 200:
                said = response.read(4096)
                # No chat endpoint (404/405), or no chat template (400): the same prompt as a plain completion.
                if api == "chat" and response.status in (400, 404, 405):
                    continue
                raise _status_problem(pod, response.status, said)
            return _read_stream(pod, response, sock, deadline, started, api=api, model=model, url=f"http://127.0.0.1:{port}{path}")
        except TimeoutError:
            raise deadline.expired() from None
        except OSError as error:
            raise _fail(pod, f"the engine broke off its answer ({type(error).__name__})") from None
        finally:
            conn.close()
    raise AssertionError("not reached: the completion attempt returns or raises")


def _read_stream(pod: str, response: Any, sock: Any, deadline: _Deadline, started: float, *, api: Literal["chat", "completion"], model: str, url: str) -> TryResult:
    pieces: list[str] = []
    kept = 0
    chunks = 0
    usage_tokens: int | None = None
    first = last = None
    finish: str | None = None
    while True:
        sock.settimeout(deadline.left())
        line = response.readline(MAX_LINE_BYTES + 1)
        if not line:
            break  # the stream ended without [DONE]: what came is the answer
        if len(line) > MAX_LINE_BYTES:
            raise _fail(pod, "the engine sent a line over 1 MiB: not an answer stream")
        text = line.decode("utf-8", "replace").strip()
        if not text.startswith("data:"):
            continue
        data = text[5:].strip()
        if data == "[DONE]":
            break
        try:
            event = json.loads(data)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            usage_tokens = usage["completion_tokens"]
        for choice in event.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") if api == "chat" else choice
            content = delta.get("content" if api == "chat" else "text") if isinstance(delta, dict) else None
            if isinstance(content, str) and content:
                now = time.monotonic()
                first = first if first is not None else now
                last = now
                chunks += 1
                if kept < MAX_ANSWER_CHARS:
                    pieces.append(content[: MAX_ANSWER_CHARS - kept])
                    kept += len(pieces[-1])
            if choice.get("finish_reason"):
                finish = str(choice["finish_reason"])
    ended = time.monotonic()
    if first is None or last is None:
        raise _fail(pod, "the engine's answer held no text" + (f" (finish reason {finish})" if finish else ""))
    tokens = usage_tokens if usage_tokens else chunks
    span = last - first
    rate = (tokens - 1) / span if tokens > 1 and span > 0 else tokens / max(ended - started, 1e-6)
    return TryResult(pod=pod, url=url, api=api, model=model, answer="".join(pieces), ttft_ms=round((first - started) * 1000, 1), tokens=tokens,
                     tokens_per_s=round(rate, 1), total_ms=round((ended - started) * 1000, 1), finish_reason=finish)
