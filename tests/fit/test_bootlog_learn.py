"""`c3 bootlog FILE --learn SLUG (--gpus … | --card …)`: a boot log c3 did not start itself (a `docker logs`, a log from
another run) recorded as a boot of SLUG, so the next `c3 fit SLUG` on those cards prices with it (backend/fit/learned.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.fit.learned import read_store
from tests.fit.test_cli import assert_one_error, run

VLLM_LOG = Path(__file__).resolve().parents[1] / "fixtures" / "engines" / "vllm-0.32.0-cpu.boot.log"


def test_a_real_boot_log_learned_from_the_cli_prices_the_next_fit(capsys):
    code, out, err = run(capsys, "bootlog", str(VLLM_LOG), "--learn", "vllm/qwen3-8b", "--card", "rtx-3090", "--json")
    assert code == 0, err
    recorded = json.loads(out)["recorded"]
    assert recorded["slug"] == "vllm/qwen3-8b" and recorded["cards"] == ["rtx-3090"] and recorded["boots"] == 1
    assert recorded["measured"]["available_kv_gib"] == 1.0 and recorded["measured"]["kv_cache_tokens"] == 2_097_152
    code, out, _ = run(capsys, "bootlog", str(VLLM_LOG), "--learn", "vllm/qwen3-8b", "--card", "rtx-3090")
    assert code == 0 and "recorded for `c3 fit vllm/qwen3-8b` on rtx-3090: 2 boot(s) of this setup on record" in out
    code, out, _ = run(capsys, "fit", "vllm/qwen3-8b", "--card", "rtx-3090", "--json")
    data = json.loads(out)
    assert data["source"] == "learned" and data["learned"]["boots"] == 2 and data["available_kv_gib"] == 1.0


@pytest.mark.parametrize(("args", "code", "says"), [
    (("--gpus", "0"), 2, "--gpus and --card go with --learn SLUG"),
    (("--learn", "vllm/qwen3-8b"), 2, "--learn needs exactly one of --gpus and --card"),
    (("--learn", "vllm/qwen3-8b", "--card", "rtx-3090,rtx-3090"), 2, "vllm/qwen3-8b runs on 1 GPU(s)"),
    (("--learn", "vllm/no-such-slug", "--card", "rtx-3090"), 1, "no-such-slug"),
    (("--learn", "vllm/qwen3-8b", "--card", "no-such-card"), 1, "unknown card"),
])
def test_learn_refusals_are_one_line_and_record_nothing(capsys, args, code, says):
    got, _, err = run(capsys, "bootlog", str(VLLM_LOG), *args)
    assert got == code and says in assert_one_error(err)
    assert read_store()[0].boots == []


def test_a_log_without_memory_lines_records_nothing(capsys, tmp_path):
    log = tmp_path / "empty.log"
    log.write_text("INFO starting\n")
    code, _, err = run(capsys, "bootlog", str(log), "--learn", "vllm/qwen3-8b", "--card", "rtx-3090")
    assert code == 1 and "nothing recorded for vllm/qwen3-8b" in assert_one_error(err)
    assert read_store()[0].boots == []
