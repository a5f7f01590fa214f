"""A multi-turn chat workload and the prefix-cache hit rate it earns on real vLLM replicas.

Each conversation has its own long system prompt and `X-Session-ID`; every turn resends the whole
history plus a new user message, as chat clients do. Turns are interleaved across conversations (turn 1
of all, then turn 2 of all, …) so a load-balancing router really has a choice to make. The hit rate is
Δ`vllm:prefix_cache_hits_total` / Δ`vllm:prefix_cache_queries_total`, summed over the replicas.
"""

from __future__ import annotations

import json
import urllib.request


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
