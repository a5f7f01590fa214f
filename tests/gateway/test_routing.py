"""`c3 gateway serve`: one endpoint for the estate, routed by pod name or served model name."""

from __future__ import annotations

import json

from backend.actions.base import ignore_progress
from backend.actions.boot_pods import BootPods

from .conftest import create


def test_routes_by_pod_name_and_by_model_name_and_lists_both(ws, gateway):
    create(ws, "chat", 0)
    create(ws, "spare", 1)
    assert BootPods(ws, ("chat",)).run(ignore_progress).ok
    gw = gateway()
    status, _, body = gw.request("GET", "/v1/models")
    assert status == 200
    rows = {row["id"]: row["c3"] for row in json.loads(body)["data"]}
    assert rows["chat"] == {"kind": "pod", "pod": "chat", "pods": ["chat"], "slug": "vllm/qwen3-8b", "state": "running"}
    assert rows["spare"]["state"] == "stopped" and rows["spare"]["kind"] == "pod"
    # The model names both pods serve: the HF id, the slug's short name and the slug; a running pod is preferred.
    for name in ("Qwen/Qwen3-8B", "qwen3-8b", "vllm/qwen3-8b"):
        assert rows[name]["kind"] == "model" and rows[name]["pods"] == ["chat", "spare"] and rows[name]["pod"] == "chat"
    status, headers, body = gw.chat("chat")
    assert status == 200 and headers["x-c3-pod"] == "chat", body
    answer = json.loads(body)
    assert answer["choices"][0]["message"]["content"] and answer["model"] == "Qwen/Qwen3-8B"  # sent under a name the engine serves
    status, headers, body = gw.chat("Qwen/Qwen3-8B")
    assert status == 200 and headers["x-c3-pod"] == "chat" and json.loads(body)["model"] == "Qwen/Qwen3-8B"
    assert gw.control.starts == []  # chat already ran; nothing was started


def test_unknown_model_bad_json_and_no_model(ws, gateway):
    create(ws, "chat", 0)
    gw = gateway()
    status, _, body = gw.chat("nope/nope")
    error = json.loads(body)["error"]
    assert status == 404 and error["code"] == 404 and error["type"] == "invalid_request_error"
    assert "no pod serves model `nope/nope`; known: chat, Qwen/Qwen3-8B, qwen3-8b, vllm/qwen3-8b" in error["message"]
    status, _, body = gw.request("POST", "/v1/chat/completions", b"{not json")
    assert status == 400 and "not JSON" in json.loads(body)["error"]["message"]
    for doc in ({"messages": []}, {"model": 3}, [1, 2]):
        status, _, body = gw.request("POST", "/v1/completions", doc)
        assert status == 400 and json.loads(body)["error"]["type"] == "invalid_request_error", body
    status, _, body = gw.request("GET", "/v1/chat/completions")
    assert status == 405
    status, _, body = gw.request("POST", "/v1/other", {"model": "chat"})
    assert status == 404 and "no route /v1/other" in json.loads(body)["error"]["message"]
    assert gw.control.starts == []  # nothing is started for a request that routes nowhere


def test_the_pools_strict_front_refuses_what_the_pool_refuses(ws, gateway):
    import socket

    create(ws, "chat", 0)
    gw = gateway(body_limit=4096)
    for raw, code in ((b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", b" 400 "),
                      (b"GET /v1/models HTTP/1.1\r\n\r\n", b" 400 "),  # no Host
                      (b"TRACE / HTTP/1.1\r\nHost: x\r\n\r\n", b" 405 "),
                      (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999\r\n\r\n", b" 413 ")):
        with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as sock:
            sock.sendall(raw)
            answer = sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1") and code in answer.split(b"\r\n")[0], (raw, answer)


def test_streaming_passes_through(ws, gateway):
    create(ws, "chat", 0)
    assert BootPods(ws, ("chat",)).run(ignore_progress).ok
    gw = gateway()
    status, headers, body = gw.chat("qwen3-8b", stream=True)
    assert status == 200 and headers["content-type"].startswith("text/event-stream") and headers.get("transfer-encoding") == "chunked"
    events = [line for line in body.decode().split("\n\n") if line.strip()]
    assert len(events) > 3 and events[-1] == "data: [DONE]"
    deltas = [json.loads(e.removeprefix("data: "))["choices"][0]["delta"] for e in events[:-1]]
    assert "".join(d.get("content") or "" for d in deltas)
