#!/usr/bin/env python3
"""The prefix-cache hit rate a perfect router could reach on `bench/pool_cache_route.py`'s workload, and
what routing that ignores prefixes gets: is "1.3 × round-robin" reachable at all (issue 26)?

    <python with `tokenizers`> bench/pool_cache_bound.py [--tokenizer PATH] [--replicas 2] [--conversations 8] [--turns 4]

The rig's vLLM venv has `tokenizers`; the default tokenizer is the rig's tiny models' shared one
(`scripts/rig/real_engines.models_dir()/tokenizer/tokenizer.json`). The prompts are the workload's own
(`scripts/rig/prefix_workload.shared_prompt_conversations`: one system prompt, a user turn per turn, the
whole history resent) rendered with the tiny models' chat template and tokenized; each answer is
`--answer-tokens` tokens that come back, unchanged, in the next turn's prompt (the best case for the
cache). vLLM's accounting: a request queries all its prompt tokens and hits the longest run of whole
`--block`-token blocks that a replica cached from earlier requests, at most prompt length − 1; nothing
is evicted (the bench's replicas are far from full). Routing never changes the queries, only the hits.

- ceiling: every request on one replica (every earlier block is there): no router does better;
- random: each request on a uniformly random replica (Monte Carlo) — what load balancing that ignores
  prefixes gets on average when it carries no per-conversation pattern (the `--sticky none` stand-in);
- alternating: strict round-robin in send order (vllm-router `round_robin`); with an even number of
  conversations and 2 replicas every conversation keeps its replica, which is why that peer scored high.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from scripts.rig.prefix_workload import SHARED_SYSTEM, USER_TURN  # noqa: E402 - bench scripts run from a checkout


def render(messages: list[tuple[str, str]], generation_prompt: bool) -> str:
    """The tiny models' chat template (`scripts/rig/tiny_models.CHAT_TEMPLATE`)."""
    text = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in messages)
    return text + ("<|im_start|>assistant\n" if generation_prompt else "")


def workload(encode, conversations: int, turns: int, answer_tokens: int) -> list[tuple[list[int], list[int]]]:
    """(prompt tokens, prompt + answer tokens) per request, in the order the bench sends them."""
    system = SHARED_SYSTEM.format(tag="shop bound") * 8
    histories: dict[int, list[tuple[str, str]]] = {c: [("system", system)] for c in range(conversations)}
    answer = " ".join(["ok"] * answer_tokens)
    out = []
    for t in range(turns):
        for c in range(conversations):
            histories[c].append(("user", USER_TURN.format(c=c, t=t) * 2))
            prompt = encode(render(histories[c], True))
            histories[c].append(("assistant", answer))
            seen = encode(render(histories[c], False))  # what the next turn resends, answer included
            out.append((prompt, seen))
    return out


def lcp(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def hit_rate(requests: list[tuple[list[int], list[int]]], placement: list[int], replicas: int, block: int) -> float:
    cached: list[list[list[int]]] = [[] for _ in range(replicas)]
    hits = queries = 0
    for (prompt, seen), r in zip(requests, placement, strict=True):
        best = max((lcp(prompt, s) for s in cached[r]), default=0)
        hits += (min(best, len(prompt) - 1) // block) * block
        queries += len(prompt)
        cached[r].append(seen)
    return hits / queries


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", type=Path)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--conversations", type=int, default=8)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--answer-tokens", type=int, default=16)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--samples", type=int, default=2000)
    args = ap.parse_args()
    from tokenizers import Tokenizer

    path = args.tokenizer
    if path is None:
        from scripts.rig.real_engines import models_dir

        path = models_dir() / "tokenizer" / "tokenizer.json"
    tok = Tokenizer.from_file(str(path))
    requests = workload(lambda text: tok.encode(text, add_special_tokens=False).ids, args.conversations, args.turns, args.answer_tokens)
    n = len(requests)
    lengths = [len(p) for p, _ in requests]
    ceiling = hit_rate(requests, [0] * n, args.replicas, args.block)
    rng = random.Random(26)
    draws = sorted(hit_rate(requests, [rng.randrange(args.replicas) for _ in range(n)], args.replicas, args.block) for _ in range(args.samples))
    mean = sum(draws) / len(draws)
    alternating = hit_rate(requests, [i % args.replicas for i in range(n)], args.replicas, args.block)
    print(f"{args.conversations} conversations x {args.turns} turns, {args.replicas} replicas, {args.block}-token blocks: "
          f"{n} requests, {sum(lengths)} prompt tokens (first turn {lengths[0]}, last {lengths[-1]})")
    print(f"ceiling (all on one replica): {ceiling:.3f}")
    print(f"random placement: mean {mean:.3f}, 5th-95th percentile {draws[len(draws) // 20]:.3f}-{draws[-len(draws) // 20]:.3f}; "
          f"ceiling / mean = {ceiling / mean:.2f}x")
    print(f"strict alternation in send order: {alternating:.3f}")
    print(f"1.3 x random mean = {1.3 * mean:.3f}: {'reachable' if ceiling >= 1.3 * mean else 'NOT reachable'} on this workload")
    return 0


if __name__ == "__main__":
    sys.exit(main())
