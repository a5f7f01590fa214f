"""`c3 pod try`: one streaming test prompt to a running pod on the simulated rig (the stub engine streams),
its numbers, and one clear error for a pod that cannot answer."""

from __future__ import annotations

import json
import time

from tests.runtime.helpers import c3, one_error_line, stub_entry, write_catalog
from tests.runtime.test_sim_lifecycle import create, sim  # noqa: F401 - the fixture

SLOW = {"C3_STUB_TOKEN_DELAY": "0.01"}


def test_try_streams_an_answer_with_ttft_and_tokens_per_second(sim):  # noqa: F811
    write_catalog([stub_entry(env=SLOW)])
    create(sim, "chat", "0")
    up = c3("pod", "up", "chat")
    assert up.returncode == 0, up.stdout + up.stderr
    tried = c3("pod", "try", "chat", "hello there", "--max-tokens", "5", "--json")
    assert tried.returncode == 0, tried.stdout + tried.stderr
    found = json.loads(tried.stdout)
    assert found["pod"] == "chat" and found["api"] == "chat" and found["url"].endswith("/v1/chat/completions")
    assert found["answer"].strip() and len(found["answer"].split()) == 5
    assert found["tokens"] == 5 and found["finish_reason"] == "length"
    assert found["ttft_ms"] > 0 and found["tokens_per_s"] > 0 and found["total_ms"] >= found["ttft_ms"]
    text = c3("pod", "try", "chat", "--max-tokens", "3")  # the default prompt
    assert text.returncode == 0, text.stdout + text.stderr
    answer, numbers = text.stdout.strip().splitlines()
    assert len(answer.split()) == 3
    assert numbers.startswith("[chat] TTFT ") and " ms · 3 tokens · " in numbers and "tok/s (chat, model " in numbers


def test_try_refuses_a_pod_that_cannot_answer(sim):  # noqa: F811
    write_catalog([stub_entry(), stub_entry("custom/slow", env={"C3_STUB_TOKEN_DELAY": "5"})])
    create(sim, "idle", "0")
    stopped = c3("pod", "try", "idle", "hi")
    assert stopped.returncode == 1 and "pod idle is not running (stopped)" in one_error_line(stopped.stderr)
    assert "hint: `c3 pod up idle` first" in stopped.stderr
    unknown = c3("pod", "try", "ghost", "hi")
    assert unknown.returncode == 1 and "pod `ghost` not found" in one_error_line(unknown.stderr)
    empty = c3("pod", "try", "idle", "  ")
    assert empty.returncode == 2 and "PROMPT is empty" in one_error_line(empty.stderr)
    bad = c3("pod", "try", "idle", "hi", "--max-tokens", "0")
    assert bad.returncode == 2 and one_error_line(bad.stderr)
    create(sim, "slow", "1", slug="custom/slow")
    assert c3("pod", "up", "slow").returncode == 0
    started = time.monotonic()
    late = c3("pod", "try", "slow", "hi", "--timeout", "2")
    assert late.returncode == 1 and "no complete answer within 2 s" in one_error_line(late.stderr)
    assert time.monotonic() - started < 15  # bounded: the deadline covers every read of the stream
