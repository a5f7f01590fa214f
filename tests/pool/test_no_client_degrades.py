"""No client can degrade the pool (issue 26): a backend leaves rotation only on its own failures, never
because clients sent requests it answered with an error. Real `c3 pool serve` on loopback in front of
llama-server-like backends (`JsonBackend`: a body that is not JSON is a 500, as llama-server answers it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import httpx

from tests.pool.conftest import ROOT, raw_request, wait_until
from tests.pool.hostile import JsonBackend, cl, request

BROKEN = b'{"model": "m", "messages": [oops'
HOSTILE = {
    "broken-json": request(cl(BROKEN) + b"Connection: close\r\n", BROKEN, target=b"/v1/chat/completions"),
    "broken-json-1mib": request(cl(BROKEN + b" " * (1 << 20)) + b"Connection: close\r\n", BROKEN + b" " * (1 << 20), target=b"/v1/chat/completions"),
    "connect": request(cl(b"") + b"Connection: close\r\n", method=b"CONNECT", target=b"/v1/chat/completions"),
    "head-over-32-kib": request(b"X-Big: " + b"a" * (33 * 1024) + b"\r\nConnection: close\r\n" + cl(b"")),
}


def test_hostile_traffic_takes_no_backend_out_of_rotation(pool_process):
    backends = {name: JsonBackend(name) for name in ("a", "b")}
    try:
        pool = pool_process({n: b.url for n, b in backends.items()}, "--sticky", "none")
        legit: list[bool] = []
        hostile_statuses: list[bytes] = []
        go = threading.Event()

        def good(worker: int) -> None:
            go.wait()
            with httpx.Client(base_url=pool.url, timeout=20) as client:
                for i in range(300):
                    rid = f"{worker}-{i}"
                    try:
                        r = client.post("/v1/chat/completions", json={"id": rid, "messages": []})
                        legit.append(r.status_code == 200 and r.json().get("id") == rid)
                    except httpx.HTTPError:
                        legit.append(False)

        def bad(worker: int) -> None:
            go.wait()
            cases = sorted(HOSTILE)
            for i in range(80):
                answer = raw_request(pool.port, HOSTILE[cases[(worker + i) % len(cases)]])
                hostile_statuses.append(answer[9:12])

        threads = [threading.Thread(target=good, args=(w,)) for w in range(2)]
        threads += [threading.Thread(target=bad, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        go.set()
        for t in threads:
            t.join(timeout=240)
        assert len(legit) == 600 and len(hostile_statuses) == 320
        assert sum(legit) >= 0.999 * len(legit), f"{len(legit) - sum(legit)} of {len(legit)} legitimate requests failed"
        assert all(s.startswith((b"4", b"5")) for s in hostile_statuses), set(hostile_statuses)
        status = {b["node"]: b for b in pool.status()["backends"]}
        assert all(b["state"] == "up" and not b["suspect"] for b in status.values()), status
        assert "-> down" not in pool.log(), pool.log()
        assert all("CONNECT" not in b.methods for b in backends.values()), [b.methods for b in backends.values()]
        assert "Traceback" not in pool.log()
    finally:
        for b in backends.values():
            b.close()


STRAY = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 26\r\n\r\n{"backend":"x","id":"?"}\r\n'


def test_stray_bytes_after_a_response_never_reach_another_client(pool_process):
    """A backend that sends bytes after a complete response: that connection is closed, never reused,
    so those bytes are never read as the answer to the next client's request."""
    # In a process of its own: sharing this one's GIL with the clients, its stray send could be late
    # enough to follow the next request, which no proxy can tell from that request's answer.
    code = ("import sys, time; from tests.pool.hostile import JsonBackend; from tests.pool.test_no_client_degrades import STRAY; "
            "b = JsonBackend('s', stray=STRAY); print(b.port, flush=True); time.sleep(600)")
    backend = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert backend.stdout is not None
        port = int(backend.stdout.readline())
        pool = pool_process({"s": f"http://127.0.0.1:{port}"}, "--sticky", "none")
        # The first stray bytes are seen on the connection they follow (at the latest when it is taken
        # for the next request, 0.2 s on); from then on the backend's connections are never reused, so a
        # late stray send can never be read as another request's answer.
        with httpx.Client(base_url=pool.url, timeout=20) as c:
            for rid in ("w0", "w1"):
                assert c.post("/v1/chat/completions", json={"id": rid, "messages": []}).json()["id"] == rid
                time.sleep(0.2)
        wait_until(lambda: "sent bytes after a complete response; its connections are no longer reused" in pool.log(), timeout=10,
                   what="the stray bytes noticed")
        answers: list[tuple[str, int, str | None]] = []

        def client(worker: int) -> None:
            with httpx.Client(base_url=pool.url, timeout=20) as c:
                for i in range(100):
                    rid = f"{worker}-{i}"
                    try:
                        r = c.post("/v1/chat/completions", json={"id": rid, "messages": []})
                        answers.append((rid, r.status_code, r.json().get("id") if r.status_code == 200 else r.text))
                    except (httpx.HTTPError, ValueError) as exc:
                        answers.append((rid, 0, repr(exc)))

        threads = [threading.Thread(target=client, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        wrong = [a for a in answers if a[1] == 200 and a[2] != a[0]]
        assert len(answers) == 400 and not wrong, f"{len(wrong)} answers went to the wrong client: {wrong[:3]}"
        assert all(a[1] == 200 for a in answers), [a for a in answers if a[1] != 200][:3]
        assert "Traceback" not in pool.log()
    finally:
        backend.kill()
        backend.wait(10)
