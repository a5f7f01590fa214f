"""Fakes at the seams estate validation uses: a small catalog, a fit function and a rig.

The slugs mirror club-3090's §6 roles with our naming: a TP=1 slug (`vllm/qwen3-8b`), a TP=2 slug
(`vllm/qwen3-32b-awq-tp2`), an NVFP4 TP=2 slug that needs one architecture and sm 12.0, a model too
big for a 24 GiB card, an unpriced llama.cpp slug, gated statuses.
"""

from __future__ import annotations

from backend.errors import Refused
from backend.gpu.registry import GpuRegistry
from backend.models.catalog import CatalogEntry
from backend.models.fit import FitReport, GpuFit
from backend.models.gpu import Gpu
from backend.sim.probe import Rig, RigGpu, SimulatedProbe

RTX3090 = RigGpu(name="NVIDIA GeForce RTX 3090", total_mib=24576, sm="8.6", reserved_mib=422)
RTX5090 = RigGpu(name="NVIDIA GeForce RTX 5090", total_mib=32607, sm="12.0", reserved_mib=487)


def entry(slug: str, **kw) -> CatalogEntry:
    engine = slug.split("/", 1)[0]
    return CatalogEntry(slug=slug, engine=engine, image="img:1", model="org/model", **kw)


ENTRIES = [
    entry("vllm/qwen3-8b", tp=1, default_port=8020),
    entry("vllm/qwen3-32b-awq-tp2", tp=2, default_port=8010),
    entry("vllm/qwen3-30b-nvfp4-tp2", tp=2, default_port=8030, required_sm="12.0", fallback_sm="8.6", requires_homogeneous_arch=True),
    entry("vllm/needs-hopper", tp=1, default_port=8040, required_sm="9.0"),
    entry("vllm/llama-70b", tp=1, default_port=8050),
    entry("vllm/pp2", tp=1, pp=2, default_port=8060),
    entry("llamacpp/gemma-3-12b-q4", tp=1, default_port=8070),
    entry("vllm/exp-model", tp=1, default_port=8080, status="experimental", status_note="new engine build"),
    entry("vllm/old-model", tp=1, default_port=8090, status="deprecated"),
]


class FakeCatalog:
    def __init__(self, entries=ENTRIES):
        self.entries = list(entries)
        self._by = {e.slug: e for e in self.entries}

    def get(self, slug: str) -> CatalogEntry:
        try:
            return self._by[slug]
        except KeyError:
            raise Refused(f"unknown slug `{slug}`") from None


def fake_fit(entry: CatalogEntry, gpus: list[Gpu]) -> FitReport:
    """Deterministic verdicts: llama-70b never fits one GPU; llamacpp is unpriced; else fits."""
    smallest = min(g.cuda_total_mib or 0 for g in gpus) / 1024
    if entry.engine == "llamacpp":
        return FitReport(verdict="unknown", engine="llamacpp", reasons=["llama.cpp pricing not modelled in this fake"])
    weights = 65.0 if "70b" in entry.slug else 15.3
    budget = smallest * 0.9
    kv = budget - weights - 1.5
    verdict = "fits" if kv > 1 else "wont-fit"
    rank = GpuFit(total_gib=smallest, budget_gib=budget, weights_gib=weights, activation_gib=1.0, non_torch_gib=0.3, cudagraph_gib=0.2, available_kv_gib=kv)
    return FitReport(verdict=verdict, kv_bytes_per_token=147456, kv_cache_tokens=max(0, int(kv * 2**30 / 147456)), available_kv_gib=kv, gpus=[rank] * len(gpus))


def rig(*cards: RigGpu) -> Rig:
    return Rig(gpus=tuple(cards))


def probe(*cards: RigGpu, registry_dir=None) -> SimulatedProbe:
    return SimulatedProbe(rig(*cards), source="simulated:test", registry=GpuRegistry(registry_dir or "/nonexistent-c3-registry"))


def rig_yaml(*cards: RigGpu) -> str:
    lines = ["gpus:"]
    for c in cards:
        lines.append(f'  - {{name: "{c.name}", total_mib: {c.total_mib}, sm: "{c.sm}"}}')
    return "\n".join(lines) + "\n"
