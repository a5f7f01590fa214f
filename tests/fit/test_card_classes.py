"""The validation set by card size (issue 27: "more out-of-sample rows on the cards users have"): every class the
bench reports (bench/fit_accuracy.py `card_class`) holds rows, the 94-96 GB class included, and the KV arithmetic of
the RTX PRO 6000 row matches its log from the logged budget."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from backend.fit.kvspec import kv_layout
from tests.fit.rows import boot_row
from tests.fit.test_accuracy import predict, spec_of

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30
sys.path.insert(0, str(ROOT / "bench"))
from fit_accuracy import card_class  # noqa: E402


def test_every_card_size_has_validation_rows():
    points = yaml.safe_load((ROOT / "bench" / "data" / "bootlogs-validation.yaml").read_text())["points"]
    classes = {card_class(p) for p in points if p["kind"] == "full"}
    assert {"24 GB", "32 GB", "40-48 GB", "80 GB", "94-96 GB", "unified"} <= classes, classes


def test_the_rtx_pro_6000_tp4_row_matches_its_log():
    row = boot_row("v1-4xrtxpro6000-qwen3-235b-fp8-tp4")
    layout = kv_layout(spec_of(row), tp=4)
    assert layout.bytes_per_token == 48_128  # the write-up's "47 KiB per token per card"
    tokens = layout.num_blocks(row["logged"]["available_kv_gib"] * GIB) * layout.block_size
    slack = 0.005 * GIB / layout.bytes_per_token + layout.block_size  # the log's two decimals
    assert abs(tokens - row["logged"]["kv_cache_tokens"]) <= slack, tokens
    report = predict(row)
    # no vLLM version (image `latest`): the costliest terms, never `fits`, never optimistic
    assert report.verdict == "tight" and report.available_kv_gib <= row["logged"]["available_kv_gib"]


def test_the_bench_prints_a_line_per_card_size():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "fit_accuracy.py")], capture_output=True, text=True, check=True).stdout
    for name in ("24 GB", "32 GB", "40-48 GB", "80 GB", "94-96 GB", "unified"):
        assert f"[validation] {name:<9}" in out, name
