"""An ASGI app that records every request it receives, run under real uvicorn (`--http h11` or
`--http httptools`: the HTTP stacks vLLM and SGLang serve on) behind the router in the hostile-HTTP corpus.

`GET /__records` answers the list of requests seen so far (method, path, marker header, body); the
corpus compares it with the requests the router answered, so a smuggled request shows up as a record
nobody asked for. Every other path answers JSON naming the request it answered (`path`, `marker`),
so a client that gets someone else's answer is caught.
"""

from __future__ import annotations

import json

RECORDS: list[dict] = []


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    path = scope["path"]
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
    if path == "/__records":
        if scope["method"] == "DELETE":
            RECORDS.clear()
        out = json.dumps(RECORDS).encode()
    elif path == "/health":
        out = b"{}"
    else:
        rec = {"method": scope["method"], "path": path, "marker": headers.get("x-marker"), "body": body.decode("latin-1")[:200],
               "body_len": len(body), "host": headers.get("host"), "te": headers.get("transfer-encoding"), "cl": headers.get("content-length")}
        RECORDS.append(rec)
        out = json.dumps({"path": path, "marker": rec["marker"], "body_len": len(body)}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})
