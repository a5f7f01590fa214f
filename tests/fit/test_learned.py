"""A fit that learns from every boot (backend/fit/learned.py): the engine's own boot log feeds a bounded store under
$C3_STATE, and the next fit of the same setup prices with what was measured — and says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.catalog import load_catalog
from backend.fit import fit_on_cards, knobs_for, learn_boot, rank_for_card
from backend.fit import learned as learned_mod
from backend.fit.learned import learn_from_boot, read_store, store_path
from backend.models.fit import LearnedMark

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engines"
ROOT = Path(__file__).resolve().parents[2]
TODAY = datetime.now(UTC).date().isoformat()


def gpu_log(weights: float, kv: float, tokens: int, version: str = "0.27.1") -> str:
    """vLLM V1 boot lines as a real engine prints them (prefixes and all)."""
    return "\n".join([
        f"(APIServer pid=1) INFO 12-07 05:00:00 [api_server.py:1885] vLLM API server version {version}",
        f"(EngineCore_DP0 pid=2) INFO 12-07 05:00:20 [gpu_model_runner.py:2653] Model loading took {weights:.4f} GiB and 9.1 seconds",
        f"(EngineCore_DP0 pid=2) INFO 12-07 05:00:40 [gpu_worker.py:298] Available KV cache memory: {kv:.2f} GiB",
        f"(EngineCore_DP0 pid=2) INFO 12-07 05:00:40 [kv_cache_utils.py:1087] GPU KV cache size: {tokens:,} tokens",
        f"(EngineCore_DP0 pid=2) INFO 12-07 05:00:40 [kv_cache_utils.py:1091] Maximum concurrency for 16,384 tokens per request: {tokens / 16384:.2f}x",
    ])


def setup(slug: str = "vllm/qwen3-8b", card: str = "rtx-3090"):
    catalog = load_catalog()
    entry = catalog.get(slug)
    spec = catalog.model_for(entry)
    ranks = [rank_for_card(card)] * entry.gpu_count
    return entry, spec, ranks, knobs_for(entry, spec)


def test_a_real_vllm_boot_log_feeds_the_store_and_the_next_fit_uses_it():
    entry, spec, ranks, knobs = setup()
    predicted = fit_on_cards(entry, ["rtx-3090"])
    assert predicted.source == "predicted" and predicted.learned is None and predicted.available_kv_gib != 1.0
    rec, warning = learn_from_boot(entry, spec, ranks, knobs, (FIXTURES / "vllm-0.32.0-cpu.boot.log").read_text(), pod="chat", predicted=predicted)
    assert warning is None and rec is not None
    assert rec.measured.engine_version == "0.32.0" and rec.measured.available_kv_gib == 1.0
    assert rec.measured.kv_cache_tokens == 2_097_152 and rec.measured.max_model_len == 2048 and rec.measured.kv_device == "CPU"
    assert rec.predicted is not None and rec.predicted.available_kv_gib == predicted.available_kv_gib
    assert rec.cards == ["rtx-3090"] and (rec.tp, rec.pp) == (1, 1) and rec.build == entry.image
    stored = json.loads(store_path().read_text())
    assert [b["pod"] for b in stored["boots"]] == ["chat"] and oct(store_path().stat().st_mode & 0o777) == "0o600"
    fit = fit_on_cards(entry, ["rtx-3090"], learned=True)
    assert fit.source == "learned" and fit.learned is not None and fit.learned.boots == 1
    assert fit.learned.summary == f"learned from 1 boot on {TODAY}"
    assert fit.available_kv_gib == 1.0 and fit.gpus[0].available_kv_gib == 1.0
    assert any(n.startswith(f"learned from 1 boot on {TODAY}") for n in fit.notes)
    # The fixture's engine logged 0.32.0; the slug pins v0.27.1: a rolling or re-tagged image is said, not hidden.
    assert "warning: the last boot's engine logged version 0.32.0, but the slug is priced as 0.27" in " ".join(fit.notes)
    # Not asked for (internal checks, --no-learned), or another card / parallelism: the prediction.
    assert fit_on_cards(entry, ["rtx-3090"]).source == "predicted"
    assert fit_on_cards(entry, ["rtx-4090"], learned=True).source == "predicted"


def test_a_real_llama_server_boot_log_is_recorded_but_cannot_make_a_big_model_optimistic():
    entry, spec, ranks, knobs = setup("llamacpp/qwen3-8b-q4km")
    rec, _ = learn_from_boot(entry, spec, ranks, knobs, (FIXTURES / "llama-server-0.3.36.boot.log").read_text())
    assert rec is not None and rec.engine == "llamacpp" and rec.measured.kv_device == "CPU"
    assert rec.measured.weights_gib == pytest.approx(1.06 / 1024) and rec.measured.kv_mib == 2.0
    assert rec.measured.compute_gib == pytest.approx(4.01 / 1024)
    # The tiny GGUF's 1 MiB of weights under this 4.7 GiB slug's key is not believed: a store cannot make a fit optimistic.
    fit = fit_on_cards(entry, ["rtx-3090"], learned=True)
    assert fit.source == "predicted" and fit.gpus[0].weights_gib > 4
    assert any("ignored: weights 0.00 GiB are under 90% of the checkpoint's" in n for n in fit.notes)


def test_llama_cpp_measured_buffers_price_the_next_fit():
    entry, spec, ranks, knobs = setup("llamacpp/qwen3-8b-q4km")
    log = "load_tensors:        CUDA0 model buffer size =  4788.50 MiB\nllama_kv_cache:      CUDA0 KV buffer size =  4608.00 MiB\n" \
          "sched_reserve:      CUDA0 compute buffer size =   912.00 MiB\n"
    learn_from_boot(entry, spec, ranks, knobs, log)
    fit = fit_on_cards(entry, ["rtx-3090"], learned=True)
    assert fit.source == "learned"
    assert fit.gpus[0].weights_gib == pytest.approx(4788.5 / 1024, abs=1e-3) and fit.gpus[0].activation_gib == pytest.approx(912 / 1024, abs=1e-3)


def test_a_second_boot_is_predicted_within_a_quarter_gib_of_the_first_boots_log():
    entry, spec, ranks, knobs = setup()
    learn_from_boot(entry, spec, ranks, knobs, gpu_log(15.2676, 5.31, 38_656))
    fit = fit_on_cards(entry, ["rtx-3090"], learned=True)
    assert abs(fit.available_kv_gib - 5.31) <= 0.25 and abs(fit.gpus[0].weights_gib - 15.2676) <= 0.25
    assert fit.learned is not None and fit.learned.boots == 1
    # Several boots of the key: the most pessimistic one prices, and each is counted.
    learn_from_boot(entry, spec, ranks, knobs, gpu_log(15.2676, 5.02, 36_528))
    learn_from_boot(entry, spec, ranks, knobs, gpu_log(15.2676, 5.40, 39_312))
    fit = fit_on_cards(entry, ["rtx-3090"], learned=True)
    assert fit.available_kv_gib == 5.02 and fit.learned is not None and fit.learned.summary == f"learned from 3 boots on {TODAY}"


@pytest.mark.parametrize(("weights", "kv", "why"), [
    (15.2676, 19.0, "exceeds the"),  # more KV than the budget leaves beside the weights
    (3.0, 5.0, "are under 90% of the checkpoint's"),  # weights far under the checkpoint's bytes
])
def test_a_hostile_store_cannot_make_a_fit_optimistic(weights, kv, why):
    entry, spec, ranks, knobs = setup()
    learn_from_boot(entry, spec, ranks, knobs, gpu_log(weights, kv, 100_000))
    fit = fit_on_cards(entry, ["rtx-3090"], learned=True)
    assert fit.source == "predicted" and fit.available_kv_gib == fit_on_cards(entry, ["rtx-3090"]).available_kv_gib
    assert any(why in n for n in fit.notes), fit.notes


HOSTILE_DATE = json.dumps({"boots": [{"key": "k", "recorded_at": "\u001b[2Jnot a date", "slug": "s", "engine": "vllm", "build": "b", "model": "m",
                                     "config_hash": "c", "cards": [], "tp": 1, "pp": 1, "flags": "f", "measured": {}}]}).encode()


@pytest.mark.parametrize("content", [b"{not json", b"\xff\xfe", b'{"version": 7, "boots": []}', b'{"boots": [{"key": 1}]}', b"[]", HOSTILE_DATE])
def test_a_corrupt_store_is_one_warning_and_the_next_boot_replaces_it(content):
    path = store_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    entry, spec, ranks, knobs = setup()
    fit = fit_on_cards(entry, ["rtx-3090"], learned=True)
    warnings = [n for n in fit.notes if n.startswith("warning: fit store")]
    assert fit.source == "predicted" and len(warnings) == 1 and "ignored" in warnings[0]
    rec, warning = learn_from_boot(entry, spec, ranks, knobs, gpu_log(15.2676, 5.31, 38_656))
    assert rec is not None and warning is not None and "ignored" in warning
    store, problem = read_store()
    assert problem is None and len(store.boots) == 1


def test_a_fifo_or_oversized_store_never_hangs_or_crashes(monkeypatch):
    path = store_path()
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    store, warning = read_store()
    assert store.boots == [] and warning is not None and "FIFO" in warning
    path.unlink()
    monkeypatch.setattr(learned_mod, "STORE_LIMIT", 64)
    path.write_text(json.dumps({"version": 1, "boots": []}) + " " * 100)
    assert "larger" in (read_store()[1] or "") or "too large" in (read_store()[1] or "")


def test_the_store_is_bounded(monkeypatch):
    monkeypatch.setattr(learned_mod, "MAX_BOOTS", 5)
    monkeypatch.setattr(learned_mod, "KEEP_PER_KEY", 3)
    entry, spec, ranks, knobs = setup()
    for i in range(4):
        learn_from_boot(entry, spec, ranks, knobs, gpu_log(15.2676, 5.0 + i / 10, 38_000), pod=f"a{i}")
    assert [b.pod for b in read_store()[0].boots] == ["a1", "a2", "a3"]  # three per key, the oldest dropped
    other = setup(card="rtx-4090")
    for i in range(4):
        learn_from_boot(*other, gpu_log(15.2676, 8.0, 60_000), pod=f"b{i}")
    assert [b.pod for b in read_store()[0].boots] == ["a2", "a3", "b1", "b2", "b3"]  # five in all


def test_learn_boot_skips_what_it_cannot_price_and_logs_without_figures():
    catalog = load_catalog()
    from backend.models import Gpu

    gpu = Gpu(index=0, uuid="GPU-x", name="NVIDIA GeForce RTX 3090", total_mib=24576, sm="8.6")
    assert learn_boot(catalog.get("vllm/qwen3-8b"), [gpu], "nothing the engine measured\n") == (None, None)
    rec, _ = learn_boot(catalog.get("vllm/qwen3-8b"), [gpu], gpu_log(15.2676, 5.31, 38_656), pod="chat")
    assert rec is not None and rec.cards == ["rtx-3090"] and rec.predicted is not None and rec.predicted.verdict in ("fits", "tight")
    assert not store_path().with_suffix(".json.tmp").exists()


def c3(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "c3", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_c3_fit_says_learned_in_text_and_json_and_no_learned_ignores_it():
    entry, spec, ranks, knobs = setup()
    learn_from_boot(entry, spec, ranks, knobs, gpu_log(15.2676, 5.31, 38_656))
    text = c3("fit", "vllm/qwen3-8b", "--card", "rtx-3090")
    assert text.returncode == 0, text.stderr
    assert f"measured on this rig: learned from 1 boot on {TODAY} (--no-learned for c3's prediction)" in text.stdout
    data = json.loads(c3("fit", "vllm/qwen3-8b", "--card", "rtx-3090", "--json").stdout)
    assert data["source"] == "learned" and data["learned"] == {"boots": 1, "last": TODAY, "summary": f"learned from 1 boot on {TODAY}",
                                                               "off_by_gib": None, "flagged": False}
    assert list(data["learned"]) == ["boots", "last", "summary", "off_by_gib", "flagged"]  # the documented order
    assert data["available_kv_gib"] == 5.31
    plain = json.loads(c3("fit", "vllm/qwen3-8b", "--card", "rtx-3090", "--json", "--no-learned").stdout)
    assert plain["source"] == "predicted" and plain["learned"] is None and plain["available_kv_gib"] != 5.31
    assert "learned from" not in c3("fit", "vllm/qwen3-8b", "--card", "rtx-3090", "--no-learned").stdout
    both = c3("fit", "--config", str(ROOT / "backend/catalog/models/Qwen__Qwen3-8B.config.json"), "--vram-gib", "23.56", "--tp", "1", "--no-learned")
    assert both.returncode == 2 and "c3: error: --no-learned goes with a SLUG" in both.stderr and "Traceback" not in both.stderr


def test_the_cockpit_fit_carries_the_mark():
    from widgets.fit_breakdown import fit_lines

    entry, spec, ranks, knobs = setup()
    assert "measured on this rig" not in fit_lines(fit_on_cards(entry, ["rtx-3090"], learned=True)).plain
    learn_from_boot(entry, spec, ranks, knobs, gpu_log(15.2676, 5.31, 38_656))
    assert f"measured on this rig: learned from 1 boot on {TODAY}" in fit_lines(fit_on_cards(entry, ["rtx-3090"], learned=True)).plain


@pytest.mark.parametrize(("kv", "flagged"), [(5.31, True), (4.70, False), (3.90, True)])
def test_a_boot_far_from_the_prediction_is_flagged(capsys, kv, flagged):
    """More than 0.5 GiB between the boot's KV memory and c3's prediction for it: `c3 fit` and the cockpit say so."""
    from widgets.fit_breakdown import fit_lines

    entry, spec, ranks, knobs = setup()
    predicted = fit_on_cards(entry, ["rtx-3090"])
    learn_from_boot(entry, spec, ranks, knobs, gpu_log(15.2676, kv, 38_656), predicted=predicted)
    fit = fit_on_cards(entry, ["rtx-3090"], learned=True)
    assert fit.learned is not None and fit.learned.off_by_gib == round(kv - predicted.available_kv_gib, 2)
    assert fit.learned.flagged is flagged
    line = f"the last boot's KV memory landed {kv - predicted.available_kv_gib:+.2f} GiB from c3's prediction"
    assert (line in fit_lines(fit).plain) is flagged
    text = c3("fit", "vllm/qwen3-8b", "--card", "rtx-3090").stdout
    assert (line in text) is flagged, text


def test_the_summary_is_derived_from_boots_and_last():
    # It cannot disagree with them: nobody writes it, and the JSON keeps its documented place (third).
    two = LearnedMark(boots=2, last="2026-01-02", off_by_gib=0.3)
    assert two.summary == "learned from 2 boots on 2026-01-02" and LearnedMark(boots=1, last="2026-01-02").summary == "learned from 1 boot on 2026-01-02"
    assert list(json.loads(two.model_dump_json())) == list(two.model_dump()) == ["boots", "last", "summary", "off_by_gib", "flagged"]
    assert json.loads(two.model_dump_json())["summary"] == two.summary
