"""`c3 pod status` carries each serving pod's engine metrics, read from the stub engine's real /metrics
over loopback on the simulated runtime (one scrape: counters and gauges, rates null)."""

from __future__ import annotations

import httpx

from tests.runtime.helpers import c3, c3_json, free_port, stub_entry, write_catalog
from tests.runtime.test_sim_lifecycle import sim  # noqa: F401 — the simulated 4-GPU rig fixture


def test_pod_status_json_and_text_show_the_engines_own_metrics(sim):
    write_catalog([stub_entry()])
    port = free_port()
    assert c3("pod", "create", "chat", "--gpus", "1", "--slug", "custom/stub", "--port", str(port), "--force").returncode == 0
    sim.append("chat")
    (row,) = c3_json("pod", "status")["pods"]
    assert row["metrics"] is None and row["metrics_error"] is None  # not running: not scraped
    up = c3("pod", "up", "chat")
    assert up.returncode == 0, up.stdout + up.stderr
    reply = httpx.post(f"http://127.0.0.1:{port}/v1/completions", json={"model": "stub/model", "prompt": "hello there", "max_tokens": 7}, timeout=10)
    assert reply.status_code == 200
    engine_text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    (row,) = c3_json("pod", "status")["pods"]
    m = row["metrics"]
    assert row["serving"] and row["metrics_error"] is None
    assert m["engine"] == "vllm" and m["running"] == 0 and m["waiting"] == 0
    # The same numbers the engine itself reports.
    assert f'vllm:generation_tokens_total{{engine="0",model_name="stub/model"}} {float(m["generation_tokens_total"])}' in engine_text
    assert m["generation_tokens_total"] >= 7
    assert m["prompt_tps"] is None and m["generation_tps"] is None  # one scrape: no rate
    text = c3("pod", "status")
    assert text.returncode == 0 and "engine: req 0 run 0 wait · KV 0% · hit" in text.stdout
