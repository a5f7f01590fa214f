"""Slugs ranked by fit rank by what fits — the KV memory left for context and requests — and a `tight`
that comes from the estimate's uncertainty does not demote: on the demo's RTX 3090 the AWQ Qwen3-8B
leaves 13.9 GiB of KV (`tight`: Marlin padding is not priced), the BF16 one 4.6 GiB (`fits`)."""

from __future__ import annotations

from backend.views.fit import catalog_rows, fit_rank


def test_headroom_ranks_and_tight_does_not_demote():
    awq, bf16 = fit_rank("tight", 13.89), fit_rank("fits", 4.60)
    assert awq < bf16
    assert fit_rank("fits", 0.5) < fit_rank("unknown", None) < fit_rank("wont-fit", 30.0) < fit_rank("too-few", None) < fit_rank("incompatible-hw", None)
    assert fit_rank("tight", 0.2) > fit_rank("fits", 4.6)  # a thin margin is little KV left: it ranks low by that alone


def test_the_demo_rigs_awq_slug_ranks_above_the_bf16_one(monkeypatch):
    monkeypatch.setenv("C3_RIG", "demo")
    rows = {r.slug: r for r in catalog_rows(fits_on=[1])}
    awq, bf16 = rows["vllm/qwen3-8b-awq"], rows["vllm/qwen3-8b"]
    assert (awq.verdict, round(awq.available_kv_gib, 1)) == ("tight", 13.9)
    assert (bf16.verdict, round(bf16.available_kv_gib, 1)) == ("fits", 4.6)
    ranked = sorted(rows.values(), key=lambda r: (*fit_rank(r.verdict, r.available_kv_gib), r.slug))
    order = [r.slug for r in ranked]
    assert order.index("vllm/qwen3-8b-awq") < order.index("vllm/qwen3-8b")
    assert all(r.verdict in ("fits", "tight") for r in ranked[: order.index("vllm/qwen3-8b") + 1])
