"""Guard the calibration: the public boot logs in bench/data stay within 1 GiB and never optimistic."""

from __future__ import annotations

from pathlib import Path

import yaml

from backend.catalog.specs import shipped_spec
from backend.fit import fit_config
from backend.fit.kvspec import kv_layout
from backend.fit.plan import Knobs, parse_version

DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "bootlogs-calibration.yaml"
GIB = 2**30


def points(kind: str) -> list[dict]:
    return [p for p in yaml.safe_load(DATA.read_text())["points"] if p["kind"] == kind]


def test_every_point_cites_a_source():
    for p in yaml.safe_load(DATA.read_text())["points"]:
        assert p["source"].startswith("https://github.com/"), p["id"]


def test_available_kv_is_close_and_never_optimistic_by_more_than_1_gib():
    full = points("full")
    assert len(full) >= 5
    for p in full:
        spec = shipped_spec(p["model"])
        v = next(v for v in spec.weights if v.name == p["weights"])
        knobs = Knobs(engine=p.get("engine", "vllm"), tp=p.get("tp", 1), util=p["util"], max_model_len=p.get("max_model_len"),
                      max_num_seqs=p.get("max_num_seqs"), max_num_batched_tokens=p.get("max_num_batched_tokens"),
                      version=parse_version(p.get("version")),
                      weights_bytes=v.bytes, quantized=v.name != "bf16")
        report = fit_config(spec, [p["total_gib"]] * p.get("tp", 1), knobs)
        error = report.available_kv_gib - p["logged"]["available_kv_gib"]
        assert -1.0 <= error <= 0.25, (p["id"], error)


def test_kv_tokens_from_the_logged_budget_match_the_log():
    for p in points("kv") + points("full"):
        logged = p["logged"]
        if "kv_cache_tokens" not in logged or p["id"].startswith("qwen3-235b"):
            continue  # the 235B log's token line comes from another rank than its printed budget
        spec = shipped_spec(p["model"])
        layout = kv_layout(spec, tp=p.get("tp", 1), pp=p.get("pp", 1))
        blocks = layout.num_blocks(logged["available_kv_gib"] * GIB)
        tokens = blocks // len(layout.groups) * layout.block_size
        # GiB in the log has two decimals: ±0.005 GiB of slack.
        slack = 0.005 * GIB / layout.bytes_per_token + layout.block_size
        assert abs(tokens - logged["kv_cache_tokens"]) <= slack, (p["id"], tokens)
