"""No client can degrade the pool (issue 26): a backend leaves rotation only on its own failures, never
because clients sent requests it answered with an error. Real `c3 pool serve` on loopback in front of
llama-server-like backends (`JsonBackend`: a body that is not JSON is a 500, as llama-server answers it).
"""

from __future__ import annotations

import threading

import httpx

from tests.pool.conftest import raw_request
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
        assert "Traceback" not in pool.log()
    finally:
        for b in backends.values():
            b.close()
