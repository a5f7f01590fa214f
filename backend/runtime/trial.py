"""One test prompt to a serving engine (`c3 pod try`, the cockpit's `t`): a streaming chat request — or a
completion, when the engine has no chat endpoint or no chat template — timed from the request to the
first token (TTFT) and over the tokens after it.

Plain HTTP to this machine's own port (a pod publishes its engine on 127.0.0.1), through
backend.http_probe's `stream` with no proxy (none can reach this machine's loopback). Bounded: one
deadline covers the model list, the request and every read of the stream (the probe's watchdog ends a
read at the deadline), and at most `MAX_ANSWER_CHARS` of the answer are kept. An API key
(`VLLM_API_KEY`) goes only into the `Authorization` header; it never appears in a result or a message.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from backend.errors import Refused
from backend.http_probe import AUTH_HINT, StreamBroken, Streamed, stream

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

    def expired(self) -> Refused:
        return _fail(self.pod, f"no complete answer within {self.timeout_s:g} s", hint="a larger --timeout, or fewer --max-tokens; `c3 pod logs` shows what the engine does")


def _broken(pod: str, port: int, error: StreamBroken, deadline: _Deadline, reading: str) -> Refused:
    """One line for a request that got no complete answer; `reading` names the body that broke off."""
    if error.timed_out:
        return deadline.expired()
    if error.stage == "connect":
        return _fail(pod, f"nothing answers on http://127.0.0.1:{port} ({error.error})")
    if error.stage == "answer":
        return _fail(pod, f"the engine on port {port} broke off ({error.error})")
    return _fail(pod, f"the engine broke off {reading} ({error.error})")


def _status_problem(pod: str, status: int, body: bytes) -> Refused:
    if status in (401, 403):
        return _fail(pod, f"the engine wants an API key (HTTP {status})", hint=AUTH_HINT)
    try:
        said = json.loads(body)
        detail = said.get("message") or (said.get("error") or {}).get("message") or said.get("detail") if isinstance(said, dict) else None
    except (ValueError, AttributeError):
        detail = None
    text = str(detail or body[:200].decode("utf-8", "replace")).strip().splitlines()
    return _fail(pod, f"the engine answered HTTP {status}" + (f": {text[0][:200]}" if text else ""))


def served_model(pod: str, port: int, deadline: _Deadline, api_key: str | None = None) -> str:
    """The first model the engine lists at /v1/models."""
    try:
        with stream(f"http://127.0.0.1:{port}/v1/models", deadline_at=deadline.at, api_key=api_key, use_env_proxy=False) as answer:
            status, body = answer.status, answer.read(MAX_LINE_BYTES)
    except StreamBroken as error:
        raise _broken(pod, port, error, deadline, "its model list") from None
    if status != 200:
        raise _status_problem(pod, status, body)
    try:
        return str(json.loads(body)["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise _fail(pod, "the engine's /v1/models lists no model") from None


def try_prompt(pod: str, port: int, prompt: str, *, max_tokens: int, timeout_s: float, api_key: str | None = None) -> TryResult:
    """Send `prompt` to the engine on 127.0.0.1:`port` as one streaming request and measure it.
    Raises Refused (nothing answers, an HTTP error, no answer within `timeout_s`)."""
    deadline = _Deadline(pod, timeout_s)
    model = served_model(pod, port, deadline, api_key)
    attempts: tuple[tuple[Literal["chat", "completion"], str, dict[str, Any]], ...] = (
        ("chat", "/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}]}),
        ("completion", "/v1/completions", {"prompt": prompt}),
    )
    for api, path, body in attempts:
        payload = {"model": model, "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}, **body}
        url = f"http://127.0.0.1:{port}{path}"
        started = time.monotonic()
        try:
            with stream(url, deadline_at=deadline.at, method="POST", body=payload, api_key=api_key, use_env_proxy=False) as answer:
                if answer.status != 200:
                    said = answer.read(4096)
                    # No chat endpoint (404/405), or no chat template (400): the same prompt as a plain completion.
                    if api == "chat" and answer.status in (400, 404, 405):
                        continue
                    raise _status_problem(pod, answer.status, said)
                return _read_stream(pod, answer, started, api=api, model=model, url=url)
        except StreamBroken as error:
            raise _broken(pod, port, error, deadline, "its answer") from None
    raise AssertionError("not reached: the completion attempt returns or raises")


def _read_stream(pod: str, answer: Streamed, started: float, *, api: Literal["chat", "completion"], model: str, url: str) -> TryResult:
    pieces: list[str] = []
    kept = 0
    chunks = 0
    usage_tokens: int | None = None
    first = last = None
    finish: str | None = None
    for line in answer.lines(MAX_LINE_BYTES):  # lines that end without [DONE]: what came is the answer
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
