"""`c3 pool status` reads each live router's /c3/status: an answer that is JSON but not an object
lists that router as unreachable instead of crashing the command (found by mypy: the parsed
document was used as a dict unchecked)."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from backend.pool.status import pool_dir, read_pools


@pytest.fixture
def admin_answering():
    answer: dict[str, bytes] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = answer["body"]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def serve(body: bytes) -> str:
        answer["body"] = body
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    server.shutdown()
    server.server_close()


def _status_file(admin_url: str) -> None:
    # This test process stands in for the router: its pid is alive, so the file is not stale.
    pool_dir().mkdir(parents=True, exist_ok=True)
    doc = {"pid": os.getpid(), "bind": "127.0.0.1:9", "admin_url": admin_url, "sticky": "auto", "nodes": ["a", "b"]}
    (pool_dir() / "router-9.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("body", [b"[1, 2]", b'"ok"', b"null"])
def test_a_status_that_is_not_an_object_reads_as_unreachable(admin_answering, body):
    _status_file(admin_answering(body))
    [pool] = read_pools(timeout_s=5.0)
    assert not pool.reachable
    assert "not a JSON object" in (pool.error or "")
    assert [b.node for b in pool.backends] == ["a", "b"]


def test_a_status_object_is_read(admin_answering):
    _status_file(admin_answering(json.dumps({"pins": 3, "uptime_s": 1.5, "backends": []}).encode()))
    [pool] = read_pools(timeout_s=5.0)
    assert pool.reachable and pool.pins == 3 and pool.bind == "127.0.0.1:9"
