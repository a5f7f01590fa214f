"""vLLM's sleep mode over HTTP: put a pod's engine to sleep, wake it, ask whether it sleeps.

vLLM serves `POST /sleep?level=N`, `POST /wake_up` and `GET /is_sleeping` only when the server runs with
`VLLM_SERVER_DEV_MODE=1` (c3 sets it for a pod with `sleep_mode: true`); a 404 on them means it does not.
Level 1 moves the weights to CPU RAM and drops the KV cache; what that frees on the GPU is priced by the
gateway's swap plan (`swap.sleeping_gib`), never read from these answers. A request that reaches a
sleeping engine waits in the engine until it is woken.

Blocking calls (the gateway runs them in worker threads); standard library only.
"""

from __future__ import annotations

import http.client
import json

from backend.errors import C3Error

TIMEOUT_S = 300.0
"""Level 1 copies the weights to CPU RAM (and waking copies them back): tens of GiB take a while."""


class SleepError(C3Error):
    """The engine refused a sleep call, or did not answer it."""


def _call(host: str, port: int, method: str, path: str, api_key: str | None, timeout_s: float) -> bytes:
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        body = resp.read(65536)
    except (OSError, http.client.HTTPException) as exc:
        raise SleepError(f"{method} {path} on port {port}: {getattr(exc, 'strerror', None) or exc or type(exc).__name__}",
                         hint="is the pod running?") from None
    finally:
        conn.close()
    if resp.status == 404:
        raise SleepError(f"{method} {path} on port {port}: 404, the engine has no sleep routes",
                         hint="vLLM serves them only with VLLM_SERVER_DEV_MODE=1 (a pod with `sleep_mode: true` gets it)")
    if resp.status >= 300:
        text = body.decode("utf-8", "replace").strip().splitlines()
        raise SleepError(f"{method} {path} on port {port}: HTTP {resp.status}{': ' + text[0][:200] if text else ''}")
    return body


def sleep(host: str, port: int, level: int = 1, api_key: str | None = None, timeout_s: float = TIMEOUT_S) -> None:
    """Put the engine to sleep at `level` (1: weights to CPU RAM, KV dropped)."""
    _call(host, port, "POST", f"/sleep?level={int(level)}", api_key, timeout_s)


def wake(host: str, port: int, api_key: str | None = None, timeout_s: float = TIMEOUT_S) -> None:
    """Wake the engine (held requests are answered after this)."""
    _call(host, port, "POST", "/wake_up", api_key, timeout_s)


def is_sleeping(host: str, port: int, api_key: str | None = None, timeout_s: float = 10.0) -> bool:
    """What `GET /is_sleeping` says."""
    body = _call(host, port, "GET", "/is_sleeping", api_key, timeout_s)
    try:
        answer = json.loads(body)
    except ValueError:
        raise SleepError(f"GET /is_sleeping on port {port}: not JSON") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("is_sleeping"), bool):
        raise SleepError(f"GET /is_sleeping on port {port}: no is_sleeping in the answer")
    return answer["is_sleeping"] is True
