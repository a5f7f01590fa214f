"""Guard the fit against public boot logs: calibration rows (the constants were fitted to them) stay
within 1 GiB and never optimistic; validation rows (never fitted to) meet issue 15's bar."""

from __future__ import annotations

from pathlib import Path

import yaml

from backend.catalog.configs import load_config_file
from backend.catalog.specs import shipped_spec
from backend.fit import fit_config
from backend.fit.kvspec import kv_layout
from backend.fit.plan import Knobs, parse_version

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / "data" / "bootlogs-calibration.yaml"
VALIDATION = ROOT / "bench" / "data" / "bootlogs-validation.yaml"
GIB = 2**30


def points(kind: str, data: Path = DATA) -> list[dict]:
    return [p for p in yaml.safe_load(data.read_text())["points"] if p["kind"] == kind]


def spec_of(p: dict):
    return load_config_file(ROOT / p["config"]) if p.get("config") else shipped_spec(p["model"])


def predict(p: dict):
    """c3's report for a logged boot, from scratch (weights from weights.csv or config shapes)."""
    spec = spec_of(p)
    v = next((v for v in spec.weights if v.name == p.get("weights")), None)
    knobs = Knobs(engine=p.get("engine", "vllm"), tp=p.get("tp", 1), pp=p.get("pp", 1), util=p["util"], max_model_len=p.get("max_model_len"),
                  max_num_seqs=p.get("max_num_seqs"), max_num_batched_tokens=p.get("max_num_batched_tokens"),
                  kv_cache_dtype=p.get("kv_cache_dtype", "auto"), version=parse_version(p.get("version")),
                  weights_bytes=v.bytes if v else None, quantized=v is not None and v.name not in ("bf16", "fp16"),
                  quant_format=v.name if v else None)
    return fit_config(spec, [p["total_gib"]] * (p.get("tp", 1) * p.get("pp", 1)), knobs, gpu_name=p.get("nvml_name"), sm=p.get("sm"))


def test_every_point_cites_a_source():
    for data in (DATA, VALIDATION):
        for p in yaml.safe_load(data.read_text())["points"]:
            # issue threads, benchmark repos, blogs; a public file the search index holds without naming its
            # repository is cited by its index id and must quote the log lines it was read from
            cited = p["source"].startswith("https://") or ("index file id" in p["source"] and p.get("logline"))
            assert cited, p["id"]


# Validation rows c3 is more than 0.5 GiB optimistic on (the KNOWN_OPTIMISTIC list): none since the fifth pass. The RTX 5090 AWQ rows (v0.28.0)
# were vLLM counting its profile transient twice (tests/fit/test_profile_double_count.py); they now read 0.70-0.96
# pessimistic. Rows in a setup c3 declares it cannot price (AWQ on Marlin, vLLM v0.19-v0.26: the A10G rows) carry
# no KV claim: c3 answers `unknown` (or keeps vLLM's refusal) and bench/RESULTS.md reports them apart.
UNPRICED_SETUP = "cannot price this setup"

# Booted rows c3 still refuses, each pinned here with why (a pessimistic miss; the fix needs a term c3 cannot price yet).
# GB10, vLLM 0.13: vLLM fell back to 256/2048 batching ("max_num_batched_tokens=2048" in the log: NVML reports no
# memory total on a GB10, shared/data/cards.csv, so vllm/engine/arg_utils.py `_set_default_args` takes its except
# branch) where c3 prices the >= 70 GiB defaults (1024 sequences); with 256 the row reads +1.37 optimistic, because the
# unified-memory non-torch term (~1.8 GiB here) is unpriced. bench/RESULTS.md, issue 27.
# RTX 3090, vLLM 0.17.1, util 0.65: a knife-edge vLLM crossed both ways the same day (0.49 GiB booted, 0.41 refused against
# the 0.44 one request needs: v1-3090-qwen25-7b-8k-v0171-util065-refused); c3 prices 0.28 and refuses both.
REFUSED_BUT_BOOTED = {"v1-gb10-qwen3-30b-a3b-fp8-32k-util030", "v1-3090-qwen25-7b-8k-v0171-util065"}

# Rows c3 misses by more than 1 GiB on the pessimistic side, held out of the 1 GiB bar and pinned here: each must stay
# more than 1 GiB pessimistic, so the fix has to take it out of the set. AWQ on vLLM 0.28: overhead.py `model_runner_v2`
# prices a quantized dense checkpoint with the V1 runner's sampler plus the double count, because the RTX 5090 AWQ rows
# log 1.46 GiB of activation; these L40S/L4 boots show the lean profile (non-KV 0.88 GiB for AWQ, 0.86 for bf16), and the
# RTX 4090 cold/warm pair shows a cold torch.compile adds ~1 GiB to the peak, which would explain the 5090 rows as well.
# Moving AWQ to Model Runner V2 makes the 5090 rows +2.0 optimistic until that compile term is priced (bench/RESULTS.md).
PESSIMISTIC_PENDING = {
    "v1-l40s-qwen3-14b-awq-default-v0280", "v1-l40s-qwen3-14b-awq-tuned-1k-v0280", "v1-l4-qwen3-14b-awq-default-v0280",
    "v1-2xl4-qwen3-14b-awq-tp2-pcie-v0280", "v1-2xl4-qwen3-14b-awq-pp2-v0280",
    # vLLM 0.27-0.30 can count the profile transient twice; c3 prices that bound (overhead.py `profile_counted_twice`),
    # and this TP 2 boot did not show it (non-KV 1.66 GiB logged; c3 2.85, of which 1.05 is the bound).
    "v1-2xrtxpro6000-qwen3-32b-tp2-pcie-v0271",
}


def test_validation_rows_meet_the_bar_and_were_not_fitted():
    """Issue 15: ≥ 20 out-of-sample rows; ≥ 90 % within 1 GiB; never optimistic by more than 0.5 GiB
    where the weight size is known; where it is only estimated the verdict is never `fits`; no row
    that booted is refused."""
    full = points("full", VALIDATION)
    assert len(full) >= 20
    errors = {}
    for p in full:
        assert "fitted" not in p, p["id"]
        report = predict(p)
        errors[p["id"]] = report.available_kv_gib - p["logged"]["available_kv_gib"]
        if p["id"] in REFUSED_BUT_BOOTED:  # a known refusal stays pessimistic; fixing it must remove it from the set
            assert report.verdict == "wont-fit" and errors[p["id"]] < 0, (p["id"], report.verdict, errors[p["id"]])
        elif p.get("booted", True):
            assert report.verdict != "wont-fit" and report.available_kv_gib > 0, (p["id"], report.verdict, report.reasons)
        else:  # vLLM refused it at boot (max_model_len over the KV pool): c3 must refuse it too
            assert report.verdict == "wont-fit", (p["id"], report.verdict)
        unpriced = any(UNPRICED_SETUP in t for t in [*report.reasons, *report.notes])
        if unpriced:
            # no KV claim: the verdict is `unknown`, or vLLM's own refusal (which the unpriced gap only confirms)
            assert report.verdict == ("unknown" if p.get("booted", True) else "wont-fit"), (p["id"], report.verdict)
        elif p.get("weights"):
            assert errors[p["id"]] <= 0.5, (p["id"], errors[p["id"]])
        else:
            assert report.verdict != "fits", p["id"]
        if not p.get("version"):
            # No vLLM version logged (an image tagged `latest`): c3 prices the costliest terms of every generation
            # by rule and never says `fits`; such a row is held to "never optimistic", not to the 1 GiB bar.
            assert report.verdict != "fits" and errors[p["id"]] <= 0.5, (p["id"], report.verdict, errors[p["id"]])
    for point_id in PESSIMISTIC_PENDING:
        assert errors[point_id] < -1.0, (point_id, errors[point_id])
    versioned = {k: e for k, e in errors.items() if next(q for q in full if q["id"] == k).get("version") and k not in PESSIMISTIC_PENDING}
    within = sum(1 for e in versioned.values() if abs(e) <= 1.0)
    assert within >= 0.9 * len(versioned), versioned


def test_available_kv_is_close_and_never_optimistic_by_more_than_1_gib():
    full = points("full")
    assert len(full) >= 5
    for p in full:
        error = predict(p).available_kv_gib - p["logged"]["available_kv_gib"]
        # An `outlier:` row may miss by up to 2.1 GiB. None is left: llama33-70b-fp8-h100-tp2 (0.55 GiB non-torch
        # against 2.2 priced, −2.02) reads −0.41 since the v0.11 snapshot order is priced (tests/fit/test_tp_non_torch.py).
        floor = -2.1 if p.get("outlier") else -1.1
        assert floor <= error <= 0.25, (p["id"], error)


def test_kv_tokens_from_the_logged_budget_match_the_log():
    for p in points("kv") + points("full"):
        logged = p["logged"]
        if "kv_cache_tokens" not in logged or p["id"].startswith("qwen3-235b") or p.get("pp", 1) > 1:
            continue  # these logs' token line comes from another rank than their printed budget
        spec = spec_of(p)
        layout = kv_layout(spec, tp=p.get("tp", 1), pp=p.get("pp", 1))
        blocks = layout.num_blocks(logged["available_kv_gib"] * GIB)
        tokens = blocks // len(layout.groups) * layout.block_size
        # GiB in the log has two decimals: ±0.005 GiB of slack.
        slack = 0.005 * GIB / layout.bytes_per_token + layout.block_size
        assert abs(tokens - logged["kv_cache_tokens"]) <= slack, (p["id"], tokens)
