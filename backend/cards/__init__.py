"""Card profiles (from cards.csv, each row with its sources) and how a measured GPU maps to one.

Matching rules (cards-README "Name matching"): the NVML name must equal a profile's name exactly
(case and surrounding blanks ignored) — never a prefix or a short substring, because "NVIDIA A10" is
a prefix of "NVIDIA A100-…", "NVIDIA L4" of "NVIDIA L40S", "… RTX 3090" of "… RTX 3090 Ti". A name
match is then checked against the measured memory: a card whose NVML total is more than 7 % away
from the profile's (an 8 GB RTX 3060 under the 12 GB name) gets no profile. ECC on a GDDR card costs
1/16 = 6.25 %, which stays inside the band. A card without a profile is still priced: from its
measured memory and compute capability (`backend.fit.memory.cuda_total_gib`).
"""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

from backend.models import CardProfile, Gpu

_CSV = Path(__file__).with_name("cards.csv")
_MEMORY_BAND = 0.07

# Ampere tensor cores have no FP8: vLLM's fp8 (e4m3) KV path needs sm ≥ 8.9; e5m2 works everywhere.
_KV_NO_FP8 = ("auto", "bf16", "fp16", "fp8_e5m2")
_KV_ALL = ("auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2")


def _safe_fraction(total_mib: int | None, unified: bool) -> float:
    if unified:
        return 0.85  # the OS and page cache share the pool (cards-README, GB10)
    if total_mib is None or total_mib < 30000:
        return 0.90  # 24 GB cards: leave ≥ 1.2–2 GiB for the runtime's unprofiled peaks
    return 0.92


@lru_cache(maxsize=1)
def load_cards() -> tuple[CardProfile, ...]:
    """Every shipped profile, in cards.csv order."""
    profiles = []
    with _CSV.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            total = row["total_mib_nvidia_smi"].strip()
            total_mib = int(total) if total.isdigit() else None
            unified = total_mib is None
            cuda = row["cuda_total_gib"].strip()
            profiles.append(
                CardProfile(
                    id=row["id"],
                    name=row["nvml_name"].removeprefix("NVIDIA ").strip(),
                    nvml_names=(row["nvml_name"].strip(),),
                    total_mib=total_mib,
                    cuda_total_gib=float(cuda) if cuda else None,
                    sm=row["sm"].strip(),
                    arch=row["arch"].strip(),
                    safe_memory_fraction=_safe_fraction(total_mib, unified),
                    kv_dtypes=_KV_ALL if row["fp8"].strip() == "yes" else _KV_NO_FP8,
                    unified_memory=unified,
                    source=row["sources"].strip(),
                )
            )
    return tuple(profiles)


def get_card(card_id: str) -> CardProfile | None:
    """The profile with this id (case-insensitive), or None."""
    wanted = card_id.strip().lower()
    return next((card for card in load_cards() if card.id == wanted), None)


def card_ids() -> list[str]:
    """Every profile id, for help texts and error hints."""
    return [card.id for card in load_cards()]


def _norm(name: str) -> str:
    return " ".join(name.split()).lower()


def match_card(gpu: Gpu) -> CardProfile | None:
    """The profile for a measured GPU: exact NVML name, confirmed by measured memory; else None."""
    wanted = _norm(gpu.name)
    candidates = [card for card in load_cards() if any(_norm(n) == wanted for n in card.nvml_names)]
    if not candidates and not wanted.startswith("nvidia "):
        candidates = [card for card in load_cards() if any(_norm(n) == "nvidia " + wanted for n in card.nvml_names)]
    for card in candidates:
        if card.total_mib is None or gpu.total_mib is None:
            # Unified-memory parts (GB10) have a unique name and no NVML total to compare.
            return card
        if abs(gpu.total_mib - card.total_mib) <= card.total_mib * _MEMORY_BAND:
            return card
    return None
