"""Card profiles: exact-name matching confirmed by measured memory; CUDA totals."""

from __future__ import annotations

import pytest

from backend.cards import card_ids, get_card, load_cards, match_card
from backend.fit.memory import cuda_total_gib
from backend.models import Gpu

REQUIRED = [
    "rtx-3060-12gb", "rtx-3090", "rtx-3090-ti", "rtx-4090", "rtx-5090", "rtx-a5000", "rtx-a6000", "rtx-6000-ada",
    "rtx-pro-6000-bw", "l40s", "a100-40gb-sxm", "a100-80gb-sxm", "h100-sxm", "h200", "gb10",
]


def gpu(name: str, total: int | None, sm: str | None = None, reserved: int | None = None) -> Gpu:
    return Gpu(index=0, uuid="GPU-test", name=name, total_mib=total, sm=sm, reserved_mib=reserved)


def test_required_profiles_exist_with_sources():
    ids = card_ids()
    for card_id in REQUIRED:
        assert card_id in ids
        assert get_card(card_id).source
    assert all(card.sm for card in load_cards())


@pytest.mark.parametrize(
    "name, total, expected",
    [
        ("NVIDIA GeForce RTX 3090", 24576, "rtx-3090"),
        ("NVIDIA GeForce RTX 3090 Ti", 24564, "rtx-3090-ti"),
        ("NVIDIA A100-SXM4-80GB", 81920, "a100-80gb-sxm"),
        ("NVIDIA A10", 23028, "a10"),
        ("NVIDIA L4", 23034, "l4"),
        ("NVIDIA L40S", 46068, "l40s"),
        ("NVIDIA H100 80GB HBM3", 81559, "h100-sxm"),
        ("NVIDIA H200", 143771, "h200"),
        ("NVIDIA RTX A6000", 46068, "rtx-a6000"),  # ECC on: 1/16 less, still the same card
        ("nvidia geforce rtx 4090", 24564, "rtx-4090"),
        ("GeForce RTX 5090", 32607, "rtx-5090"),
    ],
)
def test_exact_names_match(name, total, expected):
    assert match_card(gpu(name, total)).id == expected


@pytest.mark.parametrize(
    "name, total",
    [
        ("NVIDIA GeForce RTX 3060", 8192),  # the 8 GB desktop card shares the 12 GB card's name
        ("NVIDIA GeForce RTX 4090 Laptop GPU", 16376),
        ("NVIDIA A10G", 23028),
        ("NVIDIA H100", 81559),  # a prefix of three different cards
        ("NVIDIA RTX 6000", 49140),
        ("NVIDIA GeForce RTX 30", 24576),
        ("Quadro RTX 6000", 24576),
    ],
)
def test_no_prefix_or_substring_matches(name, total):
    assert match_card(gpu(name, total)) is None


def test_gb10_has_no_nvml_memory_and_uses_the_logged_cuda_total():
    spark = gpu("NVIDIA GB10", None, "12.1")
    profile = match_card(spark)
    assert profile.id == "gb10" and profile.unified_memory
    total, how = cuda_total_gib(spark, profile)
    assert total == 121.69 and "unified" in how


def test_cuda_total_prefers_nvml_reserved_then_profile_then_family_estimate():
    exact = gpu("NVIDIA GeForce RTX 3090", 24576, "8.6", reserved=422)
    assert cuda_total_gib(exact, match_card(exact))[0] == pytest.approx((24576 - 422) / 1024)
    logged = gpu("NVIDIA GeForce RTX 5090", 32607, "12.0")
    assert cuda_total_gib(logged, match_card(logged))[0] == 31.37
    unknown = gpu("NVIDIA Future Card", 65536, "9.0")
    total, how = cuda_total_gib(unknown, None)
    assert total == pytest.approx((65536 - 720) / 1024) and "estimated" in how
    assert cuda_total_gib(gpu("NVIDIA Mystery", None), None)[0] is None
