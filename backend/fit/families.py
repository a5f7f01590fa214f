"""Families where c3's vLLM estimate is known to be less exact, from the validation rows in bench/RESULTS.md
("Fit accuracy") and issue 27: the fit names the family and the size of the miss, and keeps its figure.

Every miss listed here is pessimistic (c3 prices less KV memory than vLLM logged), so the estimate itself is the
margin: c3 does not add the known miss back, because the same rows show it varies from boot to boot of one family
(gpt-oss's MXFP4 load runs from 1.005 to 1.09 of the checkpoint with the MoE backend vLLM picks at run time).
(TP > 1 non-torch memory on vLLM 0.11-0.16 was one of them until it was read from the engine's source: see
backend/fit/overhead.py `non_torch_gib`.) What replaces it is a measurement — a boot of the same setup on the rig (learned.py) — and a fit priced from
one carries no such note. A family with an optimistic miss does not belong here: it is fixed in the pricer, or
answers `tight`/`unknown` there (AWQ, unified memory).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from backend.fit.plan import Knobs, Rank
from backend.models import ModelSpec

V0_LONG_CONTEXT = 32768
"""V0's profile forward covers the whole context up to this many tokens (the rows above it miss most)."""


@dataclass(frozen=True)
class KnownMiss:
    """One family, the largest miss seen on it and where it was seen."""

    family: str
    """The family in words."""
    pessimistic_gib: float
    """Largest KV memory per rank c3 priced below what vLLM logged."""
    rows: str
    """The validation rows (bench/RESULTS.md) or reports the figure comes from."""
    applies: Callable[[ModelSpec, Knobs, list[Rank]], bool]
    """Whether a launch belongs to the family."""


def _mxfp4(spec: ModelSpec, knobs: Knobs, ranks: list[Rank]) -> bool:
    return "mxfp4" in ((spec.quant_method or "") + (knobs.quant_format or "")).lower()


def _v0_long_context(spec: ModelSpec, knobs: Knobs, ranks: list[Rank]) -> bool:
    return knobs.version is not None and knobs.version < (0, 8) and (knobs.max_model_len or spec.max_position_embeddings) > V0_LONG_CONTEXT


def _vision(spec: ModelSpec, knobs: Knobs, ranks: list[Rank]) -> bool:
    """A vision checkpoint that c3 still prices with the V1 runner where vLLM may run Model Runner V2 (MoE ones from
    v0.29, when MRv2 became every model's default); dense ones are priced with MRv2 from v0.27 (overhead.py)."""
    from backend.fit.overhead import model_runner_v2

    if not spec.has_vision or knobs.version is None or knobs.version < (0, 27):
        return False
    return model_runner_v2(spec, knobs.version, quantized=knobs.quantized or spec.quant_method is not None) is False


KNOWN_MISSES: tuple[KnownMiss, ...] = (
    KnownMiss("vLLM V0 (before 0.8) above 32K context: the profile's activation", 1.75,
              "R1-Distill-Qwen-14B TP 2 at 128K on 2× RTX 4090 (−1.75 GiB) and Llama-3.1-8B at 128K on a 22 GiB card (−1.39), "
              "vLLM 0.7.2: activation 1.53 priced, 0.19–0.22 logged", _v0_long_context),
    KnownMiss("MXFP4 MoE weights (gpt-oss): the load over the checkpoint depends on the MoE kernel vLLM picks", 1.71,
              "gpt-oss-120b on H100 (−1.71 GiB, 66.01 priced vs 64.38 logged), gpt-oss-20b TP 2 (−0.58)", _mxfp4),
    KnownMiss("MoE multimodal checkpoints on vLLM 0.27+: the profile's activation (priced with the V1 runner's sampler)", 3.0,
              "issue 27's multimodal row (activation ~5 GiB priced, ~2 used), the size of the V1 runner's full-vocabulary sort that "
              "Model Runner V2 skips; dense vision checkpoints are priced with MRv2 from v0.27, and the public V1-runner vision rows "
              "(gemma-3, Mistral-Small-3.1, Llama-4-Scout on v0.19) are within 0.2", _vision),
)


def known_misses(spec: ModelSpec, knobs: Knobs, ranks: list[Rank]) -> list[KnownMiss]:
    """The families this vLLM launch belongs to (none when its KV memory was measured on the rig)."""
    if knobs.engine != "vllm" or knobs.measured_kv_gib is not None:
        return []
    return [miss for miss in KNOWN_MISSES if miss.applies(spec, knobs, ranks)]


def generation_note(engine: str, version: tuple[int, int] | None, source: str) -> str | None:
    """Which vLLM generation's memory rules priced a slug, and where its version came from (None for other engines or
    an unknown version, which `price` already answers `tight` for)."""
    from backend.fit.overhead import MRV2_DENSE_FROM, V1_FROM

    if engine != "vllm" or version is None:
        return None
    if version < V1_FROM:
        era = "the V0 engine"
    elif version < MRV2_DENSE_FROM:
        era = "the V1 engine"
    else:
        era = "the V1 engine with Model Runner V2 for dense models"
    return f"engine generation assumed: vLLM {version[0]}.{version[1]}, {era} (version from {source})"


def miss_note(miss: KnownMiss) -> str:
    """The note a fit carries for one family."""
    return (f"less exact here — {miss.family}: c3 has priced up to {miss.pessimistic_gib:.2f} GiB less KV memory than vLLM logged "
            f"({miss.rows}); kept as margin until a boot on this rig is learned")
