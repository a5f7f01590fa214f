"""The fit-check: will this slug (or this config.json) boot on these GPUs, and with how much KV cache?

Public API (other areas call these):
- `fit_on_gpus(entry, gpus, *, max_model_len=None)` — price a catalog entry on measured GPUs;
- `fit_on_cards(entry, card_ids, ...)` — the same on card profiles (`c3 fit SLUG --card …`);
- `fit_config(spec, totals_gib, knobs)` — any model on given CUDA totals (`c3 fit --config …`);
- `max_context_on_gpus(entry, gpus)` / `max_context_on_cards(entry, card_ids)` — the largest context that
  fits and the rank that binds (`c3 fit SLUG --max-context`, maxctx.py);
- `reservation_mib(entry, gpu)` — what the engine will claim on that GPU at boot (free-VRAM gate);
- `bootlog.parse_boot_log(text)` — read the engine's own numbers back after a boot;
- `learn_boot(entry, gpus, log_text)` — keep them for later fits of the same setup (learned.py; the fits above
  use them with `learned=True`).

Engines: vllm (vllm.py, the replayed algorithm), llamacpp (llamacpp.py), sglang (sglang.py);
custom entries cannot be priced (verdict unknown).

Verdicts: `fits` — boots and holds at least one max_model_len request with margin; `tight` — boots
on paper but within the estimate's error band (0.75 GiB of KV for vLLM), or with under 1 GiB of
physical headroom outside the budget, or a GB10 budget above what its unified memory usually has
free, or on a weight size estimated from config.json shapes (never measured); `wont-fit` — no KV memory left on some rank, or one request of max_model_len does not fit
(the largest context that does is reported); `incompatible-hw` — a GPU below the slug's required
compute capability (and its fallback), mixed architectures where the slug needs one, or a KV dtype
the card's kernels lack; `unknown` — no memory figure for a GPU, no model spec or weight size, an
architecture whose KV layout is not modelled (`ModelSpec.unpriced`), or a custom entry. CLI exit codes follow: 0 for fits/tight, 1 otherwise.
"""

from __future__ import annotations

import math
from dataclasses import replace

from backend.cards import get_card, match_card
from backend.catalog import Catalog, load_catalog
from backend.errors import Refused
from backend.fit.families import generation_note, known_misses, miss_note
from backend.fit.learned import BootRecord, apply_learned, learn_from_boot
from backend.fit.llamacpp import price_llamacpp
from backend.fit.maxctx import largest_context
from backend.fit.memory import cuda_total_gib
from backend.fit.plan import Knobs, Rank, parse_version
from backend.fit.sglang import price_sglang
from backend.fit.vllm import price_vllm
from backend.fit.weights import variant_bytes
from backend.models import CardProfile, CatalogEntry, FitReport, Gpu, MaxContext, ModelSpec
from backend.models.fit import LearnedMark

__all__ = ["fit_config", "fit_on_cards", "fit_on_gpus", "knobs_for", "learn_boot", "learn_boot_on", "max_context_on_cards", "max_context_on_gpus", "price", "rank_for_gpu", "reservation_mib"]

_QUANTISED = ("awq", "gptq", "fp8", "mxfp4", "int4", "int8", "nvfp4")


def rank_for_gpu(gpu: Gpu) -> Rank:
    """A measured GPU as the pricer sees it (profile-labelled when one matches)."""
    profile = match_card(gpu)
    total, how = cuda_total_gib(gpu, profile)
    label = profile.id if profile else f"{gpu.name} (no profile: priced from measured memory)"
    return Rank(
        total_gib=total,
        index=gpu.index,
        card=label,
        sm=gpu.sm or (profile.sm if profile else None),
        unified=bool(profile and profile.unified_memory),
        how=how,
        kv_dtypes=profile.kv_dtypes if profile else None,
        nvswitch=_on_nvswitch(profile),
        nvml_name=gpu.name,
        nvml_total_gib=gpu.total_mib / 1024 if gpu.total_mib else None,
    )


# HGX/SXM boards: every GPU sits on NVSwitch (NCCL's NVLS buffers show up as non-torch memory).
_NVSWITCH_CARDS = frozenset({"a100-40gb-sxm", "a100-80gb-sxm", "h100-sxm", "h200", "b200"})


def _on_nvswitch(profile: CardProfile | None) -> bool | None:
    """True on an HGX/SXM board, False on a known PCIe/workstation card, None without a profile."""
    if profile is None:
        return None
    return profile.id in _NVSWITCH_CARDS


def rank_for_card(card_id: str) -> Rank:
    """A card profile as a rank (its logged CUDA total, else NVML total − the family reserve)."""
    profile = get_card(card_id)
    if profile is None:
        from backend.cards import card_ids

        raise Refused(f"unknown card `{card_id}`", hint=f"known cards: {', '.join(card_ids())}")
    gpu = Gpu(index=0, uuid=f"GPU-card-{profile.id}", name=profile.nvml_names[0], total_mib=profile.total_mib, sm=profile.sm)
    total, how = cuda_total_gib(gpu, profile)
    return Rank(total_gib=total, index=None, card=profile.id, sm=profile.sm, unified=profile.unified_memory, how=how, kv_dtypes=profile.kv_dtypes,
                nvswitch=_on_nvswitch(profile), nvml_name=profile.nvml_names[0], nvml_total_gib=profile.total_mib / 1024 if profile.total_mib else None)


def _env_flag(value: str | None) -> bool | None:
    """vLLM's boolean env parsing (`"1"`/`"true"` on, `"0"`/`"false"` off); None when unset."""
    if value is None:
        return None
    return value.strip().lower() in ("1", "true")


def knobs_for(entry: CatalogEntry, spec: ModelSpec | None, *, max_model_len: int | None = None) -> Knobs:
    """The engine knobs a catalog entry boots with."""
    weights_bytes, how = variant_bytes(spec, entry)
    if entry.weights_bytes:
        weights_bytes, how = entry.weights_bytes, f"{entry.slug} weights_bytes"
    variant = (entry.weights or "").lower()
    return Knobs(
        engine=entry.engine,
        tp=entry.tp,
        pp=entry.pp,
        util=entry.gpu_memory_utilization,
        max_model_len=max_model_len or entry.max_model_len,
        max_num_seqs=entry.max_num_seqs,
        max_num_batched_tokens=entry.max_num_batched_tokens,
        kv_cache_dtype=entry.kv_cache_dtype,
        block_size=entry.block_size,
        enforce_eager=entry.enforce_eager,
        version=parse_version(entry.engine_version) or parse_version(entry.image),
        extra_args=tuple(entry.extra_args or ()),
        hybrid_kv_env=_env_flag((entry.env or {}).get("VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE")),
        weights_bytes=weights_bytes,
        weights_how=how,
        quantized=any(q in variant for q in _QUANTISED),
        quant_format=variant or None,
        required_sm=entry.required_sm,
        fallback_sm=entry.fallback_sm,
        requires_homogeneous_arch=entry.requires_homogeneous_arch,
    )


def price(spec: ModelSpec, ranks: list[Rank], knobs: Knobs) -> FitReport:
    """Dispatch to the engine's own rules; a `fits` that rests on estimated weights becomes `tight`."""
    if knobs.engine == "llamacpp":
        report = price_llamacpp(spec, ranks, knobs)
    elif knobs.engine == "sglang":
        report = price_sglang(spec, ranks, knobs)
    else:
        report = price_vllm(spec, ranks, knobs)
        if (misses := known_misses(spec, knobs, ranks)) and report.verdict in ("fits", "tight", "wont-fit"):
            report = report.model_copy(update={"notes": [*report.notes, *(miss_note(m) for m in misses)]})
    if report.verdict == "fits" and knobs.weights_gib is None and knobs.weights_how.startswith("estimated"):
        # Config-shape counts can miss what an engine loads besides the counted tensors (before the
        # rotary cache and the vision tower were counted, Llama-4-Scout at TP 4 was 2.8 GiB short of
        # the 53.1 GiB per rank vLLM logged), so the weights term is not known well enough for `fits`.
        reason = "weights estimated from config.json shapes, not measured: pass --weights-gib (vLLM's `Model loading took`) for a firm verdict"
        return report.model_copy(update={"verdict": "tight", "reasons": [reason, *report.reasons]})
    if report.verdict == "fits" and knobs.engine == "vllm" and knobs.version is None:
        # The activation, non-torch and CUDA-graph terms changed with vLLM's profiler from release to
        # release; without a version they are priced at their costliest, but which release's rules hold
        # (V0 fallback, the v0.27-v0.30 double count, Model Runner V2) is then a guess.
        reason = "vLLM version unknown: its profiler's terms changed between releases; pass --engine-version (or pin the image tag) for a firm verdict"
        return report.model_copy(update={"verdict": "tight", "reasons": [reason, *report.reasons]})
    return report


def _entry_spec(entry: CatalogEntry, ranks: list[Rank], catalog: Catalog | None) -> ModelSpec | FitReport:
    """The model spec to price `entry` with, or the `unknown` report when there is none."""
    if entry.engine == "custom":
        return FitReport(verdict="unknown", engine="custom", reasons=["custom entries carry no model spec: c3 cannot price them"])
    if len(ranks) != entry.gpu_count:
        raise Refused(
            f"{entry.slug} needs {entry.gpu_count} GPU(s) (tp {entry.tp} × pp {entry.pp}); got {len(ranks)}",
            hint=f"give exactly {entry.gpu_count} GPU index(es) or card id(s)",
        )
    spec = (catalog or load_catalog()).model_for(entry)
    if spec is None:
        return FitReport(verdict="unknown", engine=entry.engine, reasons=[f"no config.json known for {entry.model}"])
    return spec


def _fit_entry(entry: CatalogEntry, ranks: list[Rank], *, max_model_len: int | None, catalog: Catalog | None, learned: bool = False) -> FitReport:
    spec = _entry_spec(entry, ranks, catalog)
    if isinstance(spec, FitReport):
        return spec
    knobs = knobs_for(entry, spec, max_model_len=max_model_len)
    mark: LearnedMark | None = None
    extra: list[str] = []
    if learned:
        knobs, mark, extra = apply_learned(entry, spec, ranks, knobs)
    return _price_entry(entry, spec, ranks, knobs, mark=mark, learned_notes=extra)


def _price_entry(entry: CatalogEntry, spec: ModelSpec, ranks: list[Rank], knobs: Knobs, *, mark: LearnedMark | None = None,
                 learned_notes: list[str] | None = None) -> FitReport:
    report = price(spec, ranks, knobs)
    notes = list(learned_notes or []) + list(report.notes) + [f"weights: {knobs.weights_how}"]
    source = f"engine_version {entry.engine_version}" if entry.engine_version else f"the image tag {entry.image}"
    if (generation := generation_note(entry.engine, knobs.version, source)) is not None:
        notes.append(generation)
    notes += [f"rank {i} ({r.card}): total {r.total_gib:.2f} GiB from {r.how}" for i, r in enumerate(ranks) if r.total_gib is not None]
    if entry.status in ("experimental", "deprecated"):
        notes.append(f"status {entry.status}: {entry.status_note or 'boots only with --force'}")
    update: dict[str, object] = {"notes": notes}
    if mark is not None:
        update.update(source="learned", learned=mark)
    return report.model_copy(update=update)


def fit_on_gpus(entry: CatalogEntry, gpus: list[Gpu], *, max_model_len: int | None = None, catalog: Catalog | None = None,
                learned: bool = False) -> FitReport:
    """Price `entry` on measured GPUs (one rank per GPU, in the order given); `learned`: with this rig's recorded
    boots of the same setup where there are some (learned.py)."""
    return _fit_entry(entry, [rank_for_gpu(g) for g in gpus], max_model_len=max_model_len, catalog=catalog, learned=learned)


def fit_on_cards(entry: CatalogEntry, card_ids: list[str], *, max_model_len: int | None = None, catalog: Catalog | None = None,
                 learned: bool = False) -> FitReport:
    """Price `entry` on card profiles (`--card rtx-3090,rtx-5090`)."""
    return _fit_entry(entry, [rank_for_card(c) for c in card_ids], max_model_len=max_model_len, catalog=catalog, learned=learned)


def _max_context_entry(entry: CatalogEntry, ranks: list[Rank], catalog: Catalog | None, learned: bool) -> tuple[MaxContext, FitReport]:
    spec = _entry_spec(entry, ranks, catalog)
    if isinstance(spec, FitReport):
        raise Refused(f"--max-context: {entry.slug}: {spec.reasons[0]}")
    knobs = knobs_for(entry, spec)
    mark: LearnedMark | None = None
    extra: list[str] = []
    if learned:
        knobs, mark, extra = apply_learned(entry, spec, ranks, knobs)
    return largest_context(lambda length: _price_entry(entry, spec, ranks, replace(knobs, max_model_len=length), mark=mark, learned_notes=extra),
                           model_max=spec.max_position_embeddings, knobs=knobs)


def max_context_on_gpus(entry: CatalogEntry, gpus: list[Gpu], *, catalog: Catalog | None = None, learned: bool = False) -> tuple[MaxContext, FitReport]:
    """The largest context `entry` holds on measured GPUs, and the fit priced at it (`c3 fit SLUG --gpus … --max-context`)."""
    return _max_context_entry(entry, [rank_for_gpu(g) for g in gpus], catalog, learned)


def max_context_on_cards(entry: CatalogEntry, card_ids: list[str], *, catalog: Catalog | None = None, learned: bool = False) -> tuple[MaxContext, FitReport]:
    """The same on card profiles (`--card rtx-3090,rtx-5090`)."""
    return _max_context_entry(entry, [rank_for_card(c) for c in card_ids], catalog, learned)


def fit_config(spec: ModelSpec, totals_gib: list[float], knobs: Knobs, *, gpu_name: str | None = None, sm: str | None = None) -> FitReport:
    """Price any model on CUDA totals given in GiB (`c3 fit --config`); `gpu_name` is the NVML name
    when known (vLLM's batch defaults and the interconnect depend on it), `sm` its compute capability
    (else the matched card profile's; v0.8–v0.9 fall back to V0 below 8.0)."""
    profile = match_card(Gpu(index=0, uuid="GPU-config", name=gpu_name, total_mib=None)) if gpu_name else None
    sm = sm or (profile.sm if profile else None)
    unified = bool(profile and profile.unified_memory)
    ranks = [Rank(total_gib=t, card=f"{t:g} GiB", sm=sm, unified=unified, nvml_name=gpu_name, nvswitch=_on_nvswitch(profile)) for t in totals_gib]
    if knobs.weights_bytes is None and knobs.weights_gib is None:
        from backend.catalog.params import estimated_weight_bytes

        knobs = replace(knobs, weights_bytes=estimated_weight_bytes(spec), weights_how="estimated from config.json shapes (params × dtype)")
    report = price(spec, ranks, knobs)
    how = f"weights: {knobs.weights_how}" if knobs.weights_gib is None else f"weights: {knobs.weights_gib:g} GiB per rank (given)"
    return report.model_copy(update={"notes": list(report.notes) + [how]})


def reservation_mib(entry: CatalogEntry, gpu: Gpu) -> int | None:
    """MiB the engine claims on `gpu` at boot, for the free-VRAM gate; None when c3 cannot tell.

    vLLM: `ceil(cuda_total × gpu_memory_utilization)` (its start-up check); SGLang: the same with
    mem_fraction_static; llama.cpp: its predicted footprint on this GPU (weights share + KV + compute
    + context) — priced as if the GPU were one of `tp` equal cards.
    """
    if entry.engine == "custom":
        return None
    rank = rank_for_gpu(gpu)
    if rank.total_gib is None:
        return None
    total_mib = rank.total_gib * 1024
    if entry.engine in ("vllm", "sglang"):
        return math.ceil(total_mib * entry.gpu_memory_utilization)
    try:
        report = _fit_entry(entry, [rank] * entry.gpu_count, max_model_len=None, catalog=None)
    except Refused:
        return None
    if not report.gpus or report.kv_bytes_per_token is None:
        return None
    g = report.gpus[-1]
    used = g.weights_gib + g.activation_gib + g.non_torch_gib
    kv_share = (report.max_model_len or 0) * report.kv_bytes_per_token / (1024**3) / max(1, entry.gpu_count)
    return math.ceil((used + kv_share) * 1024)


def learn_boot(entry: CatalogEntry, gpus: list[Gpu], log_text: str, *, pod: str = "", catalog: Catalog | None = None) -> tuple[BootRecord | None, str | None]:
    """Record what a pod's boot log measured next to what c3 predicts for it (learned.py): the record (None when
    the log measured nothing, or the entry cannot be priced) and the warning of a store that had to be replaced."""
    return learn_boot_on(entry, [rank_for_gpu(g) for g in gpus], log_text, pod=pod, catalog=catalog)


def learn_boot_on(entry: CatalogEntry, ranks: list[Rank], log_text: str, *, pod: str = "", catalog: Catalog | None = None,
                  ) -> tuple[BootRecord | None, str | None]:
    """`learn_boot` on ranks as the pricer sees them (`rank_for_gpu`, `rank_for_card`)."""
    if entry.engine == "custom" or len(ranks) != entry.gpu_count:
        return None, None
    spec = (catalog or load_catalog()).model_for(entry)
    if spec is None:
        return None, None
    knobs = knobs_for(entry, spec)
    return learn_from_boot(entry, spec, ranks, knobs, log_text, pod=pod, predicted=_price_entry(entry, spec, ranks, knobs))
