"""Each rank's KV memory read back from its own boot log, and which rank binds.

With the model split over nodes, every rank logs the memory it keeps for the KV cache: `Available KV cache memory:
X GiB` on a GPU, `Explicitly set (X/Y) GiB for KV cache` (or `Auto set`) on vLLM's CPU build. vLLM then gives every
rank as many blocks as the one with the fewest (`vllm/v1/core/kv_cache_utils.py` `get_kv_cache_configs`, one
scheduler for all ranks), so the rank with the least KV memory decides the context the whole shard can hold; with
equal layers per rank that is the least memory. The shard runner feeds each node's lines here and says it once,
when every rank has spoken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from backend.fit.bootlog import rank_kv_gib


@dataclass
class KvByRank:
    """Collects one KV figure per rank; `feed` returns the summary line once every rank has logged its own."""

    nodes: list[str]
    """Node names in rank order (rank 0 = the head)."""
    gib: dict[str, float] = field(default_factory=dict)
    said: bool = False

    def feed(self, node: str, line: str) -> str | None:
        if self.said or node not in self.nodes or node in self.gib:
            return None
        value = rank_kv_gib(line)
        if value is None:
            return None
        self.gib[node] = value
        if len(self.gib) < len(self.nodes):
            return None
        self.said = True
        return self.summary()

    def summary(self) -> str:
        each = ", ".join(f"rank {rank} on {node} {self.gib[node]:.2f} GiB" for rank, node in enumerate(self.nodes))
        low = min(self.gib.values())
        binding = [f"rank {rank} on {node}" for rank, node in enumerate(self.nodes) if self.gib[node] == low]
        if len(binding) == len(self.nodes):
            return f"c3: KV per rank: {each}; every rank alike, none binds"
        return f"c3: KV per rank: {each}; binding: {' and '.join(binding)} (least KV memory: every rank keeps as many blocks as it can)"
