"""The test-prompt key `t` against a real engine: a llama-server pod booted by `c3 pod up` on the real dockerd,
the cockpit on the real facade. `t` on the serving pod sends the prompt of `c3 pod try` in a worker and shows
the answer with TTFT, tokens and tokens/s; all of them must come from that engine. The pod's llama-server
samples greedily by default (`--temp 0`, which llama-server applies to every request that sets no
temperature, as `t` sends none), so the answer is the engine's own: the same prompt sent to the same port
directly at temperature 0 (streamed, as `t` asks) must give the same text and the same token count, and the served model is the
one the engine lists.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.real_engine.watching import boot_pod, cockpit_on

pytestmark = [pytest.mark.real_engine, pytest.mark.docker, pytest.mark.nvml]

SLUG = "llamacpp/real-tiny-greedy"


def streamed_answer(url: str, model: str, prompt: str, max_tokens: int) -> tuple[str, int | None]:
    """The prompt sent straight to the engine at temperature 0, streamed as `t` streams it (llama-server
    holds back a trailing incomplete UTF-8 sequence from a stream that a whole answer shows as U+FFFD, and
    the tiny model's text has such bytes): the text and the engine's own completion-token count."""
    request = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens, "temperature": 0,
               "cache_prompt": False, "stream": True, "stream_options": {"include_usage": True}}
    pieces: list[str] = []
    tokens = None
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=request, timeout=180) as answer:
        for line in answer.iter_lines():
            data = line[5:].strip() if line.startswith("data:") else "[DONE]"
            if data == "[DONE]":
                continue
            event = json.loads(data)
            pieces += [(choice.get("delta") or {}).get("content") or "" for choice in event.get("choices") or ()]
            tokens = (event.get("usage") or {}).get("completion_tokens", tokens)
    return "".join(pieces), tokens


@pytest.mark.timeout(600)
async def test_the_try_key_shows_a_real_llama_pods_own_answer_ttft_and_speed(pod_rig, real_images, monkeypatch):
    from backend.views.try_pod import DEFAULT_PROMPT
    from c3.metrics_text import try_numbers
    from c3.modals.try_prompt import MAX_TOKENS
    from tests.cockpit.conftest import orchestration, screen_text, wait_for

    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    pod_rig.add_entry({
        "slug": SLUG, "engine": "llamacpp", "image": real_images("llamacpp"), "model": "/models/tiny.gguf", "tp": 1,
        "max_model_len": 4096, "max_num_seqs": 2, "health_path": "/health",
        # -lv 4: llama-server logs its buffers at that verbosity (how c3 learns the KV cache is on the CPU);
        # --temp 0: greedy for every request that sets no temperature, so the answer can be compared.
        "extra_args": ["-lv", "4", "-t", "1", "--temp", "0"],
    })
    name = "tried"
    url = await boot_pod(pod_rig, name, SLUG)
    async with cockpit_on(name) as pilot:
        app = pilot.app
        orchestration(app).query_one("#pods").focus()
        await pilot.press("t")

        def landed() -> bool:
            text = screen_text(app)
            return type(app.screen).__name__ == "TryModal" and ("TTFT" in text or "✗" in text)

        await wait_for(pilot, landed, timeout=180, what="the answer or a refusal")
        result = app.screen.result
        shown = screen_text(app)
        assert app.screen.pod == name and result is not None, shown

    listed = (await asyncio.to_thread(httpx.get, f"{url}/v1/models", timeout=60)).json()["data"][0]["id"]
    expected, tokens = await asyncio.to_thread(streamed_answer, url, listed, DEFAULT_PROMPT, MAX_TOKENS)
    assert result.model == listed == "/models/tiny.gguf" and result.api == "chat", result
    assert result.url == f"{url}/v1/chat/completions", result  # the pod's own port
    assert expected.strip() and result.answer == expected, (result.answer, expected)
    assert result.tokens == tokens > 0, (result, tokens)
    assert 0 < result.ttft_ms <= result.total_ms and result.tokens_per_s > 0, result
    # What the modal shows is that result: the numbers line and the answer's words.
    assert try_numbers(result) in shown and f"try pod {name}" in shown, shown
    assert all(word in shown for word in expected.split()[:3]), (expected, shown)
