"""backend.runtime.trial (`c3 pod try`'s request) against the stub engine over loopback: the API key
goes in the header and never into a result or a message, one error line per way it can fail (nothing
answers, a refused key, a stream broken off), and one deadline that a slow trickle cannot outlast."""

from __future__ import annotations

import time

import pytest

from backend.errors import Refused
from backend.runtime.trial import try_prompt
from tests.support import free_port

KEY = "sk-trial-secret-0123456789"


def _refused(port: int, **kw: object) -> Refused:
    with pytest.raises(Refused) as caught:
        try_prompt("p", port, "hi", **{"max_tokens": 4, "timeout_s": 10.0, **kw})  # type: ignore[arg-type]
    return caught.value


def test_the_key_is_sent_and_never_shown(stub_process):
    stub = stub_process("--tokens", "8", "--api-key", KEY)
    result = try_prompt("p", stub.port, "hi", max_tokens=4, timeout_s=10.0, api_key=KEY)
    assert result.tokens == 4 and result.api == "chat" and KEY not in result.model_dump_json()
    for key in (None, "sk-wrong-key"):
        refused = _refused(stub.port, api_key=key)
        assert "the engine wants an API key (HTTP 401)" in str(refused) and "VLLM_API_KEY" in (refused.hint or "")
        assert KEY not in str(refused) + (refused.hint or "") and "sk-wrong-key" not in str(refused) + (refused.hint or "")


def test_nothing_answering_and_a_broken_stream_are_one_line_each(stub_process):
    port = free_port()
    assert f"pod p: nothing answers on http://127.0.0.1:{port} (ConnectError)" == str(_refused(port))
    stub = stub_process("--tokens", "8", "--abort-after-chunks", "2")
    assert str(_refused(stub.port)).startswith("pod p: the engine broke off its answer (")


def test_a_slow_trickle_cannot_outlast_the_deadline(stub_process):
    # Every token comes well within the time left, but all of them take 4 s: the deadline (2 s) ends the read.
    stub = stub_process("--tokens", "20", "--token-delay", "0.2")
    started = time.monotonic()
    refused = _refused(stub.port, max_tokens=20, timeout_s=2.0)
    assert "pod p: no complete answer within 2 s" == str(refused) and time.monotonic() - started < 3.0
