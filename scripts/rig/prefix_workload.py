"""A multi-turn chat workload and the prefix-cache hit rate it earns on real vLLM replicas.

Each conversation has its own long system prompt and `X-Session-ID`; every turn resends the whole
history plus a new user message, as chat clients do. Turns are interleaved across conversations (turn 1
of all, then turn 2 of all, …) so a load-balancing router really has a choice to make. The hit rate is
Δ`vllm:prefix_cache_hits_total` / Δ`vllm:prefix_cache_queries_total`, summed over the replicas.
"""

from __future__ import annotations

import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field


def scrape(url: str) -> dict[str, float]:
    """One /metrics scrape: sample name → value summed over its label sets (counters and gauges)."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as reply:
        text = reply.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _, value = line.rpartition(" ")
        name = name_labels.split("{", 1)[0]
        try:
            values[name] = values.get(name, 0.0) + float(value)
        except ValueError:
            continue
    return values


def _post(url: str, body: dict, session: str) -> dict:
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "X-Session-ID": session})
    with urllib.request.urlopen(req, timeout=300) as reply:
        return json.loads(reply.read())


def conversation_hit_rate(pool_url: str, replica_urls: list[str], *, conversations: int = 6, turns: int = 4,
                          tag: str = "run", model: str = "tiny") -> float:
    """Run the workload through `pool_url`; the prefix-cache hit rate it earned on the replicas."""
    before = [scrape(u) for u in replica_urls]
    histories = {f"{tag}-{c}": [{"role": "system", "content": f"conversation {tag} {c}: " + "be brief and kind. " * 60}]
                 for c in range(conversations)}
    for turn in range(turns):
        for session, history in histories.items():
            history.append({"role": "user", "content": f"question {turn} of {session}"})
            reply = _post(pool_url, {"model": model, "max_tokens": 8, "messages": history}, session)
            history.append({"role": "assistant", "content": reply["choices"][0]["message"]["content"]})
    after = [scrape(u) for u in replica_urls]
    hits = sum(a.get("vllm:prefix_cache_hits_total", 0) - b.get("vllm:prefix_cache_hits_total", 0) for a, b in zip(after, before, strict=True))
    queries = sum(a.get("vllm:prefix_cache_queries_total", 0) - b.get("vllm:prefix_cache_queries_total", 0) for a, b in zip(after, before, strict=True))
    return hits / queries if queries else 0.0


def _stream(url: str, body: dict, session: str) -> tuple[str, float] | None:
    """One streamed chat turn: (the reply's text, seconds to its first content chunk); None when it was
    not answered in full (an HTTP error, or a stream that ended without `data: [DONE]`)."""
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps({**body, "stream": True}).encode(),
                                 headers={"Content-Type": "application/json", "X-Session-ID": session})
    started = time.monotonic()
    first: float | None = None
    parts: list[str] = []
    try:
        with urllib.request.urlopen(req, timeout=300) as reply:
            for raw in reply:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    return "".join(parts), (first if first is not None else time.monotonic()) - started
                for choice in json.loads(data).get("choices", []):
                    text = (choice.get("delta") or {}).get("content") or ""
                    if text and first is None:
                        first = time.monotonic()
                    parts.append(text)
    except (OSError, ValueError):
        return None
    return None


@dataclass
class SharedPromptRun:
    """What one pass of `shared_prompt_conversations` earned, from the engines' counters and the client."""

    hits: float
    queries: float
    per_replica_queries: list[float]
    sent: int
    answered: int
    ttft_s: list[float] = field(default_factory=list)
    per_replica_requests: list[float] = field(default_factory=list)
    """Requests each replica finished (Δ`vllm:request_success_total`), in `replica_urls` order."""

    @property
    def hit_rate(self) -> float:
        return self.hits / self.queries if self.queries else 0.0


SHARED_SYSTEM = ("You are the support assistant of {tag}. Answer in plain words, cite the relevant policy section, "
                 "never invent order numbers, and keep every answer short unless asked for detail. ")
USER_TURN = ("Conversation {c}, turn {t}: here is the next part of my ticket {c}-{t}. The parcel {c}{t} left the depot "
             "on day {t} and was scanned at hub {c} but never reached my street; the tracking page for {c}/{t} shows "
             "a different city each time I refresh it, and support case {t}{c} was closed without an answer. ")


def shared_prompt_conversations(pool_url: str, replica_urls: list[str], *, conversations: int = 8, turns: int = 4,
                                tag: str = "run", concurrency: int = 2, model: str = "tiny",
                                max_tokens: int = 16) -> SharedPromptRun:
    """Multi-turn conversations that all start with ONE system prompt (~560 tokens, fresh per `tag`), each
    with its own `X-Session-ID`; every turn adds a ~110-token user message to the whole history and is
    streamed. Turns go in waves (turn t of every conversation, `concurrency` at a time), so a router sees
    requests in flight. Hit rate from the replicas' own prefix-cache counters, as `conversation_hit_rate`."""
    before = [scrape(u) for u in replica_urls]
    system = SHARED_SYSTEM.format(tag=f"shop {tag}") * 8
    histories = {f"{tag}-{c}": [{"role": "system", "content": system}] for c in range(conversations)}
    ttfts: list[float] = []
    answered = sent = 0

    def turn_of(c: int, t: int) -> tuple[str, tuple[str, float] | None]:
        session = f"{tag}-{c}"
        histories[session].append({"role": "user", "content": USER_TURN.format(c=c, t=t) * 2})
        body = {"model": model, "max_tokens": max_tokens, "temperature": 0, "messages": histories[session]}
        return session, _stream(pool_url, body, session)

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for t in range(turns):
            for session, result in pool.map(turn_of, range(conversations), [t] * conversations):
                sent += 1
                if result is not None:
                    answered += 1
                    ttfts.append(result[1])
                histories[session].append({"role": "assistant", "content": result[0] if result else "(no answer)"})
    after = [scrape(u) for u in replica_urls]
    per_q = [a.get("vllm:prefix_cache_queries_total", 0) - b.get("vllm:prefix_cache_queries_total", 0) for a, b in zip(after, before, strict=True)]
    hits = sum(a.get("vllm:prefix_cache_hits_total", 0) - b.get("vllm:prefix_cache_hits_total", 0) for a, b in zip(after, before, strict=True))
    per_r = [a.get("vllm:request_success_total", 0) - b.get("vllm:request_success_total", 0) for a, b in zip(after, before, strict=True)]
    return SharedPromptRun(hits=hits, queries=sum(per_q), per_replica_queries=per_q, sent=sent, answered=answered, ttft_s=ttfts,
                           per_replica_requests=per_r)
