"""The stub engine over real HTTP on loopback (httpx), started as a local process."""

from __future__ import annotations

import json
import re
import socket
import time

import httpx
import pytest

CHAT = {"model": "stub", "messages": [{"role": "user", "content": "hello there"}]}


def sse_events(response: httpx.Response) -> list[str]:
    return [line[len("data: "):] for line in response.iter_lines() if line.startswith("data: ")]


def poll(fn, timeout: float = 15.0, every: float = 0.05):
    """Call fn until it returns something truthy, or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout}s")


@pytest.fixture
def stub(stub_process):
    return stub_process("--model", "org/model", "--served-model-name", "stub", "--name", "b1", "--tokens", "6")


def test_models_health_and_backend_header(stub):
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        models = client.get("/v1/models")
        assert models.status_code == 200
        assert models.headers["x-stub-backend"] == "b1"
        assert [m["id"] for m in models.json()["data"]] == ["stub"]
        assert models.json()["data"][0]["root"] == "org/model"
        assert client.get("/health").status_code == 200
        assert client.get("/nope").status_code == 404
        assert client.get("/v1/chat/completions").status_code == 405


def test_chat_completion_is_deterministic_and_counts_tokens(stub):
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        first = client.post("/v1/chat/completions", json=CHAT).json()
        second = client.post("/v1/chat/completions", json=CHAT).json()
        limited = client.post("/v1/chat/completions", json={**CHAT, "max_tokens": 3}).json()
    assert first["object"] == "chat.completion"
    assert first["choices"][0]["message"]["content"] == second["choices"][0]["message"]["content"]
    assert len(first["choices"][0]["message"]["content"].split()) == 6
    assert first["usage"]["completion_tokens"] == 6 and first["choices"][0]["finish_reason"] == "stop"
    assert limited["usage"]["completion_tokens"] == 3 and limited["choices"][0]["finish_reason"] == "length"


def test_text_completion_and_errors(stub):
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        done = client.post("/v1/completions", json={"model": "stub", "prompt": "x", "max_tokens": 2}).json()
        assert done["object"] == "text_completion" and len(done["choices"][0]["text"].split()) == 2
        missing = client.post("/v1/completions", json={"model": "other", "prompt": "x"})
        assert missing.status_code == 404 and "other" in missing.json()["message"]
        bad = client.post("/v1/chat/completions", content=b"{not json")
        assert bad.status_code == 400 and bad.json()["object"] == "error"


def test_keep_alive_serves_many_requests_on_one_connection(stub):
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        for _ in range(20):
            assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
        records = client.get("/debug/requests").json()
    peers = {r["peer"] for r in records["requests"]}
    assert records["inference"] == 20 and len(peers) == 1


def test_chat_stream_sse(stub):
    body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        with client.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["x-stub-backend"] == "b1"
            events = sse_events(response)
        # the connection is still usable afterwards (chunked framing ended cleanly)
        assert client.get("/health").status_code == 200
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert len(text.split()) == 6
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] == 6


def test_completion_stream_sse(stub):
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        with client.stream("POST", "/v1/completions", json={"prompt": "p", "stream": True, "max_tokens": 4}) as r:
            events = sse_events(r)
    assert events[-1] == "[DONE]"
    assert sum(1 for e in events[:-1] if json.loads(e)["choices"][0]["text"]) == 4


def test_token_delay_paces_the_stream(stub_process):
    stub = stub_process("--tokens", "5", "--token-delay", "0.1")
    started = time.monotonic()
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        with client.stream("POST", "/v1/chat/completions", json={**CHAT, "model": None, "stream": True}) as r:
            events = sse_events(r)
    assert events[-1] == "[DONE]"
    assert time.monotonic() - started >= 0.5


def test_metrics_show_a_running_request(stub_process):
    stub = stub_process("--served-model-name", "m", "--tokens", "4")
    with httpx.Client(base_url=stub.url, timeout=10) as client, httpx.Client(base_url=stub.url, timeout=10) as other:
        # Held (never released): it runs until this client leaves, however slow the machine.
        with client.stream("POST", "/v1/chat/completions", json={"model": "m", "stream": True, "messages": []}, headers={"X-Stub-Hold": "m"}):
            line = poll(lambda: re.search(r'^vllm:num_requests_running\{[^}]*model_name="m"\} 1\.0$',
                                          other.get("/metrics").text, re.M))
            assert line
        def idle():
            text = other.get("/metrics").text
            return text if re.search(r"^vllm:num_requests_running\{.*\} 0\.0$", text, re.M) else None

        text = poll(idle)
    assert "# TYPE vllm:generation_tokens_total counter" in text


def test_a_held_request_waits_for_its_release(stub):
    """`X-Stub-Hold: NAME` parks a stream after its head and role chunk (a plain reply before it is
    sent) until `POST /debug/release/NAME`: tests wait on that signal, not on a stream sized by guess."""
    import threading

    box: dict = {}

    def read() -> None:
        with httpx.stream("POST", stub.url + "/v1/chat/completions", json={**CHAT, "stream": True}, headers={"X-Stub-Hold": "s"}, timeout=60) as r:
            lines = r.iter_lines()
            box["first"] = next(lines)
            box["rest"] = list(lines)

    reader = threading.Thread(target=read)
    reader.start()
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        try:
            poll(lambda: client.get("/debug/requests").json()["held"] == {"s": 1})
            poll(lambda: "first" in box)
            assert '"role": "assistant"' in box["first"] and "rest" not in box and reader.is_alive()
            quick = client.post("/v1/chat/completions", json=CHAT)  # not held: it answers meanwhile
            assert quick.status_code == 200
            assert client.post("/debug/release/s").json() == {"released": "s", "were_held": 1}
        finally:
            client.post("/debug/release/s")
            reader.join(timeout=30)
        assert [line for line in box["rest"] if line][-1] == "data: [DONE]"
        assert client.get("/debug/requests").json()["held"] == {}
        # A gate released before anything reached it lets requests straight through.
        assert client.post("/v1/chat/completions", json=CHAT, headers={"X-Stub-Hold": "s"}).status_code == 200


def test_a_held_reply_ends_when_its_client_goes(stub):
    body = json.dumps(CHAT).encode()
    with socket.create_connection(("127.0.0.1", stub.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Stub-Hold: q\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        with httpx.Client(base_url=stub.url, timeout=10) as client:
            poll(lambda: client.get("/debug/requests").json()["held"] == {"q": 1})
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        debug = poll(lambda: (d := client.get("/debug/requests").json())["disconnects"] == 1 and d)
    assert debug["held"] == {} and debug["running"] == 0
    assert [r for r in debug["requests"] if r["path"] == "/v1/chat/completions"][0]["disconnected"]


def test_boot_log_then_port(stub_process):
    stub = stub_process("--startup-delay", "1.5", "--max-model-len", "8192", wait=False)
    log = poll(lambda: "Starting to load model" in stub.log() and stub.log())
    # the port is not open while the engine is still loading (vLLM binds after the engine is up)
    if "Starting vLLM API server" not in log:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", stub.port), timeout=0.5).close()
    stub.wait_ready()
    log = poll(lambda: "Application startup complete" in stub.log() and stub.log())
    assert re.search(r"Model loading took [0-9.]+ GiB memory and [0-9.]+ seconds", log)
    assert re.search(r"Available KV cache memory: [0-9.]+ GiB", log)
    assert re.search(r"GPU KV cache size: [0-9,]+ tokens", log)
    assert re.search(r"Maximum concurrency for 8,192 tokens per request: [0-9.]+x", log)


def test_crash_during_boot_exits_nonzero_without_serving(stub_process):
    stub = stub_process("--crash-during-boot", "--startup-delay", "0.2", wait=False)
    assert stub.wait_exit(15) != 0
    assert "EngineCore failed to start" in stub.log()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", stub.port), timeout=0.5).close()


def test_crash_after_n_requests(stub_process):
    stub = stub_process("--crash-after", "2")
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        assert client.post("/v1/chat/completions", json={"messages": []}).status_code == 200
        assert client.post("/v1/chat/completions", json={"messages": []}).status_code == 200
    assert stub.wait_exit(15) == 1


def test_hang_accepts_but_never_answers(stub_process):
    stub = stub_process("--hang")
    with httpx.Client(base_url=stub.url, timeout=httpx.Timeout(1.0, connect=5.0)) as client:
        with pytest.raises(httpx.ReadTimeout):
            client.get("/health")
    assert stub.alive()


def test_abort_after_chunks_kills_the_stream_midway(stub_process):
    stub = stub_process("--tokens", "20", "--abort-after-chunks", "3")
    contents = []
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            with client.stream("POST", "/v1/chat/completions", json={"messages": [], "stream": True}) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        contents.append(json.loads(line[6:])["choices"][0]["delta"].get("content"))
        assert client.get("/debug/requests").json()["aborted"] == 1
    assert len([c for c in contents if c]) == 3
    assert stub.alive()


def test_abort_mode_exit_kills_the_backend(stub_process):
    stub = stub_process("--tokens", "20", "--abort-after-chunks", "1", "--abort-mode", "exit")
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            with client.stream("POST", "/v1/chat/completions", json={"messages": [], "stream": True}) as r:
                sse_events(r)
    assert stub.wait_exit(15) == 1


def test_client_disconnect_is_recorded(stub_process):
    stub = stub_process("--tokens", "200", "--token-delay", "0.02")
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        with client.stream("POST", "/v1/chat/completions", json={"messages": [], "stream": True}) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: ")
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        debug = poll(lambda: (d := client.get("/debug/requests").json())["disconnects"] == 1 and d)
        request = [r for r in debug["requests"] if r["path"] == "/v1/chat/completions"][0]
        assert request["disconnected"] and request["chunks"] < 200
        assert client.delete("/debug/requests").json() == {"cleared": True}
        assert client.get("/debug/requests").json()["count"] == 0


def test_debug_echoes_request_headers(stub):
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        client.post("/v1/chat/completions", json=CHAT, headers={"X-Router-Session": "abc"})
        records = client.get("/debug/requests").json()["requests"]
    assert records[-1]["headers"]["x-router-session"] == "abc"
    assert records[-1]["model"] == "stub"


def test_api_key_is_enforced(stub_process):
    stub = stub_process(env={"VLLM_API_KEY": "sekret"})
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        assert client.get("/v1/models").status_code == 401
        assert client.get("/v1/models", headers={"Authorization": "Bearer sekret"}).status_code == 200
        assert client.get("/health").status_code == 200


def test_sigterm_is_a_clean_exit_even_during_boot(stub_process):
    serving = stub_process()
    booting = stub_process("--startup-delay", "60", wait=False)
    poll(lambda: "Automatically detected platform" in booting.log())
    assert serving.stop() == 0
    assert booting.stop() == 0


def test_a_thousand_concurrent_streams(stub_process):
    """The router benchmark holds ~1,000 SSE streams open against one stub: all must finish."""
    import asyncio
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    stub = stub_process("--tokens", "10", "--token-delay", "0.05")
    body = json.dumps({"stream": True, "messages": []}).encode()
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)

    async def one() -> bool:
        reader, writer = await asyncio.open_connection("127.0.0.1", stub.port)
        writer.write(request)
        data = b""
        while not data.endswith(b"\r\n0\r\n\r\n"):
            chunk = await reader.read(65536)
            if not chunk:
                break
            data += chunk
        writer.close()
        return b"data: [DONE]" in data

    async def run() -> list[bool]:
        return await asyncio.wait_for(asyncio.gather(*(one() for _ in range(1000))), timeout=120)

    assert sum(asyncio.run(run())) == 1000
    with httpx.Client(base_url=stub.url, timeout=10) as client:
        assert client.get("/debug/requests").json()["inference"] == 1000


def test_expect_100_continue_and_unwritable_registry(stub_process, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    stub = stub_process(env={"C3_GPU_REGISTRY": str(blocker / "sub")})  # cannot be created: still serves
    with socket.create_connection(("127.0.0.1", stub.port), timeout=10) as sock:
        body = json.dumps({"messages": [], "max_tokens": 2}).encode()
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body))
        assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(body)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK")
    assert "cannot write GPU registration" in stub.log()


def test_debug_record_redacts_credentials(stub):
    import hashlib

    with httpx.Client(base_url=stub.url, timeout=10) as client:
        client.post("/v1/chat/completions", json=CHAT, headers={"Authorization": "Bearer sk-secret"})
        records = client.get("/debug/requests").json()["requests"]
    shown = records[-1]["headers"]["authorization"]
    assert "sk-secret" not in json.dumps(records)
    assert shown == f"<redacted sha256:{hashlib.sha256(b'Bearer sk-secret').hexdigest()[:12]}>"
